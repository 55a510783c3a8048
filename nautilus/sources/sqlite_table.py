"""A plain SQL table with a keyword filter: rows in table order, unranked, like most SQL sources."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nautilus.sources.base import Row, SqliteSource, quote_identifier, read_jsonl
from nautilus.text import keyword_stems

#: SQLite's default limit on host parameters is 999 (older builds) — keep well under.
MAX_KEYWORDS = 32


def _like_pattern(word: str) -> str:
    escaped = word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


class SqliteTableSource(SqliteSource):
    """Rows whose ``search_columns`` contain any of the query's words (``LIKE``), by rowid."""

    ranked = False  # rowid order says nothing about relevance: never counted as evidence

    def __init__(self, source_id: str, path: Path, seed: Path, table: str,
                 search_columns: list[str], timeout_s: float = 5.0) -> None:
        super().__init__(source_id, path, timeout_s)
        self.seed = seed
        self.table = quote_identifier(table)
        self.search_columns = [quote_identifier(c) for c in search_columns]

    def build(self, connection: sqlite3.Connection) -> None:
        docs = list(read_jsonl(self.seed))
        names = list(dict.fromkeys(k for doc in docs for k in doc))
        columns = ", ".join(quote_identifier(n) for n in names)
        connection.execute(f"CREATE TABLE {self.table} ({columns})")
        placeholders = ", ".join("?" for _ in names)
        connection.executemany(
            f"INSERT INTO {self.table} ({columns}) VALUES ({placeholders})",
            ([doc.get(n) for n in names] for doc in docs))

    def query_rows(self, connection: sqlite3.Connection, query: str,
                   context: Mapping[str, Any], limit: int) -> list[Row]:
        words = keyword_stems(query)[:MAX_KEYWORDS]
        if not words:
            return []
        clauses = " OR ".join(f"{column} LIKE ? ESCAPE '\\'"
                              for _ in words for column in self.search_columns)
        params = [_like_pattern(w) for w in words for _ in self.search_columns]
        cursor = connection.execute(
            f"SELECT * FROM {self.table} WHERE {clauses} ORDER BY rowid LIMIT ?",
            (*params, limit))
        return [dict(row) for row in cursor]
