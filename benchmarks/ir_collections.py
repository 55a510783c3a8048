"""Loading the shared BEIR-format collections and scoring rankings against their judgments."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"
NAMES = ("cranfield", "cisi", "cacm", "adi")


@dataclass
class Collection:
    name: str
    docs: list[dict[str, str]]                 # {"id", "title", "text"}
    queries: dict[str, str]                    # judged queries only
    qrels: dict[str, dict[str, int]]           # query id -> doc id -> grade >= 1


class MissingDatasets(SystemExit):
    """The shared collections are not where we looked: a clear exit, no traceback."""


def load(name: str, root: Path = DATASETS) -> Collection:
    folder = root / name
    if not (folder / "corpus.jsonl").is_file():
        raise MissingDatasets(f"benchmark: no collection {name!r} under {root} (expected "
                              f"../shared/datasets beside the project; pass --datasets DIR)")
    docs = []
    with (folder / "corpus.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            d = json.loads(line)
            docs.append({"id": str(d["_id"]), "title": d.get("title") or "",
                         "text": d.get("text") or ""})
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


def ndcg_at(ranked: Sequence[str], grades: dict[str, int], k: int = 10) -> float:
    """nDCG@k with linear gain (as pytrec_eval / BEIR); the ideal uses every judged doc."""
    dcg = sum(grades.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted(grades.values(), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall_at(ranked: Sequence[str], grades: dict[str, int], k: int | None = 10) -> float:
    top = ranked if k is None else ranked[:k]
    return len(set(top) & set(grades)) / len(grades) if grades else 0.0


def bootstrap_ci(diffs: Sequence[float], resamples: int = 10_000,
                 seed: int = 0) -> tuple[float, float, float]:
    """Mean of paired per-query differences and its 95% percentile bootstrap interval."""
    values = np.asarray(diffs, dtype=np.float64)
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), size=(resamples, len(values)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(values.mean()), float(low), float(high)
