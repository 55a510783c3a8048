"""Full-text search over a SQLite FTS5 table, best BM25 first."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nautilus.sources.base import Row, SqliteSource, quote_identifier, read_jsonl
from nautilus.text import plain_tokens


def fts_match_expression(query: str) -> str:
    """The user's words as an FTS5 expression that means "any of these words".

    Each word is reduced to letters and digits and double-quoted, so FTS syntax
    in user text (``"``, ``NEAR``, ``*``, ``:``, ``-``, ``AND``) is matched as
    plain words and can neither raise nor change the query's meaning.
    """
    words = dict.fromkeys(plain_tokens(query))
    return " OR ".join(f'"{w}"' for w in words)


class SqliteFtsSource(SqliteSource):
    """Rows of a JSONL seed indexed in FTS5 over ``columns``; ``id_field`` stored unindexed.

    Rows come best first, each with its ``bm25`` score (SQLite's: lower is better)."""

    ranked = True  # BM25 order: evidence the ranking counts (nautilus/synthesis/fusion.py)

    def __init__(self, source_id: str, path: Path, seed: Path, columns: list[str],
                 id_field: str = "id", timeout_s: float = 5.0) -> None:
        super().__init__(source_id, path, timeout_s)
        self.seed = seed
        for name in (id_field, *columns):
            quote_identifier(name)  # rejects anything but plain names, at start-up
        self.columns = list(columns)
        self.id_field = id_field

    def build(self, connection: sqlite3.Connection) -> None:
        fields = [f"{quote_identifier(self.id_field)} UNINDEXED"]
        fields += [quote_identifier(c) for c in self.columns]
        connection.execute(f"CREATE VIRTUAL TABLE docs USING fts5({', '.join(fields)}, "
                           "tokenize = 'porter unicode61')")
        names = [self.id_field, *self.columns]
        placeholders = ", ".join("?" for _ in names)
        connection.executemany(
            f"INSERT INTO docs VALUES ({placeholders})",
            ([_text(doc.get(n)) for n in names] for doc in read_jsonl(self.seed)))

    def query_rows(self, connection: sqlite3.Connection, query: str,
                   context: Mapping[str, Any], limit: int) -> list[Row]:
        expression = fts_match_expression(query)
        if not expression:
            return []
        cursor = connection.execute(
            "SELECT *, bm25(docs) AS bm25 FROM docs WHERE docs MATCH ? ORDER BY bm25 LIMIT ?",
            (expression, limit))
        return [dict(row) for row in cursor]


def _text(value: object) -> str:
    return "" if value is None else str(value)
