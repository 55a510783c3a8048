"""The ``nautilus`` command: ``config``, ``query`` and ``demo``.

Output goes to stdout, logs to stderr. No input produces a traceback: known
problems print one clear line and exit 1; usage errors exit 2.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import textwrap
from collections.abc import Sequence
from typing import Any

import structlog

from nautilus.broker import Broker
from nautilus.config import (
    ConfigError,
    ConfigProblem,
    LogSettings,
    NautilusSettings,
)
from nautilus.log import configure_logging
from nautilus.models import RankedRow
from nautilus.sources.config import SourceConfigError, bundled_demo_config, load_source_specs
from nautilus.synthesis.basic import BasicSynthesizer
from nautilus.synthesis.ranking import RankingSynthesizer

logger = structlog.get_logger("nautilus.cli")

DEMO_QUERIES = (
    "orders database disk almost full",
    "users keep getting logged out of their sessions",
    "card payments failing with timeouts at checkout",
)
_SUMMARY_FIELDS = ("title", "name", "summary", "description", "text", "body")


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    log = LogSettings()
    configure_logging(log.log_level.strip().lower(), log.log_format.strip().lower())
    try:
        return int(args.run(args))
    except (ConfigError, SourceConfigError, ImportError) as exc:
        print(f"nautilus: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # the last line of defence: a clear line, never a traceback
        logger.error("unexpected_error", error_type=type(exc).__name__, error=str(exc)[:500])
        print(f"nautilus: unexpected {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nautilus", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)

    config = commands.add_parser("config", help="show the effective settings and every "
                                                "skipped entry")
    config.add_argument("--json", action="store_true", help="one JSON object on stdout")
    config.add_argument("--strict", action="store_true",
                        help="exit 1 if any entry was skipped (for deployment pipelines)")
    config.set_defaults(run=_run_config)

    query = commands.add_parser("query", help="ask every source and show the ranked answer")
    query.add_argument("text", help="the query")
    query.add_argument("--config", help="sources file (default: NAUTILUS_CONFIG, else the demo)")
    query.add_argument("--top-k", type=int, metavar="K", help="keep the K best rows")
    query.add_argument("--boost", action="append", default=[], metavar="ID:LEVEL",
                       help="boost a source (repeatable); replaces NAUTILUS_SOURCE_BOOSTS")
    query.add_argument("--idf", action="store_true", help="turn on the batch-local IDF factor")
    query.add_argument("--json", action="store_true", help="the BrokerResponse as one JSON object")
    query.add_argument("--explain", action="store_true", help="show each score's components")
    query.set_defaults(run=_run_query)

    demo = commands.add_parser("demo", help="run demo queries: passthrough beside ranked")
    demo.add_argument("--top-k", type=int, default=8, metavar="K")
    demo.set_defaults(run=_run_demo)
    return parser


# --- config ------------------------------------------------------------------------------

def _run_config(args: argparse.Namespace) -> int:
    settings = NautilusSettings()
    problems = list(settings.problems) + _unknown_boost_sources(settings)
    if args.json:
        print(json.dumps({
            "settings": settings.effective(),
            "ranking_enabled": settings.ranking_enabled,
            "skipped": [{"variable": p.variable, "value": p.value, "reason": p.reason,
                         "valid": p.valid, "message": p.message} for p in problems],
        }, indent=2, sort_keys=True))
    else:
        print(_settings_table(settings))
        print(f"\nranking: {'on' if settings.ranking_enabled else 'off (exact passthrough)'}")
        print("skipped:" if problems else "skipped: none")
        for problem in problems:
            print(f"  - {problem.message}")
    if args.strict and problems:
        for problem in problems:
            print(f"nautilus: {problem.message}", file=sys.stderr)
        return 1
    return 0


def _unknown_boost_sources(settings: NautilusSettings) -> list[ConfigProblem]:
    """Boosted ids that no source in the sources file has (checked without opening them)."""
    if not settings.source_boosts:
        return []
    try:
        specs, _ = load_source_specs(_config_path(settings, None))
    except SourceConfigError:
        return []
    ids = [str(s["id"]) for s in specs]
    known = {i.lower() for i in ids}
    return [ConfigProblem("NAUTILUS_SOURCE_BOOSTS", sid, f"no source has id {sid!r}",
                          ", ".join(ids)) for sid in settings.source_boosts if sid not in known]


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


def _config_path(settings: NautilusSettings, given: str | None) -> Any:
    from pathlib import Path
    return Path(given or settings.config or bundled_demo_config()).expanduser()


# --- query -------------------------------------------------------------------------------

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
    response = broker.request(args.text)
    if args.json:
        print(json.dumps(response.to_dict(), default=str))
        return 0
    print(f"query: {args.text}")
    print(f"synthesizer: {type(broker.synthesizer).__name__}"
          + (f"  (boosts: {', '.join(f'{k}:{v}' for k, v in settings.source_boosts.items())})"
             if settings.source_boosts else ""))
    print(_ranked_table(response.ranking, args.explain))
    for error in response.sources_errored:
        print(f"error: {error.source_id}: {error.error_type}: {error.message}")
    print(f"response_hash: {response.response_hash}  ({response.duration_ms} ms)")
    return 0


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


def _ranked_table(ranking: list[RankedRow], explain: bool) -> str:
    head = f"{'rank':>4}  {'source':<12} {'score':>7}  "
    if explain:
        head += f"{'sim':>6} {'idf':>5} {'c.rank':>6} {'content':>7} {'evid.':>7} {'w':>4} " \
                f"{'bump':>6} {'stage1':>7}  "
    lines = [head + "row"]
    for r in ranking:
        line = f"{r.rank:>4}  {r.source_id[:12]:<12} {r.score:>7.4f}  "
        if explain:
            line += (f"{r.similarity:>6.3f} {r.idf_factor:>5.2f} {r.content_rank:>6} "
                     f"{r.content:>7.5f} {r.evidence:>7.5f} {r.source_weight:>4.2f} "
                     f"{r.boost_bump:>6.4f} {r.stage1_key:>7.5f}  ")
        line += summarize(r.row, 60 if explain else 72)
        if explain and r.also_from:
            line += "  (also " + ", ".join(f"{s}#{n}" for s, n in r.also_from) + ")"
        lines.append(line)
    if len(lines) == 1:
        lines.append("  (no rows)")
    return "\n".join(lines)


# --- demo --------------------------------------------------------------------------------

def _run_demo(args: argparse.Namespace) -> int:
    settings = NautilusSettings()
    broker = Broker.from_config(None, settings.model_copy(update={"config": None}))
    ranker = RankingSynthesizer(top_k=args.top_k, idf=True)
    width = 56
    print("nautilus demo: four sources (tickets: SQL table, graph: service graph, "
          "runbooks: full text, postmortems: vectors)")
    for query in DEMO_QUERIES:
        results = asyncio.run(broker.fetch(query))
        passthrough = [(sid, row) for sid, rows in BasicSynthesizer().merge(results).items()
                       for row in rows]
        ranked = ranker.rank(results, {"query": query})
        total = len(passthrough)
        print(f"\nquery: {query!r}   ({total} rows from {len(results)} sources)")
        print(f"  {'passthrough (first ' + str(args.top_k) + ' of ' + str(total) + ')':<{width}}"
              f" | ranked (top {args.top_k}, IDF on)")
        for i in range(args.top_k):
            left = (f"{passthrough[i][0][:9]:<9} {summarize(passthrough[i][1], width - 11)}"
                    if i < total else "")
            right = (f"{ranked[i].score:.3f} {ranked[i].source_id[:9]:<9} "
                     f"{summarize(ranked[i].row, width)}" if i < len(ranked) else "")
            print(f"  {left:<{width}} | {right}")
    print("\nTry: nautilus query 'orders-db replication lag' --top-k 5 --explain "
          "--boost graph:high")
    return 0


if __name__ == "__main__":
    sys.exit(main())
