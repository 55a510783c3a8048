"""Serve a BEIR collection through the SQLite sources, to try ``nautilus-ranking eval`` on public
data.

    python -m nautilus_ranking.evaluation.collection ../shared/datasets/adi /tmp/adi-sources

writes three seed files and a ``nautilus.yaml`` beside them — ``fts`` (FTS5, BM25
order), ``sql`` (a plain table, rows in table order) and ``vector`` (stored
vectors, cosine order), as ``benchmarks/quality/quality.py`` splits a collection — and
builds the databases. ``partitioned`` gives each source every third document;
``hybrid`` gives each all of them. BEIR's ``_id`` becomes the rows' ``id``, so
``nautilus-ranking eval`` needs no ``--id-field``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from nautilus_ranking.errors import NautilusError
from nautilus_ranking.log import LogSettings, configure_logging
from nautilus_ranking.settings.model import NautilusSettings
from nautilus_ranking.sources.factory import SourceConfigError, build_sources
from nautilus_ranking.sources.seeds import read_jsonl
from nautilus_ranking.sources.sqlite.base import SqliteSource

LAYOUTS = ("partitioned", "hybrid")
SOURCES = ("fts", "sql", "vector")
SOURCE_LIMIT = 30

_CONFIG = """\
# The BEIR collection {name!r} ({layout}) served by three SQLite sources.
# Written by: python -m nautilus_ranking.evaluation.collection {dataset} {out}
limit: {limit}
sources:
  - id: fts
    type: sqlite_fts
    path: eval/{name}-{layout}/fts.db   # inside NAUTILUS_DATA_DIR
    seed: fts.jsonl
    columns: [title, text]
    timeout_s: 60
  - id: sql
    type: sqlite_table
    path: eval/{name}-{layout}/sql.db   # inside NAUTILUS_DATA_DIR
    seed: sql.jsonl
    table: docs
    search_columns: [title, text]
    timeout_s: 60
  - id: vector
    type: sqlite_vector
    path: eval/{name}-{layout}/vector.db   # inside NAUTILUS_DATA_DIR
    seed: vector.jsonl
    text_fields: [title, text]
    timeout_s: 60
"""


class CollectionError(NautilusError):
    """The folder is not a BEIR collection."""


def read_corpus(dataset: Path) -> list[dict[str, str]]:
    """``corpus.jsonl`` as ``{"id", "title", "text"}`` documents."""
    path = dataset / "corpus.jsonl"
    if not path.is_file():
        raise CollectionError(
            f"{dataset}: no corpus.jsonl (a BEIR collection folder has "
            "corpus.jsonl, queries.jsonl, qrels/)"
        )
    docs = []
    try:
        for number, doc in enumerate(read_jsonl(path), start=1):
            if "_id" not in doc:
                raise CollectionError(f"{path}: document #{number} has no '_id'")
            docs.append(
                {
                    "id": str(doc["_id"]),
                    "title": str(doc.get("title") or ""),
                    "text": str(doc.get("text") or ""),
                }
            )
    except ValueError as exc:  # read_jsonl names the file and the line
        raise CollectionError(str(exc)) from exc
    return docs


def write_sources(
    dataset: Path, out: Path, layout: str = "partitioned", settings: NautilusSettings | None = None
) -> Path:
    """Seeds and ``nautilus.yaml`` in ``out``, databases built under ``NAUTILUS_DATA_DIR``
    (rebuilt when a seed changes); returns the config path."""
    if layout not in LAYOUTS:
        raise CollectionError(f"layout {layout!r} (valid: {', '.join(LAYOUTS)})")
    docs = read_corpus(dataset)
    out = out.expanduser().resolve()
    out.mkdir(parents=True, exist_ok=True)
    parts = [docs[i::3] for i in range(3)] if layout == "partitioned" else [docs] * 3
    for name, part in zip(SOURCES, parts, strict=True):
        (out / f"{name}.jsonl").write_text(
            "".join(json.dumps(d) + "\n" for d in part), encoding="utf-8"
        )
    config = out / "nautilus.yaml"
    config.write_text(
        _CONFIG.format(
            name=dataset.name, layout=layout, dataset=dataset, out=out, limit=SOURCE_LIMIT
        ),
        encoding="utf-8",
    )
    settings = settings if settings is not None else NautilusSettings()
    sources, _ = build_sources(
        config, settings.data_dir, settings.vector_embedder, settings.embedder_cache_size
    )
    for source in sources:
        if isinstance(source, SqliteSource):
            source.ensure_built()
    return config


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m nautilus_ranking.evaluation.collection", description=__doc__.splitlines()[0]
    )
    parser.add_argument("dataset", type=Path, help="a BEIR collection folder")
    parser.add_argument(
        "out",
        type=Path,
        help="where the seeds and nautilus.yaml go (databases: under NAUTILUS_DATA_DIR)",
    )
    parser.add_argument("--layout", choices=LAYOUTS, default="partitioned")
    args = parser.parse_args(argv)
    log = LogSettings()
    configure_logging(log.log_level.strip().lower(), log.log_format.strip().lower())
    try:
        config = write_sources(args.dataset, args.out, args.layout)
    except (CollectionError, SourceConfigError, ValueError) as exc:
        print(f"nautilus-ranking: {exc}", file=sys.stderr)
        return 1
    qrels = args.dataset / "qrels" / "test.tsv"
    print(config)
    print(
        f"try: nautilus-ranking eval --config {config} --queries {args.dataset / 'queries.jsonl'} "
        f"--judgments {qrels} --sweep --recommend",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
