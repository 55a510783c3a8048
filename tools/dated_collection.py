"""A shared collection served dated, for ``eval`` on dated judgments.

    python -m tools.dated_collection DATASET OUT

Writes the three SQLite sources of ``nautilus_ranking.evaluation.collection``
(partitioned) from the dated copy of ``tools/dated_copies.py``: every row has its time
(``modified``, epoch seconds) and ``vid``, the version it is (``ID`` or ``ID~rev``); a
revision is the same ``id`` in the next source. ``OUT/qrels-dated.tsv`` judges
versions: the revision keeps the grade, the old text loses one. The sources map
``time_field: modified`` and ``document_key: id``, so with
``NAUTILUS_RANKING_MAY_REVISE`` (printed) a revision supersedes its original across
sources. Then ``eval --id-field vid --sweep`` measures the time knobs on these judgments.
"""

from __future__ import annotations

import argparse
import csv
import json
from dataclasses import dataclass
from pathlib import Path

from nautilus_ranking.evaluation.collection import SOURCES, read_corpus
from nautilus_ranking.settings.model import NautilusSettings
from nautilus_ranking.sources.factory import build_sources
from nautilus_ranking.sources.sqlite.base import SqliteSource
from tools.dated_copies import TIME, generate, key, parts_with_revisions

#: Each source revises the one before it (a revision sits in its original's next source).
MAY_REVISE = "sql:fts,vector:sql,fts:vector"

_CONFIG = """\
# {name}, dated (tools/dated_collection.py): time in `modified`, versions in `vid`.
limit: 30
sources:
  - {{id: fts, type: sqlite_fts, path: eval/{name}-dated/fts.db, seed: fts.jsonl,
     columns: [title, text], stored: [{time}, vid], time_field: {time}, document_key: id,
     timeout_s: 60}}
  - {{id: sql, type: sqlite_table, path: eval/{name}-dated/sql.db, seed: sql.jsonl,
     table: docs, search_columns: [title, text], time_field: {time}, document_key: id,
     timeout_s: 60}}
  - {{id: vector, type: sqlite_vector, path: eval/{name}-dated/vector.db,
     seed: vector.jsonl, text_fields: [title, text],
     time_field: {time}, document_key: id, timeout_s: 60}}
"""


@dataclass
class _Corpus:
    name: str
    docs: list[dict[str, str]]
    qrels: dict[str, dict[str, int]]


def write(dataset: Path, out: Path) -> Path:
    """The seeds, the sources file and the dated judgments; returns the sources file."""
    qrels: dict[str, dict[str, int]] = {}
    with (dataset / "qrels" / "test.tsv").open(encoding="utf-8") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            qrels.setdefault(row["query-id"], {})[row["corpus-id"]] = int(row["score"])
    corpus = _Corpus(dataset.name, read_corpus(dataset), qrels)
    dated = generate(corpus)
    out.mkdir(parents=True, exist_ok=True)
    for index, (name, rows) in enumerate(
        zip(SOURCES, parts_with_revisions(corpus, dated), strict=True)
    ):
        lines = []
        for row in rows:
            doc = row["id"]
            revision = doc in dated.revisions and dated.revisions[doc][2] == index
            at = dated.revisions[doc][1] if revision else dated.times[doc]
            lines.append(json.dumps({**row, TIME: at, "vid": key(doc, revision)}) + "\n")
        (out / f"{name}.jsonl").write_text("".join(lines), encoding="utf-8")
    with (out / "qrels-dated.tsv").open("w", encoding="utf-8") as handle:
        handle.write("query-id\tcorpus-id\tscore\n")
        for qid, grades in sorted(dated.dated_qrels.items()):
            handle.writelines(f"{qid}\t{vid}\t{grade}\n" for vid, grade in sorted(grades.items()))
    config = out / "nautilus.yaml"
    config.write_text(_CONFIG.format(name=dataset.name, time=TIME), encoding="utf-8")
    settings = NautilusSettings()
    sources, _ = build_sources(
        config, settings.data_dir, settings.vector_embedder, settings.embedder_cache_size
    )
    for source in sources:
        if isinstance(source, SqliteSource):
            source.ensure_built()
    return config


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", type=Path)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    config = write(args.dataset, args.out.resolve())
    print(
        f"NAUTILUS_RANKING_MAY_REVISE={MAY_REVISE} nautilus-ranking eval --config {config} "
        f"--queries {args.dataset / 'queries.jsonl'} --judgments "
        f"{args.out / 'qrels-dated.tsv'} --id-field vid --sweep"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
