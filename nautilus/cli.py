"""The ``nautilus`` command: ``config``, ``query``, ``sources``, ``load``, ``serve``, ``mcp``,
``demo`` and ``eval``.

Output goes to stdout, logs to stderr. No input produces a traceback: known
problems print one clear line and exit 1; usage errors exit 2. Unless
``NAUTILUS_LOG_LEVEL`` says otherwise, only ``serve`` and ``mcp`` log at info: the other
commands' output is the point, so they log warnings and errors only.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import shutil
import sys
import textwrap
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from nautilus import __version__
from nautilus.broker import Broker, applied_settings, boost_problems
from nautilus.config import NautilusSettings, collect_source_boosts
from nautilus.errors import NautilusError
from nautilus.evaluation import command as eval_command
from nautilus.log import LogSettings, configure_logging, get_logger
from nautilus.pages import PageError, Paging, paging
from nautilus.records import RankedRow
from nautilus.response_hash import json_default
from nautilus.service.manifest import with_manifest
from nautilus.settings_parsing import parse_int
from nautilus.sources.factory import (
    SourceConfigError,
    build_sources,
    bundled_demo_config,
    load_sources,
    sources_json_schema,
)
from nautilus.sources.sqlite.base import SqliteSource
from nautilus.synthesis.basic import BasicSynthesizer
from nautilus.synthesis.ranking import RankingSynthesizer

logger = get_logger("nautilus.cli")

DEMO_QUERIES = (
    "orders database disk almost full",
    "users keep getting logged out of their sessions",
    "card payments failing with timeouts at checkout",
)
#: What ``query`` says when no ranking knob is set (the rows are the sources' own order).
RANKING_OFF = ("ranking: off — exact passthrough: rows in source order, no scores to explain; "
               "set NAUTILUS_RANKING_TOP_K, NAUTILUS_RANKING_IDF, NAUTILUS_SOURCE_BOOSTS, "
               "NAUTILUS_RANKING_MAX_CANDIDATES or NAUTILUS_RANKING_DEDUP_KEY "
               "(or --top-k, --idf, --boost) to rank")
_DESCRIPTION = ("The ranking layer for retrieval brokers: ask every source, rank the union, "
                "keep the top K. Commands: config, query, sources, load, serve, mcp, demo, eval "
                "('nautilus COMMAND --help' for each).")
_NO_SOURCES = "at least one source; docs/sources.md has an example of each type"
_SUMMARY_FIELDS = ("title", "name", "subject", "question", "summary", "description", "text",
                   "body", "answer", "content")


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    log = LogSettings()
    level = (log.log_level.strip().lower() if "log_level" in log.model_fields_set
             else "info" if args.command in ("serve", "mcp") else "warning")
    configure_logging(level, log.log_format.strip().lower())
    try:
        return int(args.run(args))
    except (NautilusError, ImportError) as exc:  # nautilus' own, and a missing extra
        print(f"nautilus: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # the last line of defence: a clear line, never a traceback
        logger.error("unexpected_error", error_type=type(exc).__name__, error=str(exc)[:500])
        print(f"nautilus: unexpected {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nautilus", description=_DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"nautilus {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    config = commands.add_parser("config", help="show the effective settings, every "
                                                "skipped entry and the sources file's status")
    config.add_argument("--config", help="sources file (default: NAUTILUS_CONFIG, else the demo)")
    config.add_argument("--json", action="store_true", help="one JSON object on stdout")
    config.add_argument("--strict", action="store_true",
                        help="exit 1 if any entry was skipped or the sources file is broken "
                             "(for deployment pipelines)")
    config.add_argument("--schema", action="store_true",
                        help="print the sources file's JSON Schema and exit")
    config.add_argument("--env-file", metavar="FILE",
                        help="check the NAUTILUS_* settings of this dotenv file instead of "
                             "the environment")
    config.add_argument("--manifest", metavar="FILE",
                        help="check the NAUTILUS_* env of a Kubernetes Deployment/StatefulSet "
                             "(with its ConfigMaps) or a compose file, without deploying it")
    config.set_defaults(run=with_manifest(_run_config))

    query = commands.add_parser("query", help="ask every source and show the ranked answer")
    query.add_argument("text", help="the query")
    query.add_argument("--config", help="sources file (default: NAUTILUS_CONFIG, else the demo)")
    query.add_argument("--top-k", type=_top_k, metavar="K", help="keep the K best rows")
    query.add_argument("--boost", action="append", default=[], type=_boost, metavar="ID:LEVEL",
                       help="boost a source (repeatable); replaces NAUTILUS_SOURCE_BOOSTS")
    query.add_argument("--idf", action="store_true", help="turn on the batch-local IDF factor")
    query.add_argument("--json", action="store_true", help="the BrokerResponse as one JSON object")
    query.add_argument("--explain", action="store_true", help="show each score's components")
    query.add_argument("--vectors", action="store_true",
                       help="with --json: keep the rows' vectors (the 'embedding' field)")
    paged = query.add_mutually_exclusive_group()
    paged.add_argument("--page", type=_top_k, metavar="N",
                       help="page N of the ranking, K rows a page (needs --top-k or "
                            "NAUTILUS_RANKING_TOP_K)")
    paged.add_argument("--cursor", metavar="CURSOR",
                       help="the next page: the cursor a previous page printed")
    query.set_defaults(run=_run_query)

    sources = commands.add_parser("sources", help="manage the sources' built data")
    actions = sources.add_subparsers(dest="action", required=True)
    rebuild = actions.add_parser("rebuild", help="rebuild every SQLite source's database now")
    rebuild.add_argument("--config", help="sources file (default: NAUTILUS_CONFIG, else the demo)")
    rebuild.set_defaults(run=_run_sources_rebuild)
    load = commands.add_parser("load", help="create the PostgreSQL sources' tables and indexes "
                                            "and load their seed files (idempotent)")
    load.add_argument("--config", help="sources file (default: NAUTILUS_CONFIG)")
    load.add_argument("--replace", action="store_true",
                      help="drop and rebuild each table (e.g. to change the embedding model)")
    load.add_argument("--prune", action="store_true",
                      help="also delete the rows whose id is no longer in the seed "
                           "(a load otherwise only inserts and updates)")
    load.set_defaults(run=_run_load)
    serve = commands.add_parser("serve",
                                help="run the HTTP service (extra nautilus-ranking[serve])")
    serve.add_argument("--config", help="sources file (default: NAUTILUS_CONFIG, else the demo)")
    serve.add_argument("--host", help="address to bind (default NAUTILUS_SERVE_HOST, 127.0.0.1)")
    serve.add_argument("--port", type=_port, help="port (default NAUTILUS_SERVE_PORT, 8000)")
    serve.add_argument("--workers", type=_top_k, metavar="N",
                       help="worker processes (default NAUTILUS_SERVE_WORKERS, 1)")
    serve.set_defaults(run=_run_serve)
    mcp = commands.add_parser("mcp",
                              help="run the MCP server for agents (extra nautilus-ranking[mcp])")
    mcp.add_argument("--config", help="sources file (default: NAUTILUS_CONFIG, else the demo)")
    mcp.add_argument("--transport", choices=("stdio", "http"), default="stdio",
                     help="stdio (default: an agent starts this command) or http "
                          "(streamable HTTP at /mcp)")
    mcp.add_argument("--host", help="http: address to bind (default NAUTILUS_SERVE_HOST)")
    mcp.add_argument("--port", type=_port, help="http: port (default 8001)")
    mcp.set_defaults(run=_run_mcp)

    demo = commands.add_parser("demo", help="run demo queries: passthrough beside ranked")
    demo.add_argument("--top-k", type=_top_k, default=8, metavar="K")
    demo.add_argument("--postgres", action="store_true",
                      help="serve the demo from an embedded PostgreSQL started on the fly")
    demo.set_defaults(run=_run_demo)

    eval_command.add_parser(commands)
    return parser


# --- config ------------------------------------------------------------------------------

def _run_config(args: argparse.Namespace) -> int:
    if args.schema:
        print(json.dumps(sources_json_schema(), indent=2, sort_keys=True))
        return 0
    with _quiet("nautilus.config") if args.strict else contextlib.nullcontext():
        settings = NautilusSettings()  # --strict reports each problem itself, once
    path = _config_path(settings, args.config)
    listing, source_error = _check_sources(settings, path)
    if listing == []:
        source_error = f"{path}: lists no sources (valid: {_NO_SOURCES})"
    source_ids = None if listing is None else [s["id"] for s in listing]
    problems = list(settings.problems) + list(
        boost_problems(settings, source_ids) if source_ids is not None else ())
    failed = args.strict and bool(problems or source_error is not None)
    if args.json:
        print(json.dumps({
            "settings": settings.effective(),
            "ranking_enabled": settings.ranking_enabled,
            "skipped": [{"variable": p.variable, "value": p.value, "reason": p.reason,
                         "valid": p.valid, "message": p.message} for p in problems],
            "sources_file": {"path": str(path), "ok": source_error is None,
                             "error": source_error, "sources": listing or []},
        }, indent=2, sort_keys=True))
    elif not failed:  # a failed gate prints its problems alone, on stderr
        print(_settings_table(settings))
        print(f"\nranking: {'on' if settings.ranking_enabled else 'off (exact passthrough)'}")
        print(f"sources: {path}: " + (f"ERROR {source_error}" if source_error is not None
                                      else "" if listing else "(none)"))
        for source in listing or []:
            print("  - " + "  ".join(source.values()))
        print("skipped:" if problems else "skipped: none")
        for problem in problems:
            print(f"  - {problem.message}")
    if failed:
        for problem in problems:
            print(f"nautilus: {problem.message}", file=sys.stderr)
        if source_error is not None:
            print(f"nautilus: {source_error}", file=sys.stderr)
        return 1
    return 0


@contextlib.contextmanager
def _quiet(name: str) -> Iterator[None]:
    """The stdlib logger ``name`` off for the block (its warnings are reported otherwise)."""
    target = logging.getLogger(name)
    was = target.disabled
    target.disabled = True
    try:
        yield
    finally:
        target.disabled = was


def _check_sources(settings: NautilusSettings,
                   path: Path) -> tuple[list[dict[str, str]] | None, str | None]:
    """Validate the sources file as a broker would (without building databases or
    connecting to one), and PostgreSQL sources' seeds as ``load`` would: each source's id
    and type (and a database's DSN, password masked), or the problem."""
    try:
        sources, _ = build_sources(path, settings.data_dir, settings.embedder,
                                   settings.embedder_cache_size)
    except (SourceConfigError, ImportError) as exc:
        return None, str(exc)
    for source in sources:
        source.close()
    specs = load_sources(path).specs
    from nautilus.sources.postgres.load import LoadError, check_seeds, postgres_specs
    try:  # a PostgreSQL source's seed is read only by `load`: check it as load would
        check_seeds(postgres_specs(specs), path.parent)
    except LoadError as exc:
        return None, f"{path}: {exc}"
    return [{"id": spec.id, "type": spec.type,
             **({"dsn": str(spec.dsn)} if hasattr(spec, "dsn") else {})}  # Dsn masks itself
            for spec in specs], None


def _settings_table(settings: NautilusSettings) -> str:
    rows = []
    for name, value in settings.effective().items():
        if isinstance(value, dict):
            shown = ",".join(f"{k}:{v}" for k, v in value.items()) or "(unset)"
        else:
            shown = "(unset)" if value is None else str(value).lower() if isinstance(
                value, bool) else str(value)
        rows.append((name, shown))
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {shown}" for name, shown in rows)


def _config_path(settings: NautilusSettings, given: str | None) -> Path:
    return Path(given or settings.config or bundled_demo_config()).expanduser()


# --- sources -----------------------------------------------------------------------------

def _run_sources_rebuild(args: argparse.Namespace) -> int:
    settings = NautilusSettings()
    path = _config_path(settings, args.config)
    sources, _ = build_sources(path, settings.data_dir, settings.embedder,
                               settings.embedder_cache_size)
    failed = 0
    for source in sources:
        if not isinstance(source, SqliteSource):  # only SQLite sources are built by nautilus
            print(f"{source.id}: nothing to build")
            continue
        try:
            source.rebuild()
        except Exception as exc:  # one source's failure must not hide the others'
            failed += 1
            print(f"nautilus: {source.id}: {type(exc).__name__}: {exc}", file=sys.stderr)
            continue
        print(f"{source.id}: rebuilt {source.path}")
    for source in sources:
        source.close()
    return 1 if failed else 0


# --- query -------------------------------------------------------------------------------

def _top_k(text: str) -> int:
    """``--top-k``: an integer >= 1 (argparse names the flag in its error)."""
    value, problem = parse_int("--top-k", text)  # the rules of NAUTILUS_RANKING_TOP_K
    if problem is not None or value is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer >= 1")
    return value


def _port(text: str) -> int:
    """``--port``: 1-65535."""
    if not text.strip().isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (1-65535)")
    return int(text)


def _boost(text: str) -> str:
    """``--boost``: one ``id:level`` entry, checked like NAUTILUS_SOURCE_BOOSTS."""
    boosts, problems = collect_source_boosts(text)
    if problems:
        raise argparse.ArgumentTypeError(f"{problems[0].value!r}: {problems[0].reason} "
                                         f"(valid levels: {problems[0].valid})")
    if not boosts:
        raise argparse.ArgumentTypeError("empty entry (expected ID or ID:LEVEL)")
    return text

def _run_query(args: argparse.Namespace) -> int:
    overrides: dict[str, Any] = {}
    if args.top_k is not None:
        overrides["ranking_top_k"] = args.top_k
    if args.boost:
        overrides["source_boosts"] = ",".join(args.boost)
    if args.idf:
        overrides["ranking_idf"] = True
    settings = NautilusSettings(**overrides)
    broker = Broker.from_config(args.config, settings)
    if not broker.sources:
        print(f"nautilus: {_config_path(settings, args.config)}: lists no sources, so there "
              f"is nothing to ask (valid: {_NO_SOURCES})", file=sys.stderr)
        return 1
    try:
        pages = _paging(args, broker, settings)
    except PageError as exc:
        print(f"nautilus: {exc}", file=sys.stderr)
        return 2
    response = broker.request(args.text)
    page = None
    if pages is not None:
        try:
            response, page = pages.cut(response)
        except PageError as exc:
            print(f"nautilus: {exc}", file=sys.stderr)
            return 1
    all_failed = bool(broker.sources) and len(response.sources_errored) == len(broker.sources)
    ranked = broker.synthesizer.ranking_enabled
    if args.json:
        out = response.to_dict(vectors=args.vectors, ranking_enabled=ranked)
        out["synthesizer"] = type(broker.synthesizer).__name__
        if page is not None:
            out["page"] = page
        print(json.dumps(out, default=json_default))
    else:
        applied: dict[str, str] = getattr(broker.synthesizer, "source_boosts", {})
        print(f"query: {args.text}")
        print(f"synthesizer: {type(broker.synthesizer).__name__}"
              + (f"  (boosts: {', '.join(f'{k}:{v}' for k, v in applied.items())})"
                 if applied else ""))
        if not ranked:
            print(RANKING_OFF)
        print(_ranked_table(response.ranking, args.explain and ranked, ranked))
        for error in response.sources_errored:
            print(f"error: {error.source_id}: {error.error_type}: {error.message}")
        print(f"response_hash: {response.response_hash}  ({response.duration_ms} ms)")
        if page is not None:
            print(f"page {page['number']} ({page['size']} rows a page); "
                  + (f"next: --cursor {page['next_cursor']}" if page["next_cursor"]
                     else "no next page"))
    if all_failed:
        print("nautilus: every source failed (see the errors above)", file=sys.stderr)
        return 1
    return 0


def _paging(args: argparse.Namespace, broker: Broker,
            settings: NautilusSettings) -> Paging | None:
    """The page asked for, its ranker installed on ``broker`` (the settings' boosts
    cut to the broker's sources, as the broker and the service cut them)."""
    settings = applied_settings(settings, [s.id for s in broker.sources])
    pages = paging(args.text, settings, [s.id for s in broker.sources],
                   page=args.page, cursor=args.cursor)
    if pages is not None:
        broker.synthesizer = pages.synthesizer(settings, broker.synthesizer.embedder)
    return pages


def summarize(row: dict[str, Any], width: int = 72) -> str:
    """One line that tells a person what a row is."""
    ident = row.get("id")
    text = next((str(row[f]) for f in _SUMMARY_FIELDS if isinstance(row.get(f), str)), None)
    if text is None:
        text = " ".join(str(v) for k, v in row.items() if isinstance(v, str) and k != "id")
    if isinstance(row.get("edge"), str):
        text = f"{text} [{row['edge']}]"
    line = f"{ident}  {text}" if ident is not None and str(ident) not in text else text
    line = " ".join(line.split())
    return textwrap.shorten(line, width=width, placeholder="…") if line else "(no text)"


def _ranked_table(ranking: list[RankedRow], explain: bool, ranked: bool = True) -> str:
    head = f"{'rank':>4}  {'source':<12} {'score':>7}  "
    if explain:
        head += f"{'sim':>6} {'idf':>5} {'c.rank':>6} {'content':>7} {'c.w':>4} {'evid.':>7} " \
                f"{'w':>4} {'unrank.':>7} {'bump':>6} {'stage1':>7}  "
    lines = [head + "row"]
    for r in ranking:
        score = f"{r.score:>7.4f}" if ranked else f"{'-':>7}"  # passthrough: no score
        line = f"{r.rank:>4}  {r.source_id[:12]:<12} {score}  "
        if explain:
            line += (f"{r.similarity:>6.3f} {r.idf_factor:>5.2f} {r.content_rank:>6} "
                     f"{r.content:>7.5f} {r.content_weight:>4.2f} {r.evidence:>7.5f} "
                     f"{r.source_weight:>4.2f} {r.unranked_vote:>7.5f} "
                     f"{r.boost_bump:>6.4f} {r.stage1_key:>7.5f}  ")
        line += summarize(r.row, 60 if explain else 72)
        if explain and r.also_from:
            line += "  (also " + ", ".join(f"{s}#{n}" for s, n in r.also_from) + ")"
        lines.append(line)
    if len(lines) == 1:
        lines.append("  (no rows)")
    return "\n".join(lines)


# --- load --------------------------------------------------------------------------------

def _run_load(args: argparse.Namespace) -> int:
    from nautilus.sources.postgres.load import (
        LoadError,
        default_progress,
        load_postgres,
        postgres_specs,
    )
    settings = NautilusSettings()
    if not (args.config or settings.config):
        print("nautilus: load needs a sources file: --config FILE or NAUTILUS_CONFIG",
              file=sys.stderr)
        return 2
    path = _config_path(settings, args.config)
    specs = postgres_specs(load_sources(path).specs)
    try:
        reports = load_postgres(specs, path.parent, settings.embedder, args.replace,
                                settings.embedder_cache_size, default_progress(), args.prune)
    except LoadError as exc:
        print(f"nautilus: {exc}", file=sys.stderr)
        return 1
    for report in reports:
        pruned = f", {report.pruned} pruned" if args.prune else ""
        print(f"{report.source_id} ({report.kind}): {report.loaded} rows loaded into "
              f"{report.table} ({report.in_table} in the table{pruned})")
    if not reports:
        print("nothing to load: no PostgreSQL source in this file has a 'seed'")
    return 0


# --- serve -------------------------------------------------------------------------------

def _run_serve(args: argparse.Namespace) -> int:
    from nautilus.service.server import serve  # the web stack only when serving
    return serve(args.host, args.port, args.workers, args.config)


def _run_mcp(args: argparse.Namespace) -> int:
    if args.transport == "stdio" and (args.host or args.port):
        print("nautilus: --host and --port need --transport http", file=sys.stderr)
        return 2
    if args.config:  # as NAUTILUS_CONFIG, as serve does
        os.environ["NAUTILUS_CONFIG"] = str(Path(args.config).expanduser().resolve())
    from nautilus.mcp.server import run_mcp  # the MCP SDK only when serving it
    return run_mcp(args.transport, args.host, args.port)


# --- demo --------------------------------------------------------------------------------

def _run_demo(args: argparse.Namespace) -> int:
    settings = NautilusSettings()
    if args.postgres:
        from nautilus.demo_postgres import run_postgres_demo
        return run_postgres_demo(settings, lambda broker: _show_demo(broker, args.top_k,
                                                                     "PostgreSQL "))
    broker = Broker.from_config(None, settings.model_copy(update={"config": None}))
    _show_demo(broker, args.top_k)
    return 0


def _show_demo(broker: Broker, top_k: int, kind: str = "") -> None:
    ranker = RankingSynthesizer(top_k=top_k, idf=True)
    width = 56
    print(f"nautilus demo: four sources (tickets: {kind}SQL table, graph: service graph, "
          f"runbooks: {kind}full text, postmortems: {'pgvector' if kind else 'vectors'})")
    for query in DEMO_QUERIES:
        results = broker.fetch_sync(query)
        passthrough = [(sid, row) for sid, rows in BasicSynthesizer().merge(results).items()
                       for row in rows]
        ranked = ranker.rank(results, {"query": query})
        total = len(passthrough)
        print(f"\nquery: {query!r}   ({total} rows from {len(results)} sources)")
        for result in results:
            if result.error is not None:
                print(f"  error: {result.source_id}: {result.error.message}")
        print(f"  {'passthrough (first ' + str(top_k) + ' of ' + str(total) + ')':<{width}}"
              f" | ranked (top {top_k}, IDF on)")
        for i in range(top_k):
            left = (f"{passthrough[i][0][:9]:<9} {summarize(passthrough[i][1], width - 11)}"
                    if i < total else "")
            right = (f"{ranked[i].score:.3f} {ranked[i].source_id[:9]:<9} "
                     f"{summarize(ranked[i].row, width)}" if i < len(ranked) else "")
            print(f"  {left:<{width}} | {right}")
    print(f"\nTry: {_command()} query 'orders-db replication lag' --top-k 5 --explain "
          "--boost graph:high")


def _command() -> str:
    """How to run this command again from here: ``nautilus`` when that name on PATH is
    this program, else its path (``make demo`` runs ``.venv/bin/nautilus`` unactivated)."""
    me = os.path.realpath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    found = shutil.which("nautilus")
    if (found is not None and os.path.realpath(found) == me) or not me.endswith("nautilus"):
        return "nautilus"
    relative = os.path.relpath(sys.argv[0])
    return relative if not relative.startswith("..") else os.path.abspath(sys.argv[0])


if __name__ == "__main__":
    sys.exit(main())
