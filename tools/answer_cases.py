"""What the identical-answers check asks: the demo and dated copies of the shared
collections, each under a handful of settings.

A case is a sources file (None: the bundled demo), its queries and its settings, each
setting the NAUTILUS_* variables it sets. The collections are served as
``nautilus-ranking eval``'s collection command serves them (``fts``, ``sql``, ``vector``,
every third document each), with the recency benchmark's dated copy: each row a time
under ``modified`` and half the judged documents a newer revision in the next source
(``tools/dated_copies.py``). Both sides read the same files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tools import dated_copies

COLLECTIONS = ("cranfield", "cisi", "cacm", "adi")
#: Where the shared collections live: ``../shared/datasets`` beside the project.
DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"
#: The budget's page size and token budget; its pages are followed by next_cursor.
PAGE_SIZE = "5"
MAX_TOKENS = "400"


@dataclass
class Case:
    """One sources file (None: the demo), the queries asked of it and its settings."""

    name: str
    config: Path | None
    queries: list[str]
    settings: dict[str, dict[str, str]] = field(default_factory=dict)


def settings_of(
    boosts: str, revisers: str = "", document_keys: str = ""
) -> dict[str, dict[str, str]]:
    """Each setting's variables. ``budget pages`` is the one whose pages are followed;
    ``supersession+may_revise`` (with ``revisers``) declares who may revise whom."""
    out = {
        "unset": {},
        "boosts": {"NAUTILUS_SOURCE_BOOSTS": boosts},
        "idf": {"NAUTILUS_RANKING_IDF": "true"},
        "recency": {"NAUTILUS_RANKING_RECENCY": "half_life:90d"},
        "supersession": {"NAUTILUS_RANKING_SUPERSEDE": "true"},
        "budget pages": {
            "NAUTILUS_RANKING_TOP_K": PAGE_SIZE,
            "NAUTILUS_RANKING_MAX_TOKENS": MAX_TOKENS,
        },
        "min_confidence": {"NAUTILUS_RANKING_MIN_CONFIDENCE": "0.5"},
    }
    if revisers:
        out["supersession+may_revise"] = {
            "NAUTILUS_RANKING_SUPERSEDE": "true",
            "NAUTILUS_RANKING_DOCUMENT_KEYS": document_keys,
            "NAUTILUS_RANKING_MAY_REVISE": revisers,
        }
    return out


def demo_case(count: int) -> Case:
    """The bundled demo (its tickets are dated), asked the CLI's demo queries."""
    from nautilus_ranking.cli import DEMO_QUERIES

    return Case("demo", None, list(DEMO_QUERIES[:count]), settings_of("tickets:high,graph:-low"))


def collection_case(name: str, datasets: Path, out: Path, count: int) -> Case:
    """The dated copy of collection ``name``: its sources file written under ``out``,
    asked its first ``count`` judged queries."""
    from nautilus_ranking.evaluation.judgments import read_judgments, read_queries

    dataset = datasets / name
    grades = read_judgments(dataset / "qrels" / "test.tsv").grades
    judged = [q for q in read_queries(dataset / "queries.jsonl").texts.items() if q[0] in grades]
    config = write_dated_sources(name, dataset, grades, out / name)
    # A revision is in the source after its original's: fts → sql → vector → fts.
    revisers = "sql:fts,vector:sql,fts:vector"
    keys = "fts:id,sql:id,vector:id"
    settings = settings_of("sql:high,vector:-low", revisers, keys)
    return Case(name, config, [text for _, text in judged[:count]], settings)


@dataclass
class _Corpus:
    name: str
    docs: list[dict[str, str]]
    qrels: dict[str, dict[str, int]]


def write_dated_sources(
    name: str, dataset: Path, grades: dict[str, dict[str, int]], out: Path
) -> Path:
    """The collection command's seeds and sources file, the seeds replaced by the dated
    copy's rows; every source reads its time from ``modified`` (FTS stores it)."""
    from nautilus_ranking.evaluation.collection import read_corpus, write_sources
    from nautilus_ranking.settings.model import NautilusSettings

    scratch = NautilusSettings(data_dir=out / "scratch-data")
    config = write_sources(dataset, out, settings=scratch)
    corpus = _Corpus(name, read_corpus(dataset), grades)
    dated = dated_copies.generate(corpus)
    parts = dated_copies.parts_with_revisions(corpus, dated)
    loaded = yaml.safe_load(config.read_text(encoding="utf-8"))
    for index, (source, rows) in enumerate(zip(loaded["sources"], parts, strict=True)):
        timed = [{**row, dated_copies.TIME: _time(dated, row["id"], index)} for row in rows]
        seed = out / source["seed"]
        seed.write_text("".join(json.dumps(r) + "\n" for r in timed), encoding="utf-8")
        source["time_field"] = dated_copies.TIME
        if source["type"] == "sqlite_fts":
            source["stored"] = [dated_copies.TIME]
    config.write_text(yaml.safe_dump(loaded, sort_keys=False), encoding="utf-8")
    return config


def _time(dated: dated_copies.Dated, doc_id: str, source_index: int) -> int:
    """The revision's time in the source that holds the revision, else the original's."""
    revision = dated.revisions.get(doc_id)
    if revision is not None and revision[2] == source_index:
        return revision[1]
    return dated.times[doc_id]


def cases(names: list[str], datasets: Path, out: Path, count: int) -> list[Case]:
    """The named cases (``demo`` and collection names), each with every setting."""
    return [
        demo_case(count) if name == "demo" else collection_case(name, datasets, out, count)
        for name in names
    ]
