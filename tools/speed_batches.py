"""The speed benchmark's synthetic batches: ticket-like text rows and random vectors over
four sources, the rows ``benchmarks.speed.speed``, the identical-output check and the
ranking A/B all rank."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from nautilus_ranking import AdapterResult

DIM = 384
SOURCES = ("sql", "graph", "fts", "vector")
QUERY = "orders database replication lag after failover"
TOP_K = 10
LATENCY_SIZES = (40, 120, 400)
#: Each kind of row is measured only where the code under test supports it.
HAS_MATRIX = "embeddings" in {f.name for f in dataclasses.fields(AdapterResult)}


def vocabulary(rng: np.random.Generator, size: int = 5000) -> list[str]:
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    return ["".join(rng.choice(letters, rng.integers(3, 10))) for _ in range(size)] + QUERY.split()


def text_rows(n: int, rng: np.random.Generator) -> list[dict[str, Any]]:
    """Ticket-like rows: a title of 4-8 words and a body of 15-40, Zipf-distributed words."""
    words = vocabulary(rng)
    ranks = np.minimum(rng.zipf(1.3, size=n * 60), len(words)) - 1
    rows, at = [], 0
    for i in range(n):
        t, b = int(rng.integers(4, 9)), int(rng.integers(15, 41))
        pick = [words[j] for j in ranks[at : at + t + b]]
        at += t + b
        rows.append(
            {
                "id": f"row-{i}",
                "title": " ".join(pick[:t]),
                "text": " ".join(pick[t:]),
                "severity": "sev3",
            }
        )
    return rows


def vector_rows(n: int, rng: np.random.Generator, as_list: bool) -> list[dict[str, Any]]:
    matrix = rng.normal(size=(n, DIM))
    return [
        {"id": f"row-{i}", "embedding": matrix[i].tolist() if as_list else matrix[i]}
        for i in range(n)
    ]


def split(rows: list[dict[str, Any]]) -> list[AdapterResult]:
    return [AdapterResult(s, rows[i :: len(SOURCES)]) for i, s in enumerate(SOURCES)]


def split_matrix(n: int, rng: np.random.Generator) -> list[AdapterResult]:
    """Four sources, each handing its vectors over as one contiguous float32 matrix."""
    matrix = rng.normal(size=(n, DIM)).astype(np.float32)
    rows = [{"id": f"row-{i}"} for i in range(n)]
    k = len(SOURCES)
    return [
        AdapterResult(s, rows[i::k], embeddings=np.ascontiguousarray(matrix[i::k]))
        for i, s in enumerate(SOURCES)
    ]
