"""What a seed's values become in a PostgreSQL table: each column's type, read from the
seed's values (or kept as the table already holds it), and the values PostgreSQL would
refuse, found before a row is written."""

from __future__ import annotations

import json
import math
from decimal import Decimal
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


def id_key(value: Any) -> Any:
    """An id as the seed means it, to compare ids: a number by the value it is written
    with (``1``, ``1.0`` and a ``Decimal`` 1 are one id; a float by its shortest form,
    as JSON writes it), a string by its text, a boolean apart from both, anything else
    by its JSON. So ``"01"``, ``"1"`` and ``1`` are three ids."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, float) and math.isfinite(value):
        return Decimal(repr(value))  # the number a seed writes (JSON's shortest form)
    if isinstance(value, int | float | Decimal):
        return value  # Python compares and hashes numbers by value, exactly
    if isinstance(value, str):
        return ("text", value)
    return ("json", json.dumps(value, sort_keys=True, default=str))


def id_column_type(values: list[Any]) -> str:
    """A new table's id column: one that holds every seed id distinctly and exactly.
    ``bigint`` (``numeric`` past its range) for integers, ``double precision`` for
    numbers a double holds exactly, ``text`` for strings, ``boolean``; ``jsonb`` for
    anything else (mixed kinds, or integers past 2**53 beside fractions), where numbers
    compare by value, strings by text, and a string never equals a number."""
    kind = column_type(values)
    if kind == "double precision" and not all(float(v) == v for v in values if isinstance(v, int)):
        return "jsonb"  # a double would make 2**53 and 2**53 + 1 one id
    return kind


#: The integer columns an id may already be in, and their ranges.
_INTEGERS = {
    "smallint": (-(1 << 15), (1 << 15) - 1),
    "integer": (-(1 << 31), (1 << 31) - 1),
    "bigint": BIGINT,
}
_TEXTS = ("text", "character varying", "character")


def holds_exactly(column: str, value: Any) -> bool | None:
    """Whether an existing id column of type ``column`` (``format_type``) stores ``value``
    as itself, distinct from every other id; None for a type this cannot tell."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    base = column.split("(")[0].strip()
    if base == "jsonb":
        return True
    if base in _INTEGERS:
        low, high = _INTEGERS[base]
        return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high
    if base == "numeric":
        return number and math.isfinite(value) and "(" not in column
    if base == "double precision":
        return number and math.isfinite(value) and float(value) == value
    if base == "real":
        return number and math.isfinite(value) and float(np.float32(value)) == value
    if base in _TEXTS:
        return isinstance(value, str)
    if base == "boolean":
        return isinstance(value, bool)
    return None


def shown_id(value: Any) -> str:
    """An id as a message names it, with its kind when that matters (``1 (a number)``)."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    text = text if len(text) <= 40 else text[:40] + "…"
    if isinstance(value, bool):
        return f"{text} (a boolean)"
    if isinstance(value, int | float):
        return f"{text} (a number)"
    return text


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


def stored_type(conn: Connection[Any], table: Composable, column: str) -> str:
    """The type of ``table``'s ``column`` as PostgreSQL names it (``bigint``, ``text``)."""
    from psycopg import sql

    cursor = conn.execute(
        sql.SQL("SELECT {} FROM {} LIMIT 0").format(sql.Identifier(column), table)
    )
    oid = (cursor.description or [])[0].type_code
    (name,) = conn.execute("SELECT format_type(%s, NULL)", (oid,)).fetchone() or ("",)
    return str(name)


def ids_refused(column: str, ids: list[Any]) -> str:
    """The seed ids an id column of type ``column`` would not store as themselves, as a
    message names them (at most five, then how many more); "" when it holds them all."""
    bad = [i for i in ids if holds_exactly(column, i) is False]
    if not bad:
        return ""
    more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
    return ", ".join(shown_id(i) for i in bad[:5]) + more


def id_param(value: Any, column: str) -> Any:
    """An id as it is sent for ``column``: JSON for jsonb, a float exactly for numeric
    (PostgreSQL's float-to-numeric cast keeps 15 digits)."""
    from psycopg.types.json import Jsonb

    if column == "jsonb":
        return Jsonb(value)
    if column.startswith("numeric") and isinstance(value, float):
        return Decimal(repr(value))
    return value
