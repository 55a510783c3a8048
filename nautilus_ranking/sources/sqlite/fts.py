"""Full-text search over a SQLite FTS5 table, best BM25 first."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

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
from nautilus_ranking.sources.sql import quote_identifier
from nautilus_ranking.sources.sqlite.base import SeededSqliteSource
from nautilus_ranking.text.tokens import plain_tokens

#: At most this many distinct words of a query are searched (as the other types do): a
#: query of 100,000 words must cost what a sentence costs, not an OR of them all.
MAX_TERMS = 32


def fts_match_expression(query: str) -> str:
    """The user's words as an FTS5 expression that means "any of these words".

    Each word is reduced to letters and digits and double-quoted, so FTS syntax
    in user text (``"``, ``NEAR``, ``*``, ``:``, ``-``, ``AND``) is matched as
    plain words and can neither raise nor change the query's meaning. The first
    :data:`MAX_TERMS` distinct words count.
    """
    words = list(dict.fromkeys(plain_tokens(query)))[:MAX_TERMS]
    return " OR ".join(f'"{w}"' for w in words)


class SqliteFtsSource(SeededSqliteSource):
    """Rows of a JSONL seed indexed in FTS5 over ``columns``; ``id_field`` and ``stored``
    (fields returned but not searched: a row's time, its document key) stored unindexed.

    Rows come best first, each with its ``bm25`` score (SQLite's: lower is better)."""

    #: BM25 order: evidence the ranking counts (nautilus_ranking/synthesis/fusion.py)
    ranked: bool | None = True

    legacy_tables = frozenset({"docs"})

    def __init__(
        self,
        source_id: str,
        path: Path,
        seed: Path,
        columns: list[str],
        id_field: str = "id",
        timeout_s: float = 5.0,
        stored: list[str] | None = None,
    ) -> None:
        super().__init__(source_id, path, seed, timeout_s)
        stored = [c for c in stored or () if c != id_field and c not in columns]
        for name in (id_field, *columns, *stored):
            quote_identifier(name)  # rejects anything but plain names, at start-up
        if not columns:
            raise ValueError("columns must name at least one column")
        self.columns = list(columns)
        self.id_field = id_field
        self.stored = stored

    def options(self) -> dict[str, Any]:
        # null_ids: a row without an id stores NULL, no longer "" (rebuilds older files)
        options = {"columns": self.columns, "id_field": self.id_field, "null_ids": True}
        if self.stored:  # (without, the options are what they were: no rebuild)
            options["stored"] = self.stored
        return options

    def build(self, connection: sqlite3.Connection) -> None:
        docs = load_seed(self.seed, self.columns)
        fields = [f"{quote_identifier(self.id_field)} UNINDEXED"]
        fields += [quote_identifier(c) for c in self.columns if c != self.id_field]
        fields += [f"{quote_identifier(c)} UNINDEXED" for c in self.stored]
        names = [self.id_field, *(c for c in self.columns if c != self.id_field), *self.stored]
        connection.execute(
            f"CREATE VIRTUAL TABLE docs USING fts5({', '.join(fields)}, "
            "tokenize = 'porter unicode61')"
        )
        placeholders = ", ".join("?" for _ in names)
        connection.executemany(
            f"INSERT INTO docs VALUES ({placeholders})",
            (
                [
                    _id(doc.get(self.id_field)),
                    *(_text(doc.get(n)) for n in names[1 : len(names) - len(self.stored)]),
                    *(_stored(doc.get(n)) for n in self.stored),
                ]
                for doc in docs
            ),
        )

    def query_rows(
        self, connection: sqlite3.Connection, query: str, context: Mapping[str, Any], limit: int
    ) -> list[Row]:
        expression = fts_match_expression(query)
        if not expression:
            return []
        cursor = connection.execute(
            "SELECT *, bm25(docs) AS bm25 FROM docs WHERE docs MATCH ? ORDER BY bm25 LIMIT ?",
            (expression, limit),
        )
        return [dict(row) for row in cursor]


def _text(value: object) -> str:
    return "" if value is None else str(sqlite_value(str(value)))


def _stored(value: object) -> object:
    """A stored field as SQLite keeps it: nested JSON as its text, a number as itself."""
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    return sqlite_value(value) if value is not None else None


def _id(value: object) -> str | None:
    """The id as stored (text); a row without one keeps none (not ``""``)."""
    return None if value is None else _text(value)


@register_source_type
class SqliteFtsSpec(SeededSqliteSpec):
    """``sqlite_fts``: an FTS5 full-text index built from a JSONL seed, BM25 order."""

    type: Literal["sqlite_fts"]
    columns: ColumnList = Field(description="seed fields indexed and returned")
    stored: list[str] = Field(
        default_factory=list,
        max_length=64,
        description="seed fields returned but not searched (a time_field, a document_key)",
    )

    @model_validator(mode="after")
    def _time_is_returned(self) -> SqliteFtsSpec:
        returned = {self.id_field, *self.columns, *self.stored}
        for option in ("time_field", "document_key"):
            path = getattr(self, option)
            if path is not None and path.split(".")[0] not in returned:
                raise ValueError(
                    f"{option} {path!r} is not a field this source returns: add it to "
                    f"stored (returned, not searched) or to columns"
                )
        return self

    def build(self, ctx: BuildContext) -> SqliteFtsSource:
        seed = resolve_seed_path(ctx, self.seed)
        rows = load_seed(seed, [*self.columns, *named_id_field(self)])
        check_mapped_fields(self, fields_of(rows) | {"id"}, f"seed file {seed}")
        return SqliteFtsSource(
            self.id,
            resolve_data_path(ctx, self.path),
            seed,
            self.columns,
            self.id_field,
            self.timeout_s,
            column_list(self.stored) if self.stored else None,
        )
