"""A plain SQL table with a keyword filter: rows in table order, unranked, like most SQL sources."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from nautilus_ranking.sources.base import Row
from nautilus_ranking.sources.mapped_fields import check_mapped_fields, fields_of
from nautilus_ranking.sources.schema import (
    BuildContext,
    ColumnList,
    SeededSqliteSpec,
    column_list,
    named_id_field,
    register_source_type,
    resolve_data_path,
    resolve_seed_path,
)
from nautilus_ranking.sources.seeds import load_seed, sqlite_value
from nautilus_ranking.sources.sql import (
    MAX_KEYWORDS,
    escape_identifier,
    like_pattern,
    quote_identifier,
)
from nautilus_ranking.sources.sqlite.base import SeededSqliteSource
from nautilus_ranking.text.tokens import keyword_stems

_SEARCH_TABLE = "nautilus_search"


def _cell(value: Any) -> Any:
    """A seed value as SQLite stores it: nested JSON as its JSON text (see
    :func:`~nautilus_ranking.sources.seeds.sqlite_value` for integers past 64 bits)."""
    return sqlite_value(
        json.dumps(value, ensure_ascii=False) if isinstance(value, dict | list) else value
    )


class SqliteTableSource(SeededSqliteSource):
    """Rows whose ``search_columns`` contain any of the query's words, by rowid.

    Matching is case-insensitive for every script (a lower-cased copy of the
    search columns is kept beside the table; SQLite's own ``LIKE`` folds ASCII
    only) and a word matches its plural.
    """

    legacy_tables = frozenset()  # set per instance: the table's own name

    #: rowid order says nothing about relevance: never counted as evidence
    ranked: bool | None = False

    def __init__(
        self,
        source_id: str,
        path: Path,
        seed: Path,
        table: str,
        search_columns: list[str],
        timeout_s: float = 5.0,
        id_field: str = "id",
    ) -> None:
        super().__init__(source_id, path, seed, timeout_s)
        self.id_field = id_field
        if not search_columns:
            raise ValueError("search_columns must name at least one column")
        self.table_name = table
        self.table = quote_identifier(table)
        self.search_columns = [quote_identifier(c) for c in search_columns]
        self.search_names = list(search_columns)
        self.legacy_tables = frozenset({table})

    def options(self) -> dict[str, Any]:
        return {"table": self.table_name, "search_columns": self.search_names}

    def build(self, connection: sqlite3.Connection) -> None:
        docs = load_seed(self.seed, self.search_names)
        names = list(dict.fromkeys(k for doc in docs for k in doc))
        columns = ", ".join(escape_identifier(n) for n in names)
        connection.execute(f"CREATE TABLE {self.table} ({columns})")
        placeholders = ", ".join("?" for _ in names)
        connection.executemany(
            f"INSERT INTO {self.table} ({columns}) VALUES ({placeholders})",
            ([_cell(doc.get(n)) for n in names] for doc in docs),
        )
        connection.execute(f"CREATE TABLE {_SEARCH_TABLE} (id INTEGER PRIMARY KEY, text TEXT)")
        connection.executemany(
            f"INSERT INTO {_SEARCH_TABLE} VALUES (?, ?)",
            (
                (i, "\n".join(str(_cell(doc.get(n)) or "") for n in self.search_names).lower())
                for i, doc in enumerate(docs, start=1)
            ),
        )

    def query_rows(
        self, connection: sqlite3.Connection, query: str, context: Mapping[str, Any], limit: int
    ) -> list[Row]:
        words = keyword_stems(query)[:MAX_KEYWORDS]
        if not words:
            return []
        clauses = " OR ".join("s.text LIKE ? ESCAPE '\\'" for _ in words)
        cursor = connection.execute(
            f"SELECT t.* FROM {self.table} AS t JOIN {_SEARCH_TABLE} AS s ON s.id = t.rowid "
            f"WHERE {clauses} ORDER BY t.rowid LIMIT ?",
            (*(like_pattern(w) for w in words), limit),
        )
        return [dict(row) for row in cursor]


@register_source_type
class SqliteTableSpec(SeededSqliteSpec):
    """``sqlite_table``: a SQL table built from a JSONL seed, filtered by keyword."""

    type: Literal["sqlite_table"]
    table: str = Field(min_length=1, max_length=128, description="table name")
    search_columns: ColumnList = Field(
        description="seed fields the query's words are looked for in"
    )

    @field_validator("table")
    @classmethod
    def _table_name(cls, value: str) -> str:
        column_list([value])
        if value.lower() in {_SEARCH_TABLE, "nautilus_meta"} or value.lower().startswith(
            "sqlite_"
        ):  # SQLite's own (sqlite_master, …)
            raise ValueError(f"table name {value!r} is reserved")
        return value

    def build(self, ctx: BuildContext) -> SqliteTableSource:
        seed = resolve_seed_path(ctx, self.seed)
        rows = load_seed(seed, [*self.search_columns, *named_id_field(self)])
        check_mapped_fields(self, fields_of(rows) | {"id"}, f"seed file {seed}")
        return SqliteTableSource(
            self.id,
            resolve_data_path(ctx, self.path),
            seed,
            self.table,
            self.search_columns,
            self.timeout_s,
            self.id_field,
        )
