"""A path to a value in a row: a key, a dotted path through nested objects, or a
JMESPath. Where a source says its rows keep their time or their document key; read by
the ranking and checked by the settings and the sources file alike, so it sits below
all three."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

_DOTTED = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*(?:\.[A-Za-z_][A-Za-z0-9_\-]*)*$")

#: What reads one value (a time, a document key) from a row.
Reader = Callable[[dict[str, Any]], Any]


def getter(path: str) -> Reader | str:
    """What reads ``path`` from a row: a key, a dotted path through nested objects (a
    JSON column's text included), else a JMESPath (with the ``http`` extra). A string
    says why there is none."""
    if not path:
        return "empty path"
    if _DOTTED.match(path) and "." not in path:

        def key(row: dict[str, Any]) -> Any:
            return row.get(path)

        key.key = path  # type: ignore[attr-defined]  # read a whole source at once
        return key
    if _DOTTED.match(path):
        parts = path.split(".")

        def dotted(row: dict[str, Any]) -> Any:
            if path in row:  # a key that holds a dot
                return row[path]
            value: Any = row
            for part in parts:
                if isinstance(value, str) and value.startswith("{"):
                    value = _json_object(value)  # a JSON column, as SQLite keeps one
                if not isinstance(value, dict):
                    return None
                value = value.get(part)
            return value

        return dotted
    try:
        import jmespath
    except ImportError:
        return "a JMESPath needs the http extra (pip install 'nautilus-ranking[http]')"
    try:
        compiled = jmespath.compile(path)
    except Exception as exc:  # jmespath's own errors: a bad expression, said once
        return f"not a JMESPath ({str(exc)[:80]})"

    def searched(row: dict[str, Any]) -> Any:
        try:
            return compiled.search(row)
        except Exception:  # a row the expression cannot walk has no time
            return None

    return searched


def _json_object(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def path_problem(path: str) -> str | None:
    """Why ``path`` reads nothing from any row (None: it is a key, a dotted path or a
    JMESPath)."""
    read = getter(path)
    return " ".join(read.split()) if isinstance(read, str) else None  # a JMESPath's on one line
