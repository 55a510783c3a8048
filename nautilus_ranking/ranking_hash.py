"""The ranked answer's hash: the order an agent reads, which ``response_hash`` misses.

``response_hash`` is the upstream broker's hash of ``data``, ``{source_id: rows}``: it
covers every row and the order within each source, but a JSON object's keys are sorted,
so it covers neither the order across sources that an agent reads (``ranking``, the MCP
``results``, the broker's ranked route's ``rows``) nor the time the rows were aged
from. Two answers ranked differently can share it. ``ranking_hash`` covers what
decides that order:

- each row handed over, best first, as ``[source_id, id]`` (a row without an id, or
  with one that has no JSON form, by its content's name:
  :func:`nautilus_ranking.rows.content_id`);
- ``reference``, the time the rows' ages were counted from (the answer's
  ``time.reference``; null without recency or supersession), and the request's
  ``as_of`` (null when not given);
- ``profile``, the ranking profile that ranked it (null: the global knobs).

It is ``"sha256:"`` + sha256 of the canonical JSON (:mod:`.response_hash`) of
``{"as_of": …, "profile": …, "reference": …, "rows": [[source_id, id], …]}``, so anyone
holding the answer can recompute it. Only a ranked answer has one: a passthrough's
order is the sources' own, and its ``data`` and ``response_hash`` stay the upstream ones.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from nautilus_ranking.response_hash import (
    NoCanonicalFormError,
    canonical_json,
    compute_response_hash,
)
from nautilus_ranking.rows import content_id


def ranking_hash(
    rows: Iterable[tuple[str, Any]],
    *,
    reference: Any = None,
    as_of: str | None = None,
    profile: str | None = None,
) -> str:
    """The hash of ``rows`` (``(source_id, row)``, best first) ranked with ``reference``,
    ``as_of`` and ``profile`` (see the module docstring)."""
    payload = {
        "as_of": as_of,
        "profile": profile,
        "reference": reference,
        "rows": [[source_id, row_name(row)] for source_id, row in rows],
    }
    try:
        return compute_response_hash(payload)
    except NoCanonicalFormError:  # a reference time of no JSON form: as its text
        return compute_response_hash({**payload, "reference": repr(reference)})


def row_name(row: Any) -> Any:
    """A row's ``id`` as an answer carries it; without one (or with one that has no
    JSON form), the name of its content, the same in every call."""
    if not isinstance(row, Mapping):
        return content_id({"row": repr(row)})
    ident = row.get("id")
    if ident is None or ident == "":
        return content_id(dict(row))
    try:
        canonical_json(ident)
    except NoCanonicalFormError:
        return content_id(dict(row))
    return ident


def ranked_rows_of_json(answer: Mapping[str, Any]) -> list[tuple[dict[str, Any], str, Any]]:
    """Each ``ranking`` entry of a JSON answer with its source and row, best first: the
    entry's row is the next row of its source in ``data`` (within a source, ``data``
    holds its rows in rank order)."""
    taken: dict[str, int] = {}
    out = []
    for entry in answer["ranking"]:
        source = entry["source_id"]
        at = taken.get(source, 0)
        taken[source] = at + 1
        out.append((entry, source, answer["data"][source][at]))
    return out


def ranking_hash_of_json(answer: Mapping[str, Any], as_of: str | None = None) -> str:
    """The ``ranking_hash`` of a JSON answer (``POST /v1/query``, ``nautilus-ranking
    query --json``) recomputed from its ``ranking``, ``data``, ``time`` and ``profile``:
    each ranking entry's row is the next row of its source in ``data``. ``as_of``: the
    one the request gave (an answer does not repeat it)."""
    time = answer.get("time")
    return ranking_hash(
        [(source, row) for _, source, row in ranked_rows_of_json(answer)],
        reference=time.get("reference") if isinstance(time, Mapping) else None,
        as_of=as_of,
        profile=answer.get("profile"),
    )
