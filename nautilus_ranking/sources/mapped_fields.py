"""A source's ``time_field`` and ``document_key`` checked before any request.

A path that is not one, or a field the source's rows do not have, would leave every row
undated or every document its own: recency and supersession silently off for that
source (an older revision ranked first, with no error). So the sources file refuses
both when it is read (``config --strict``, and any start), naming the source, the
option, the field and the fix — wherever the rows' fields are known before a search: a
seeded SQLite source's seed, a PostgreSQL source's seed, an HTTP source's response
mapping. A path whose first step is not a plain name (a JMESPath that starts with a
function or an index) is checked for its syntax only.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection, Iterable
from typing import Any

from nautilus_ranking.row_paths import path_problem

#: The sources-file options that name where a row keeps something.
MAPPED_OPTIONS = ("time_field", "document_key")
#: A path's first step when it is a plain name (followed by a dot, an index or a pipe).
_LEADING = re.compile(r"^([A-Za-z_][A-Za-z0-9_\-]*)(?=$|[.\[|])")
_FIELDS_SHOWN = 30


def checked_path(option: str, path: str | None) -> str | None:
    """``path`` when it is one; else a ValueError naming the option, the path and the fix."""
    if path is None:
        return None
    problem = path_problem(path)
    if problem is not None:
        raise ValueError(
            f"{option} {path[:60]!r} is not a path ({problem}): name a column or row key "
            "(updated_at), a dotted path (meta.modified) or a JMESPath (hits[0].at)"
        )
    return path


def leading_field(path: str) -> str | None:
    """The row field ``path`` starts from, None when that is not a plain name."""
    found = _LEADING.match(path)
    return found.group(1) if found else None


def fields_of(rows: Iterable[dict[str, Any]]) -> set[str]:
    """Every field any of ``rows`` has."""
    return {key for row in rows for key in row}


def check_mapped_fields(spec: object, fields: Collection[str], origin: str) -> None:
    """A ValueError for a ``time_field`` or ``document_key`` of ``spec`` naming a field
    none of its rows has (``fields``: every field they may have; ``origin``: where those
    came from, as a message names it)."""
    for option in MAPPED_OPTIONS:
        path = getattr(spec, option, None)
        if not isinstance(path, str) or path in fields:
            continue
        head = leading_field(path)
        if head is None or head in fields:
            continue
        close = difflib.get_close_matches(head, sorted(fields), n=1, cutoff=0.6)
        hint = f" — did you mean {close[0]!r}?" if close else ""
        shown = ", ".join(sorted(fields)[:_FIELDS_SHOWN])
        raise ValueError(
            f"{option} {path!r}: no row of {origin} has a field {head!r}{hint} (fields: "
            f"{shown}); name a field the rows have, or add {head!r} to the rows"
        )
