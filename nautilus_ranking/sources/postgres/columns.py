"""What a seed's values become in a PostgreSQL table: each column's type, read from the
seed's values (or kept as the table already holds it), and the values PostgreSQL would
refuse, found before a row is written."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from psycopg import Connection
    from psycopg.sql import Composable

#: The range of a ``bigint`` column; a seed's integers outside it make a ``numeric`` one.
BIGINT = (-(1 << 63), (1 << 63) - 1)
#: The longest id ``load`` writes, in bytes as stored: a primary key's btree entry holds
#: at most 2,704 bytes on PostgreSQL's 8 kB pages (a longer one is refused as its row is
#: written); the margin covers the entry's header and a jsonb id's own. ``nautilus-ranking
#: config --strict`` refuses a longer id too, so it passes only what ``load`` stores.
MAX_ID_BYTES = 2000


def stored_types(conn: Connection[Any], table: Composable, types: dict[str, str]) -> dict[str, str]:
    """``types`` (from this seed) with a column the table already holds as jsonb kept
    jsonb: a seed whose ids were ``1`` and ``"A-7"`` and are now only ``1`` still writes
    JSON values into it (a bare integer would be refused there)."""
    from psycopg import sql

    cursor = conn.execute(sql.SQL("SELECT * FROM {} LIMIT 0").format(table))
    jsonb = conn.adapters.types.get("jsonb")
    stored = {
        column.name
        for column in cursor.description or ()
        if jsonb is not None and column.type_code == jsonb.oid
    }
    return {name: "jsonb" if name in stored else kind for name, kind in types.items()}


def unstorable(value: Any, json_column: bool, depth: int = 0) -> str:
    """Why PostgreSQL would refuse ``value`` ("" when it takes it): text holds no NUL and
    no lone surrogate, JSON no NaN or Infinity."""
    if isinstance(value, str):
        if "\x00" in value:
            return "a NUL character (\\u0000), which PostgreSQL text cannot hold; remove it"
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "a lone surrogate (\\ud800-\\udfff), which is not UTF-8 text; remove it"
        return ""
    if isinstance(value, float) and (json_column or depth) and not np.isfinite(value):
        return f"{value} in a JSON value (PostgreSQL's jsonb has no NaN or Infinity)"
    if isinstance(value, dict):
        for key, item in value.items():
            problem = unstorable(key, True, depth + 1) or unstorable(item, True, depth + 1)
            if problem:
                return problem
    if isinstance(value, list):
        for item in value:
            problem = unstorable(item, True, depth + 1)
            if problem:
                return problem
    return ""


def id_problem(value: Any) -> str:
    """Why ``value`` cannot be a row's id in a PostgreSQL table ("" when it can): longer
    than :data:`MAX_ID_BYTES` as stored (a number always fits)."""
    if isinstance(value, bool | int | float):
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    size = len(text.encode("utf-8", "surrogatepass"))
    if size <= MAX_ID_BYTES:
        return ""
    return (
        f"an id of {size:,} bytes, longer than the {MAX_ID_BYTES:,} a PostgreSQL primary "
        "key holds; shorten it (or make another field the id_field)"
    )


def column_type(values: list[Any]) -> str:
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, bool) for v in present):
        return "boolean"
    if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        return "bigint" if all(BIGINT[0] <= v <= BIGINT[1] for v in present) else "numeric"
    if present and all(isinstance(v, int | float) and not isinstance(v, bool) for v in present):
        return "double precision"
    if all(isinstance(v, str) for v in present):
        return "text"
    return "jsonb"
