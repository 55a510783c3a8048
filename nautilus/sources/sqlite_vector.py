"""Rows with stored embeddings, searched by cosine similarity in numpy.

Vectors record the model that made them (``embedding_model``): a database built
by another embedder is rebuilt, never mixed, and every returned row says which
space its ``embedding`` (a list of floats, JSON-native) lives in.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from nautilus.embedders import Embedder, HashingEmbedder, embed_texts
from nautilus.sources.base import Row, SqliteSource, quote_identifier, read_jsonl


class SqliteVectorSource(SqliteSource):
    """Documents of a JSONL seed, embedded over ``text_fields`` at build time.

    Rows come most similar first, each with its cosine ``similarity`` to the query."""

    ranked = True  # cosine order: evidence the ranking counts (nautilus/synthesis/fusion.py)

    def __init__(self, source_id: str, path: Path, seed: Path, text_fields: list[str],
                 embedder: Embedder | None = None, timeout_s: float = 5.0) -> None:
        super().__init__(source_id, path, timeout_s)
        for name in text_fields:
            quote_identifier(name)
        self.seed = seed
        self.text_fields = list(text_fields)
        self.embedder: Embedder = embedder if embedder is not None else HashingEmbedder(dim=1024)
        self.model_id = str(getattr(self.embedder, "model_id", type(self.embedder).__name__))
        self._cache: tuple[int, list[str], Any, Any] | None = None

    def needs_rebuild(self) -> bool:
        try:
            connection = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
            try:
                (stored,) = connection.execute(
                    "SELECT value FROM meta WHERE key = 'model'").fetchone()
            finally:
                connection.close()
        except (sqlite3.Error, TypeError):
            return True
        return bool(stored != self.model_id)

    def build(self, connection: sqlite3.Connection) -> None:
        connection.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
        connection.execute("INSERT INTO meta VALUES ('model', ?)", (self.model_id,))
        connection.execute("CREATE TABLE docs (position INTEGER PRIMARY KEY, doc TEXT, "
                           "embedding BLOB)")
        docs = list(read_jsonl(self.seed))
        texts = [" ".join(str(d.get(f, "")) for f in self.text_fields) for d in docs]
        vectors = embed_texts(self.embedder, texts).astype(np.float32)
        connection.executemany(
            "INSERT INTO docs VALUES (?, ?, ?)",
            ((i, json.dumps(doc), vectors[i].tobytes()) for i, doc in enumerate(docs)))

    def query_rows(self, connection: sqlite3.Connection, query: str,
                   context: Mapping[str, Any], limit: int) -> list[Row]:
        if not query.strip():
            return []
        query_vector = np.asarray(self.embedder.embed(query), dtype=np.float64)
        docs, matrix, row_norms = self._load(connection)
        if not docs or not np.any(query_vector):
            return []
        norms = row_norms * np.linalg.norm(query_vector)
        scores = np.divide(matrix @ query_vector, norms, out=np.zeros(len(docs)), where=norms > 0)
        order = np.lexsort((np.arange(len(docs)), -scores))[:limit]
        rows = []
        for i in order.tolist():
            if scores[i] <= 0:
                break
            rows.append({**json.loads(docs[i]), "embedding": matrix[i].tolist(),
                         "embedding_model": self.model_id, "similarity": float(scores[i])})
        return rows

    def _load(self, connection: sqlite3.Connection) -> tuple[list[str], Any, Any]:
        """Documents and their vectors, read once per database file version."""
        stamp = self.path.stat().st_mtime_ns
        cached = self._cache
        if cached is not None and cached[0] == stamp:
            return cached[1], cached[2], cached[3]
        records = connection.execute("SELECT doc, embedding FROM docs ORDER BY position").fetchall()
        docs = [r["doc"] for r in records]
        matrix = (np.stack([np.frombuffer(r["embedding"], dtype=np.float32) for r in records])
                  .astype(np.float64) if records else np.zeros((0, 1)))
        row_norms = np.linalg.norm(matrix, axis=1)
        self._cache = (stamp, docs, matrix, row_norms)
        return docs, matrix, row_norms
