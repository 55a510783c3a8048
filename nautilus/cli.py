"""The ``nautilus`` command: ``config``, ``query``, ``sources``, ``load``, ``serve``, ``mcp``,
``demo`` and ``eval``.

Output goes to stdout, logs to stderr. No input produces a traceback: known
problems print one clear line and exit 1; usage errors exit 2. Unless
``NAUTILUS_LOG_LEVEL`` says otherwise, only ``serve`` and ``mcp`` log at info: the other
commands' output is the point, so they log warnings and errors only.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nautilus import __version__
from nautilus.broker import Broker
from nautilus.config import NautilusSettings, collect_source_boosts
from nautilus.config_command import config_path, run_config
from nautilus.errors import NautilusError
from nautilus.evaluation import command as eval_command
from nautilus.log import LogSettings, configure_logging, get_logger
from nautilus.query_output import answer_text, summarize
from nautilus.request.answer import answer_sync
from nautilus.request.engine import Engine
from nautilus.request.errors import ProblemError
from nautilus.request.model import QueryRequest, arg_of, parse_request
from nautilus.response_hash import json_default
from nautilus.service.manifest import with_manifest
from nautilus.settings_parsing import parse_int
from nautilus.sources.factory import build_sources, load_sources
from nautilus.sources.sqlite.base import SqliteSource
from nautilus.synthesis.basic import BasicSynthesizer
from nautilus.synthesis.ranking import RankingSynthesizer

logger = get_logger("nautilus.cli")

DEMO_QUERIES = (
    "orders database disk almost full",
    "users keep getting logged out of their sessions",
    "card payments failing with timeouts at checkout",
)
_DESCRIPTION = ("The ranking layer for retrieval brokers: ask every source, rank the union, "
                "keep the top K. Commands: config, query, sources, load, serve, mcp, demo, eval "
                "('nautilus COMMAND --help' for each).")


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
    except BrokenPipeError:  # the reader left (``| head``): not an error of ours
        _quiet_stdout()
        return 0
    except Exception as exc:  # the last line of defence: a clear line, never a traceback
        logger.error("unexpected_error", error_type=type(exc).__name__, error=str(exc)[:500])
        print(f"nautilus: unexpected {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's final flush of a closed pipe does
    not print a second error."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


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
    config.set_defaults(run=with_manifest(run_config))

    query = commands.add_parser("query", help="ask every source and show the ranked answer")
    query.add_argument("--config", help="sources file (default: NAUTILUS_CONFIG, else the demo)")
    query.add_argument("--json", action="store_true", help="the answer as one JSON object "
                                                          "(what POST /v1/query returns)")
    add_request_flags(query)
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


# --- sources -----------------------------------------------------------------------------

def _run_sources_rebuild(args: argparse.Namespace) -> int:
    settings = NautilusSettings()
    path = config_path(settings, args.config)
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

def add_request_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per :class:`QueryRequest` field (the query is the positional argument),
    named, explained and checked as the request model declares it."""
    paged = parser.add_mutually_exclusive_group()
    for name, info in QueryRequest.model_fields.items():
        arg = arg_of(name)
        kind = _kind(info.annotation)
        help_text = info.description or name
        if not arg.flag:
            parser.add_argument("text", metavar=arg.metavar, help=help_text)
            continue
        target = paged if name in ("page", "cursor") else parser
        if kind is bool:
            target.add_argument(arg.flag, dest=name, action="store_true", default=None,
                                help=help_text)
        elif arg.repeat:
            target.add_argument(arg.flag, dest=name, action="append", metavar=arg.metavar,
                                type=_boost if kind is dict else str,
                                help=help_text + " (repeatable)")
        else:
            target.add_argument(arg.flag, dest=name, metavar=arg.metavar, help=help_text,
                                type=_top_k if kind is int else str)


def _kind(annotation: Any) -> type:
    """The plain type of an optional request field (``int | None`` is ``int``)."""
    for option in (*getattr(annotation, "__args__", ()), annotation):
        origin = getattr(option, "__origin__", option)
        if origin in (bool, int, str, dict, list):
            return origin  # type: ignore[no-any-return]
    raise TypeError(f"no command-line form for {annotation!r}")


def request_of(args: argparse.Namespace) -> QueryRequest:
    """The flags as a request; a value the model refuses is a ProblemError (exit 2). A
    byte of the query that is not UTF-8 (a lone surrogate here) becomes U+FFFD."""
    payload: dict[str, Any] = {"query": os.fsencode(args.text).decode("utf-8", "replace")}
    for name in QueryRequest.model_fields:
        value = getattr(args, name, None)
        if name == "query" or value is None:
            continue
        if name == "boosts":
            value = dict(entry.partition(":")[::2] for entry in value)
        payload[name] = value
    return parse_request(payload)


def _run_query(args: argparse.Namespace) -> int:
    try:
        request = request_of(args)
        engine = Engine.assemble(NautilusSettings(), args.config)
    except ProblemError as exc:
        return _refused(exc)
    try:
        result = answer_sync(engine, request)
    except ProblemError as exc:
        return _refused(exc)
    finally:
        engine.broker.close()
    response = result.response
    sources = result.plan.broker.sources
    all_failed = bool(sources) and len(response.sources_errored) == len(sources)
    if args.json:
        print(json.dumps(result.to_json(), default=json_default))
    else:
        print(answer_text(result))
    if all_failed:
        print("nautilus: every source failed (see the errors above)", file=sys.stderr)
        return 1
    return 0


def _refused(exc: ProblemError) -> int:
    """A refused request: each problem on stderr, named by its flag; 2 for a bad flag,
    1 for a request that could not be answered as asked (a stale cursor)."""
    errors = exc.extra.get("errors") or ([exc.extra] if exc.extra.get("field") else [])
    for error in errors:
        field = str(error.get("field", ""))
        flag = (arg_of(field).flag or "query") if field in QueryRequest.model_fields else field
        reason = error.get("reason") or exc.detail
        print(f"nautilus: {flag}: {error.get('value')!r}: {reason} "
              f"(valid: {error.get('valid')})", file=sys.stderr)
    if not errors:
        print(f"nautilus: {exc.detail}", file=sys.stderr)
    return 2 if exc.status in (403, 422) else 1


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
    path = config_path(settings, args.config)
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
