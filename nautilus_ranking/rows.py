"""What makes a row usable: the one rule the broker and the synthesizer share.

A source is someone else's code, and a row is whatever it returned. A row is used
when it is a dict, has a canonical JSON form (see :mod:`nautilus_ranking.response_hash`: so the
response can be hashed and printed) and, for a dict subclass, its mapping methods
work. Anything else is dropped from its source, never the request's failure. The rows
kept keep their place: a row's source rank is its position in the source's own answer.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np

from nautilus_ranking.response_hash import (
    NoCanonicalFormError,
    canonical_json,
    canonical_list,
    describe_error,
    hash_canonical,
)

#: Fields a source adds per query (a score, the match that found a graph row): left out
#: of a row's content id, so the same row has one id whatever the query.
PER_QUERY_FIELDS = frozenset(
    {
        "embedding",
        "embedding_model",
        "similarity",
        "bm25",
        "rank",
        "distance",
        "engine_score",
        "relation",
        "direction",
        "via",
        "edge",
    }
)


def content_id(row: dict[str, Any]) -> str:
    """A stable name for a row without an id: ``sha256-`` and 16 hex digits of its
    canonical JSON, the per-query fields left out — the same row has the same name in
    every call, never one that depends on its rank."""
    content = {k: v for k, v in row.items() if k not in PER_QUERY_FIELDS}
    try:
        text = canonical_json(content)
    except NoCanonicalFormError:
        try:  # a row the broker would have dropped, handed to the ranker directly
            text = json.dumps(content, sort_keys=True, default=repr)
        except Exception:  # a cycle, keys of mixed types, a repr that raises
            text = f"<row of {len(content)} fields: no JSON form>"
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return f"sha256-{digest[:16]}"


def id_or_content_id(row: dict[str, Any]) -> Any:
    """The row's own ``id``, else its :func:`content_id`."""
    row_id = row.get("id")
    return row_id if row_id is not None and row_id != "" else content_id(row)


class CanonicalRows(list[dict[str, Any]]):
    """A source's rows that come with their canonical JSON texts, ``texts[i]`` for
    ``self[i]`` (:func:`nautilus_ranking.response_hash.canonical_json` of it, byte for byte): the
    broker hashes them from these instead of encoding them again. For a source that
    already holds a row's costly part encoded (the vector source's 1,024 floats)."""

    def __init__(self, rows: list[dict[str, Any]], texts: list[str]) -> None:
        super().__init__(rows)
        self.texts = texts


def screen_rows(
    rows: list[Any],
) -> tuple[list[dict[str, Any]], str, list[tuple[int, str]], list[str]]:
    """Split a source's rows: (the usable rows, the response hash of the raw rows,
    ``(position, reason)`` for each row dropped, and the canonical JSON text of each
    usable row, for the response hash).

    A row is usable when it is a dict, has a canonical JSON form (so the response can
    be hashed and printed) and, for a dict subclass, its mapping methods work. The raw
    hash covers every returned item that has a canonical form, objects or not. Each
    row is encoded once (by the source, for :class:`CanonicalRows`): the raw hash, and
    the response's, are built from those texts.
    """
    dropped: list[tuple[int, str]] = []
    texts: list[str | None]
    if type(rows) is CanonicalRows and len(rows.texts) == len(rows):
        texts = list(rows.texts)
    else:
        texts = []
        for position, row in enumerate(rows, start=1):
            try:
                texts.append(canonical_json(row))
            except NoCanonicalFormError as exc:
                dropped.append((position, str(exc)))
                texts.append(None)
    raw_hash = hash_canonical(canonical_list(text for text in texts if text is not None))
    good: list[dict[str, Any]] = []
    good_texts: list[str] = []
    for position, (row, text) in enumerate(zip(rows, texts, strict=True), start=1):
        if text is None:
            continue
        if type(row) is dict:
            good.append(row)
            good_texts.append(text)
        elif not isinstance(row, dict):
            dropped.append((position, f"not a JSON object ({type(row).__name__})"))
        elif (problem := mapping_problem(row)) is not None:
            dropped.append((position, problem))
        else:
            good.append(row)
            good_texts.append(text)
    dropped.sort()
    return good, raw_hash, dropped, good_texts


def mapping_problem(row: dict[str, Any]) -> str | None:
    """Why a dict subclass cannot be read like a dict (its methods may be overridden)."""
    try:
        row.get("embedding")
        _ = "embedding_model" in row
        for _ in row.items():
            pass
        for _ in row.values():
            pass
        for key in row:
            row[key]
        len(row)
    except Exception as exc:
        return f"a {type(row).__name__} whose mapping methods fail ({describe_error(exc)})"
    return None


#: The largest source rank taken from ``AdapterResult.source_ranks`` (a position in a
#: list, far from where int64 sums or float64 keys lose it).
MAX_SOURCE_RANK = 1 << 40


def source_ranks_problem(ranks: Any, given: int) -> str | None:
    """Why ``ranks`` (``AdapterResult.source_ranks``) cannot be the positions of ``given``
    rows in their source's answer: one strictly increasing integer >= 1 a row (None: it can)."""
    if not isinstance(ranks, tuple | list | np.ndarray):
        return f"not a tuple of integers ({type(ranks).__name__})"
    try:
        array = np.asarray(ranks)
    except (TypeError, ValueError, OverflowError):
        return "not a flat sequence of integers"
    if array.ndim != 1 or (array.size and array.dtype.kind not in "iu"):
        return f"not a flat sequence of integers (dtype {array.dtype}, shape {array.shape})"
    if len(array) != given:
        return f"{len(array)} ranks for {given} rows"
    if given and not (
        array[0] >= 1 and array[-1] <= MAX_SOURCE_RANK and bool((array[1:] > array[:-1]).all())
    ):
        return f"not strictly increasing integers in 1..{MAX_SOURCE_RANK}"
    return None
