"""The upstream broker's canonical response hash, made the same in every process.

For JSON-native data (dicts with string keys, lists, tuples, strings, numbers, booleans,
``None``) the canonical form is byte for byte the upstream one,
``json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)`` (``NaN`` and
infinities are written ``NaN``/``Infinity``, as ``json`` does). Other values get a form
that does not depend on the process:

- ``set`` / ``frozenset``: the list of its elements in the order of their canonical
  form (``str(set)`` follows ``PYTHONHASHSEED``, so upstream's hash of a set differed
  from one process to the next);
- anything else (bytes, datetimes, decimals, …): ``str(value)`` as upstream — stable as
  long as that string is (an object whose ``str`` shows its memory address is not).

Some values have no canonical form at all, and :func:`canonical_json` raises
:class:`NoCanonicalFormError` naming why: a cycle, dict keys that cannot be compared with
one another (``{1: …, "b": …}``) or are not str/int/float/bool/None, an integer too long
for Python to print (over 4,300 digits), nesting deeper than the recursion limit, and a
value whose ``str`` raises. The broker drops such a row from its source with a warning.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from nautilus_ranking.errors import NautilusError


class NoCanonicalFormError(NautilusError, ValueError):
    """A value that cannot be written as canonical JSON (and so cannot be hashed)."""


def json_default(value: Any) -> Any:
    """What ``json`` writes for a value it does not know (also for printed output)."""
    if isinstance(value, set | frozenset):
        return sorted(value, key=_encode)
    return str(value)


#: ``json.dumps(sort_keys=True, separators=(",", ":"), default=...)`` builds this very
#: encoder for every call; one shared instance encodes the same (it keeps no state
#: between calls) without that cost per row.
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=json_default)
_encode = _ENCODER.encode


def canonical_json(data: Any) -> str:
    """The canonical JSON text of ``data`` (see the module docstring)."""
    try:
        return _encode(data)
    except Exception as exc:  # a value's own __str__ or .items() may raise anything
        raise NoCanonicalFormError(
            f"value has no canonical JSON form ({describe_error(exc)})"
        ) from exc


def canonical_list(texts: Iterable[str]) -> str:
    """The canonical JSON of a list from its items' canonical texts."""
    return "[" + ",".join(texts) + "]"


def canonical_object(items: Mapping[str, str]) -> str:
    """The canonical JSON of a dict with string keys from its values' canonical texts
    (keys sorted and encoded as ``json.dumps(sort_keys=True)`` writes them)."""
    return "{" + ",".join(f"{_encode(key)}:{items[key]}" for key in sorted(items)) + "}"


def canonical_object_with(data: Mapping[str, Any], key: str, text: str) -> str:
    """The canonical JSON of ``data`` (a dict with string keys) whose value at ``key``
    is already written out as ``text``: the other items in one encoding, ``text``
    spliced in at ``key``'s place in the sorted order."""
    before = _encode({k: v for k, v in data.items() if k < key})[1:-1]
    after = _encode({k: v for k, v in data.items() if k > key})[1:-1]
    middle = f"{_encode(key)}:{text}"
    return "{" + ",".join(part for part in (before, middle, after) if part) + "}"


def describe_error(exc: BaseException) -> str:
    """``"Type: first line of the message"``, even when the message itself fails."""
    try:
        message = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
    except Exception:
        message = ""
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def compute_response_hash(data: Any) -> str:
    """``"sha256:" + sha256(canonical JSON)``: key order is not significant, row order is."""
    return hash_canonical(canonical_json(data))


def hash_canonical(canonical: str) -> str:
    """The response hash of an already canonical JSON text."""
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def response_hash_of(
    data: dict[str, list[dict[str, Any]]], texts: list[tuple[list[dict[str, Any]], list[str]]]
) -> str:
    """:func:`compute_response_hash` of ``data``, from the canonical texts its rows were
    hashed with when each is one of the rows of ``texts`` (the same object), else
    encoded afresh: byte for byte the same canonical JSON either way."""
    known = {
        id(row): (row, text)
        for rows, row_texts in texts
        for row, text in zip(rows, row_texts, strict=True)
    }
    if type(data) is not dict or not known:
        return compute_response_hash(data)
    parts: dict[str, str] = {}
    for source_id, rows in data.items():
        if type(source_id) is not str or type(rows) is not list:
            return compute_response_hash(data)
        row_texts = []
        for row in rows:
            entry = known.get(id(row))
            if entry is None or entry[0] is not row:
                return compute_response_hash(data)
            row_texts.append(entry[1])
        parts[source_id] = canonical_list(row_texts)
    return hash_canonical(canonical_object(parts))
