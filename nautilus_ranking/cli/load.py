"""``nautilus-ranking load``: the PostgreSQL sources' tables and indexes, loaded from their
seeds."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any


def add_parser(commands: Any, argv: Sequence[str] = ()) -> None:
    load = commands.add_parser(
        "load",
        help="create the PostgreSQL sources' tables and indexes "
        "and load their seed files (idempotent)",
    )
    load.add_argument("--config", help="sources file (default: NAUTILUS_CONFIG)")
    load.add_argument(
        "--replace",
        action="store_true",
        help="drop and rebuild each table (e.g. to change the embedding model)",
    )
    load.add_argument(
        "--prune",
        action="store_true",
        help="also delete the rows whose id is no longer in the seed "
        "(a load otherwise only inserts and updates)",
    )
    load.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from nautilus_ranking.settings.model import NautilusSettings
    from nautilus_ranking.source_settings import config_path
    from nautilus_ranking.sources.factory import load_sources
    from nautilus_ranking.sources.postgres.load import (
        default_progress,
        load_postgres,
        postgres_specs,
    )
    from nautilus_ranking.sources.postgres.load_steps import LoadError

    settings = NautilusSettings()
    if not (args.config or settings.config):
        print(
            "nautilus-ranking: load needs a sources file: --config FILE or NAUTILUS_CONFIG",
            file=sys.stderr,
        )
        return 2
    path = config_path(settings, args.config)
    specs = postgres_specs(load_sources(path).specs)
    try:
        reports = load_postgres(
            specs,
            path.parent,
            settings.vector_embedder,
            args.replace,
            settings.embedder_cache_size,
            default_progress(),
            args.prune,
        )
    except LoadError as exc:
        print(f"nautilus-ranking: {exc}", file=sys.stderr)
        return 1
    status = 0
    for report in reports:
        pruned = f", {report.pruned} pruned" if args.prune else ""
        # a seed's rows with one id are one row: the count of ids says so
        distinct = (
            f"{report.distinct_ids} distinct ids; "
            if report.distinct_ids < report.loaded or report.ids_merged
            else ""
        )
        print(
            f"{report.source_id} ({report.kind}): {report.loaded} rows loaded into "
            f"{report.table} ({distinct}{report.in_table} in the table{pruned})"
        )
        if report.ids_merged:  # rows lost: said, and the load fails
            print(f"nautilus-ranking: {report.source_id}: {report.ids_merged}", file=sys.stderr)
            status = 1
    if not reports:
        print("nothing to load: no PostgreSQL source in this file has a 'seed'")
    return status
