"""Central indexes reranking the union: what one index over the whole corpus makes of
exactly the rows the sources returned.

A broker sees only the rows its sources return; a central index also has the whole
corpus's statistics. These references rerank the *same union* nautilus ranks, so the
difference between them and nautilus is the ranking alone, not what was retrieved:

* ``central_rerank_bm25``: one FTS5 index (Porter stemmer) over the whole corpus; the
  query's words, each quoted, OR-ed (what the fts source searches); ``bm25()`` orders the
  union's rows that match a word, and the rows that match none come after, in the order
  the sources gave them;
* ``central_rerank_hybrid``: RRF (k = 60) of that BM25 order (the matching rows) and the
  exact cosine of every union row to the query in the vector source's space (MiniLM with
  the ``embed`` extra), over the whole corpus, restricted to the same rows.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import numpy as np

from benchmarks.quality.ir_collections import Collection
from nautilus_ranking.embedders import HashingEmbedder, embed_texts
from nautilus_ranking.sources.sqlite.fts import fts_match_expression

RRF_K = 60


class CentralRerank:
    """One collection's whole-corpus BM25 index and document vectors."""

    def __init__(self, collection: Collection, vector_embedder: Any = None) -> None:
        self._db = sqlite3.connect(":memory:")
        self._db.execute(
            "CREATE VIRTUAL TABLE docs USING fts5(id UNINDEXED, title, text, "
            "tokenize = 'porter unicode61')"
        )
        self._db.executemany(
            "INSERT INTO docs (id, title, text) VALUES (?, ?, ?)",
            [(d["id"], d["title"], d["text"]) for d in collection.docs],
        )
        self._embedder = (
            vector_embedder if vector_embedder is not None else HashingEmbedder(dim=1024)
        )
        texts = [f"{d['title']} {d['text']}" for d in collection.docs]
        matrix = embed_texts(self._embedder, texts).astype(np.float64)
        norms = np.linalg.norm(matrix, axis=1)
        self._vectors = matrix / np.where(norms > 0, norms, 1.0)[:, None]
        self._row_of = {d["id"]: i for i, d in enumerate(collection.docs)}

    def bm25(self, union: list[str], query: str) -> list[str]:
        """The union's ids by the central index's BM25 (best first); the rows that match
        no word of the query after them, in the union's order."""
        matching = self._bm25_matching(union, query)
        seen = set(matching)
        return matching + [d for d in union if d not in seen]

    def hybrid(self, union: list[str], query: str) -> list[str]:
        """RRF (k = 60) of the BM25 order of the matching rows and the cosine order of
        every union row, in the vector source's space."""
        scores = dict.fromkeys(union, 0.0)
        for rank, doc in enumerate(self._bm25_matching(union, query), start=1):
            scores[doc] += 1.0 / (RRF_K + rank)
        for rank, doc in enumerate(self._cosine(union, query), start=1):
            scores[doc] += 1.0 / (RRF_K + rank)
        position = {d: i for i, d in enumerate(union)}
        return sorted(union, key=lambda d: (-scores[d], position[d]))

    def _bm25_matching(self, union: list[str], query: str) -> list[str]:
        expression = fts_match_expression(query)
        if not expression or not union:
            return []
        marks = ",".join("?" * len(union))
        found = self._db.execute(
            f"SELECT id, bm25(docs) FROM docs WHERE docs MATCH ? AND id IN ({marks})",
            [expression, *union],
        ).fetchall()
        position = {d: i for i, d in enumerate(union)}
        found.sort(key=lambda r: (r[1], position[r[0]]))  # bm25(): lower is better
        return [str(r[0]) for r in found]

    def _cosine(self, union: list[str], query: str) -> list[str]:
        query_vector = np.asarray(self._embedder.embed(query), dtype=np.float64)
        norm = float(np.linalg.norm(query_vector))
        rows = [self._row_of[d] for d in union]
        sims = self._vectors[rows] @ (query_vector / (norm if norm > 0 else 1.0))
        order = sorted(range(len(union)), key=lambda i: (-float(sims[i]), i))
        return [union[i] for i in order]
