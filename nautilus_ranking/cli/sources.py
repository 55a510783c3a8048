"""``nautilus-ranking sources rebuild``: rebuild the SQLite sources' databases now.
``nautilus-ranking sources probe QUERY``: send one query to each source and show its first
mapped row (id, text, score) and how long it took — "did my mapping take?". A mapped
``id``, ``title`` or ``text`` path null in every hit is that source's error (the
mapping did not take: it names the path and what the first hit has there); a ``fields``
path is a warning; a source with no hits gets a hint (there was nothing to check)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from nautilus_ranking.cli.args import CONFIG_HELP

if TYPE_CHECKING:
    from nautilus_ranking.sources.base import Source

#: Row fields a probe shows as the score, in this order of preference (an HTTP source's
#: is ``engine_score``: an integer past 2**53 comes as its digits).
SCORE_FIELDS = ("engine_score", "score", "distance", "bm25", "similarity", "rank")
#: How much of a row's text a probe shows.
TEXT_CHARS = 60
#: The rows a probe asks of each source: enough that a path null in every one is the
#: mapping's fault, not one document's.
PROBE_ROWS = 10
#: The mapped paths a source cannot do without (a ``fields`` path is only a warning).
REQUIRED_PATHS = ("response.id", "response.title", "response.text")


def add_parser(commands: Any, argv: Sequence[str] = ()) -> None:
    sources = commands.add_parser("sources", help="manage and check the sources")
    actions = sources.add_subparsers(dest="action", required=True)
    rebuild = actions.add_parser("rebuild", help="rebuild every SQLite source's database now")
    rebuild.add_argument("--config", help=CONFIG_HELP)
    rebuild.set_defaults(run=run)
    probe = actions.add_parser(
        "probe",
        help="send one query to each source: its first mapped row (id, text, score) and time",
    )
    probe.add_argument("query", help="the query text")
    probe.add_argument("--config", help=CONFIG_HELP)
    probe.add_argument("--json", action="store_true", help="one JSON object per source")
    probe.set_defaults(run=run_probe)


def run(args: argparse.Namespace) -> int:
    from nautilus_ranking.settings.model import NautilusSettings
    from nautilus_ranking.source_settings import config_path
    from nautilus_ranking.sources.factory import build_sources
    from nautilus_ranking.sources.sqlite.base import SqliteSource

    settings = NautilusSettings()
    path = config_path(settings, args.config)
    sources, _ = build_sources(
        path, settings.data_dir, settings.vector_embedder, settings.embedder_cache_size
    )
    failed = 0
    for source in sources:
        if not isinstance(source, SqliteSource):  # only SQLite sources are built by nautilus
            print(f"{source.id}: nothing to build")
            continue
        try:
            source.rebuild()
        except Exception as exc:  # one source's failure must not hide the others'
            failed += 1
            print(f"nautilus-ranking: {source.id}: {type(exc).__name__}: {exc}", file=sys.stderr)
            continue
        print(f"{source.id}: rebuilt {source.path}")
    for source in sources:
        source.close()
    return 1 if failed else 0


def run_probe(args: argparse.Namespace) -> int:
    """Each source searched once, concurrently, under its own deadline; exit 1 when any
    failed (its error on the line, never a traceback)."""
    import asyncio

    from nautilus_ranking.settings.model import NautilusSettings
    from nautilus_ranking.source_settings import config_path
    from nautilus_ranking.sources.factory import build_sources

    settings = NautilusSettings()
    path = config_path(settings, args.config)
    sources, _ = build_sources(
        path, settings.data_dir, settings.vector_embedder, settings.embedder_cache_size
    )
    try:
        results = asyncio.run(_probe_all(sources, args.query))
    finally:
        for source in sources:
            source.close()
    for result in results:
        if args.json:
            print(json.dumps(result, sort_keys=True, default=str))
        else:
            print(_line(result))
    return 1 if any(r["error"] for r in results) else 0


async def _probe_all(sources: Sequence[Source], query: str) -> list[dict[str, Any]]:
    import asyncio

    return list(await asyncio.gather(*(_probe(source, query) for source in sources)))


async def _probe(source: Source, query: str) -> dict[str, Any]:
    import asyncio
    import time

    from nautilus_ranking.broker import PREPARE_TIMEOUT_S
    from nautilus_ranking.sources.base import no_hits_hint, preparer, timeout_of

    result: dict[str, Any] = {
        "source": source.id,
        "ms": None,
        "row": None,
        "error": "",
        "warnings": [],
        "unmapped": [],
    }
    prepare = preparer(source)
    try:
        if prepare is not None:  # a database built first is not the engine's time
            await asyncio.wait_for(prepare(), PREPARE_TIMEOUT_S)
        start = time.perf_counter()
        timeout = timeout_of(source)
        try:
            rows = await asyncio.wait_for(
                source.search(query, {"query": query}, PROBE_ROWS), timeout
            )
        finally:
            result["ms"] = round((time.perf_counter() - start) * 1000, 1)
    except TimeoutError:
        result["error"] = f"timeout: no answer within {timeout_of(source):g} s"
        return result
    except Exception as exc:  # a source is someone else's code: its error, not a traceback
        result["error"] = f"{type(exc).__name__}: {str(exc)[:500]}"
        return result
    if rows and isinstance(rows, list) and isinstance(rows[0], dict):
        result["row"] = _shown(rows[0])
    else:
        result["note"] = f"no hits: {no_hits_hint(source)}"
    _judge(result, rows)
    return result


def _judge(result: dict[str, Any], rows: object) -> None:
    """A source's mapped paths null in every hit: an error for ``id``, ``title`` and
    ``text``, a warning for the others."""
    from nautilus_ranking.records import WarnedRows

    if not isinstance(rows, WarnedRows):
        return
    said = {w.message.partition(" ")[0]: w.message for w in rows.warnings}
    for option, path, where in rows.unmapped:
        result["unmapped"].append({"option": option, "path": path, "first_hit": where})
        message = said.get(option, f"{option} {path!r} was null in every hit; {where}")
        if option in REQUIRED_PATHS:
            result["error"] = result["error"] or message
        else:
            result["warnings"].append(message)


def _shown(row: dict[str, Any]) -> dict[str, Any]:
    """A row's id, text (its text, title, or first string field) and score."""
    text = row.get("text") or row.get("title")
    if not isinstance(text, str):
        text = next((v for k, v in row.items() if isinstance(v, str) and k != "id"), "")
    score = next((row[k] for k in SCORE_FIELDS if _number(row.get(k))), None)
    return {"id": row.get("id"), "text": text, "score": score}


def _number(value: Any) -> bool:
    if isinstance(value, str):
        return value.lstrip("-").isascii() and value.lstrip("-").isdigit()
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _line(result: dict[str, Any]) -> str:
    """A source's probe as a line (and a line a warning), engine text escaped
    (:func:`printable`)."""
    from nautilus_ranking.cli.output import printable

    return "\n".join(printable(line) for line in _unescaped_lines(result))


def _unescaped_lines(result: dict[str, Any]) -> list[str]:
    took = "" if result["ms"] is None else f"{result['ms']:>8.1f} ms"
    head = f"{result['source']:<14} {took:>11}"
    if result["error"]:
        return [f"{head}  ERROR {result['error']}"]
    row = result["row"]
    if row is None:
        return [f"{head}  ({result.get('note', 'no hits')})"]
    text = " ".join(str(row["text"]).split())
    text = text if len(text) <= TEXT_CHARS else text[: TEXT_CHARS - 1] + "…"
    score = "-" if row["score"] is None else f"{float(row['score']):.4g}"
    line = f"{head}  id={row['id']}  score={score}  {text}"
    return [line, *(f"{head}  warning: {w}" for w in result["warnings"])]
