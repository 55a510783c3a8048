"""Rows with stored embeddings, searched by cosine similarity in numpy.

Vectors record the model that made them (``embedding_model``): a database built
by another embedder is rebuilt (the model is part of the build fingerprint),
never mixed, and every returned row says which space its ``embedding`` (a list
of floats, JSON-native) lives in.
"""

from __future__ import annotations

import collections
import json
import sqlite3
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field

from nautilus_ranking.embedders import Embedder, HashingEmbedder, embed_texts, embedder_from_name
from nautilus_ranking.response_hash import canonical_json, canonical_object_with
from nautilus_ranking.rows import CanonicalRows
from nautilus_ranking.sources.base import Row, with_id
from nautilus_ranking.sources.mapped_fields import check_mapped_fields, fields_of
from nautilus_ranking.sources.schema import (
    BuildContext,
    ColumnList,
    SeededSqliteSpec,
    named_id_field,
    register_source_type,
    resolve_data_path,
    resolve_seed_path,
)
from nautilus_ranking.sources.seeds import load_seed
from nautilus_ranking.sources.sql import quote_identifier
from nautilus_ranking.sources.sqlite.base import SeededSqliteSource
from nautilus_ranking.text.tokens import tokenize

MAX_DIM = 65_536
#: Stored vectors kept written out as JSON, per source (about 20 KB each at 1,024 floats).
ENCODED_KEPT = 256


class SqliteVectorSource(SeededSqliteSource):
    """Documents of a JSONL seed, embedded over ``text_fields`` at build time.

    Rows come most similar first, each with its cosine ``similarity`` to the query."""

    #: cosine order: evidence the ranking counts (nautilus_ranking/synthesis/fusion.py)
    ranked: bool | None = True

    legacy_tables = frozenset({"meta", "docs"})

    def __init__(
        self,
        source_id: str,
        path: Path,
        seed: Path,
        text_fields: list[str],
        embedder: Embedder | None = None,
        timeout_s: float = 5.0,
        id_field: str = "id",
    ) -> None:
        super().__init__(source_id, path, seed, timeout_s)
        self.id_field = id_field
        for name in text_fields:
            quote_identifier(name)
        if not text_fields:
            raise ValueError("text_fields must name at least one field")
        self.text_fields = list(text_fields)
        self.embedder: Embedder = embedder if embedder is not None else HashingEmbedder(dim=1024)
        self.model_id = str(getattr(self.embedder, "model_id", type(self.embedder).__name__))
        self._cache: tuple[Any, list[str], Any, Any] | None = None
        #: (database stamp, position) -> the canonical JSON of that row's ``embedding``
        #: (a thousand floats written out cost more than the query): at most
        #: :data:`ENCODED_KEPT` kept, the oldest dropped first.
        self._encoded: collections.OrderedDict[tuple[Any, int], str] = collections.OrderedDict()
        self._encoded_lock = threading.Lock()

    def options(self) -> dict[str, Any]:
        return {"text_fields": self.text_fields}

    def model(self) -> str:
        return self.model_id

    def build(self, connection: sqlite3.Connection) -> None:
        connection.execute(
            "CREATE TABLE docs (position INTEGER PRIMARY KEY, doc TEXT, embedding BLOB)"
        )
        docs = load_seed(self.seed, self.text_fields)
        texts = [" ".join(str(d.get(f, "")) for f in self.text_fields) for d in docs]
        vectors = embed_texts(self.embedder, texts).astype(np.float32)
        connection.executemany(
            "INSERT INTO docs VALUES (?, ?, ?)",
            ((i, json.dumps(doc), vectors[i].tobytes()) for i, doc in enumerate(docs)),
        )

    def query_rows(
        self, connection: sqlite3.Connection, query: str, context: Mapping[str, Any], limit: int
    ) -> list[Row]:
        if not query.strip():
            return []
        query_vector = self._embed_query(query)
        stamp, docs, matrix, row_norms = self._load(connection)
        if not docs or not np.any(query_vector):
            return []
        norms = row_norms * np.linalg.norm(query_vector)
        scores = np.divide(matrix @ query_vector, norms, out=np.zeros(len(docs)), where=norms > 0)
        order = np.lexsort((np.arange(len(docs)), -scores))[:limit]
        rows, texts = [], []
        for i in order.tolist():
            if scores[i] <= 0:
                break
            row = {
                **with_id(json.loads(docs[i]), self.id_field),
                "embedding": matrix[i].tolist(),
                "embedding_model": self.model_id,
                "similarity": float(scores[i]),
            }
            rows.append(row)
            texts.append(
                canonical_object_with(
                    row, "embedding", self._embedding_text(stamp, i, row["embedding"])
                )
            )
        return CanonicalRows(rows, texts)

    def _embed_query(self, query: str) -> Any:
        """The query's vector. The hashing embedder's own one-text path gives the very
        vector ``embed`` does (the same arithmetic in the same order) at a fifth of the
        cost, without 1,024 floats made into a list and read back."""
        if type(self.embedder) is HashingEmbedder:
            return self.embedder.embed_query(tokenize(query), {}).dense()
        return np.asarray(self.embedder.embed(query), dtype=np.float64)

    def _embedding_text(self, stamp: Any, position: int, vector: list[float]) -> str:
        """The canonical JSON of the stored vector at ``position`` (kept for next time)."""
        key = (stamp, position)
        with self._encoded_lock:
            text = self._encoded.get(key)
            if text is not None:
                self._encoded.move_to_end(key)
                return text
        text = canonical_json(vector)
        with self._encoded_lock:
            self._encoded[key] = text
            while len(self._encoded) > ENCODED_KEPT:
                self._encoded.popitem(last=False)
        return text

    def _load(self, connection: sqlite3.Connection) -> tuple[Any, list[str], Any, Any]:
        """Documents and their vectors, read once per database file version."""
        stat = self.path.stat()
        stamp = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
        cached = self._cache
        if cached is not None and cached[0] == stamp:
            return cached
        records = connection.execute("SELECT doc, embedding FROM docs ORDER BY position").fetchall()
        docs = [r["doc"] for r in records]
        matrix = (
            np.stack([np.frombuffer(r["embedding"], dtype=np.float32) for r in records]).astype(
                np.float64
            )
            if records
            else np.zeros((0, 1))
        )
        row_norms = np.linalg.norm(matrix, axis=1)
        self._cache = (stamp, docs, matrix, row_norms)
        return self._cache


#: What every answered row has besides its seed fields.
_ANSWERED = frozenset({"id", "embedding", "embedding_model", "similarity"})


@register_source_type
class SqliteVectorSpec(SeededSqliteSpec):
    """``sqlite_vector``: documents of a JSONL seed with stored embeddings, cosine order."""

    type: Literal["sqlite_vector"]
    text_fields: ColumnList = Field(description="seed fields joined into the embedded text")
    dim: int = Field(
        1024,
        ge=16,
        le=MAX_DIM,
        description="vector size of the hashing embedder (ignored by the onnx ones)",
    )

    def build(self, ctx: BuildContext) -> SqliteVectorSource:
        seed = resolve_seed_path(ctx, self.seed)
        rows = load_seed(seed, [*self.text_fields, *named_id_field(self)])
        check_mapped_fields(self, fields_of(rows) | _ANSWERED, f"seed file {seed}")
        embedder = embedder_from_name(
            "hashing" if ctx.embedder_name == "noop" else ctx.embedder_name,
            self.dim,
            ctx.cache_size,
            data_dir=ctx.data_dir,
            disk_cache_mb=ctx.disk_cache_mb,
        )
        return SqliteVectorSource(
            self.id,
            resolve_data_path(ctx, self.path),
            seed,
            self.text_fields,
            embedder,
            self.timeout_s,
            self.id_field,
        )
