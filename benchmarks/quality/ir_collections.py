"""Loading the shared BEIR-format collections; the metrics are ``nautilus-ranking eval``'s."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from nautilus_ranking.evaluation.metrics import ndcg_at, recall_at
from nautilus_ranking.evaluation.sweep import bootstrap_ci

#: One implementation: `nautilus-ranking eval`'s metrics, checked against trec_eval in the tests.
__all__ = [
    "DATASETS",
    "NAMES",
    "Collection",
    "bootstrap_ci",
    "ci_text",
    "each_collection",
    "load",
    "ndcg_at",
    "paired_ci",
    "recall_at",
]

DATASETS = Path(__file__).resolve().parents[3] / "shared" / "datasets"
NAMES = ("cranfield", "cisi", "cacm", "adi")


@dataclass
class Collection:
    name: str
    docs: list[dict[str, str]]  # {"id", "title", "text"}
    queries: dict[str, str]  # judged queries only
    qrels: dict[str, dict[str, int]]  # query id -> doc id -> grade >= 1


class MissingDatasets(SystemExit):
    """The shared collections are not where we looked: a clear exit, no traceback."""


def load(name: str, root: Path = DATASETS) -> Collection:
    folder = root / name
    if not (folder / "corpus.jsonl").is_file():
        raise MissingDatasets(
            f"benchmark: no collection {name!r} under {root} (expected "
            f"../shared/datasets beside the project; pass --datasets DIR)"
        )
    docs = []
    with (folder / "corpus.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            d = json.loads(line)
            docs.append(
                {"id": str(d["_id"]), "title": d.get("title") or "", "text": d.get("text") or ""}
            )
    qrels: dict[str, dict[str, int]] = {}
    with (folder / "qrels" / "test.tsv").open(encoding="utf-8") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            qrels.setdefault(row["query-id"], {})[row["corpus-id"]] = int(row["score"])
    queries = {}
    with (folder / "queries.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            q = json.loads(line)
            if str(q["_id"]) in qrels:
                queries[str(q["_id"])] = q["text"]
    return Collection(name, docs, queries, qrels)


def each_collection(root: Path = DATASETS, only: str | None = None) -> Iterator[Collection]:
    """Every shared collection in turn, loaded as it is reached (only ``only``, if named)."""
    for name in NAMES:
        if only and name != only:
            continue
        yield load(name, root)


def paired_ci(ours: Sequence[float], theirs: Sequence[float]) -> tuple[float, float, float]:
    """Mean of ours − theirs, query by query, and its 95% bootstrap interval."""
    return bootstrap_ci([a - b for a, b in zip(ours, theirs, strict=True)])


def ci_text(ci: tuple[float, float, float]) -> str:
    """A difference and its interval as the tables show them: ``+0.012 [-0.003, +0.027]``."""
    return f"{ci[0]:+.3f} [{ci[1]:+.3f}, {ci[2]:+.3f}]"
