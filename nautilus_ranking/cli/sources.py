"""``nautilus-ranking sources rebuild``: rebuild the SQLite sources' databases now."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from nautilus_ranking.cli.args import CONFIG_HELP


def add_parser(commands: Any, argv: Sequence[str] = ()) -> None:
    sources = commands.add_parser("sources", help="manage the sources' built data")
    actions = sources.add_subparsers(dest="action", required=True)
    rebuild = actions.add_parser("rebuild", help="rebuild every SQLite source's database now")
    rebuild.add_argument("--config", help=CONFIG_HELP)
    rebuild.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from nautilus_ranking.broker import config_path
    from nautilus_ranking.config import NautilusSettings
    from nautilus_ranking.sources.factory import build_sources
    from nautilus_ranking.sources.sqlite.base import SqliteSource

    settings = NautilusSettings()
    path = config_path(settings, args.config)
    sources, _ = build_sources(
        path, settings.data_dir, settings.embedder, settings.embedder_cache_size
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
