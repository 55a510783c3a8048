"""**Supersession** (``NAUTILUS_RANKING_SUPERSEDE``): which rows are revisions of one
document. Within one source: the same value under its document key
(``NAUTILUS_RANKING_DOCUMENT_KEYS`` or the source's ``document_key``), else the same
``id``. Across sources only when both map a document key and the newer row's source may
revise the other's (``NAUTILUS_RANKING_MAY_REVISE``): two tables that number their rows
1..5 hold ten documents, and a source nobody trusted with another's documents cannot
take their place by sharing an id. ``NAUTILUS_RANKING_DEDUP_KEY`` names copies, never
revisions. The revision in force — the newest, or with ``as_of`` the newest dated at or
before it — is shown in the place of the group's best-ranked revision, with the score
of that place (so the list's scores stay in order; ``--explain`` gives its own); each
revision whose period ends before its begins leaves the list for its ``also_from``
(``copy: "revision"``, with its time), and with ``as_of`` each one dated after it
likewise (``copy: "later_revision"``). A row dated past the reference (a far-future
time held back, or after ``as_of``) never takes another's place; a row dated after
``as_of`` is aged as fully aged. Undated revisions, and times that may be in either
order (``row_times.py``), are left as they are. Time wins over
``NAUTILUS_RANKING_CANONICAL_SOURCES``: a canonical source chooses among copies of the
revision in force, never an older revision over it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from nautilus_ranking.response_hash import NoCanonicalFormError, canonical_json
from nautilus_ranking.row_paths import getter
from nautilus_ranking.synthesis.rank_warnings import RankWarnings
from nautilus_ranking.synthesis.row_times import read_by_source, source_readers
from nautilus_ranking.text.arrays import FloatArray, IntArray

BoolArray = npt.NDArray[np.bool_]


class Timing(Protocol):
    """What supersession reads of the rows' times (``recency.Timing``): each row's
    revision key, period, source and whether it may lead or is dated after ``as_of``;
    which sources may revise which; and the report it counts into."""

    @property
    def keys(self) -> list[str | None] | None: ...
    @property
    def lo(self) -> FloatArray: ...
    @property
    def hi(self) -> FloatArray: ...
    @property
    def source(self) -> IntArray: ...
    @property
    def revises(self) -> BoolArray: ...
    @property
    def lead(self) -> BoolArray: ...
    @property
    def after(self) -> BoolArray: ...
    @property
    def report(self) -> dict[str, Any]: ...


def revision_keys(
    rows: list[dict[str, Any]],
    source_ids: Sequence[str],
    source_index: IntArray,
    document_keys: Mapping[str, str],
    warnings: RankWarnings,
) -> tuple[list[str | None], list[bool]]:
    """Each row's revision key (None: no value), and whether each source maps a document
    key. A mapped source's rows are keyed by that value alone, so they may meet another
    mapped source's (``revises`` says whether they may revise each other); an unmapped
    source's by its own place and the row's ``id``: revisions within that source only."""
    mapped = source_readers(document_keys, source_ids, warnings, "document_key")
    by_id = getter("id")
    readers = [r or (by_id if not isinstance(by_id, str) else None) for r in mapped]
    values, _ = read_by_source(rows, source_index, readers)
    prefixes = ["d" if r is not None else f"{j}:" for j, r in enumerate(mapped)]
    keys: list[str | None] = []
    for value, j in zip(values, source_index.tolist(), strict=True):
        key = _revision_key(value)
        keys.append(prefixes[j] + key if key is not None else None)
    return keys, [r is not None for r in mapped]


def revises(
    source_ids: Sequence[str], mapped: Sequence[bool], may_revise: Mapping[str, frozenset[str]]
) -> BoolArray:
    """``[a, b]``: source ``a``'s newer revision may supersede source ``b``'s row — the
    same source, or both mapping a document key and ``NAUTILUS_RANKING_MAY_REVISE``
    naming the pair."""
    n = len(source_ids)
    out = np.eye(n, dtype=bool)
    ids = [sid.lower() if isinstance(sid, str) else None for sid in source_ids]
    for a, reviser in enumerate(ids):
        allowed = may_revise.get(reviser, frozenset()) if reviser is not None else frozenset()
        for b, revised in enumerate(ids):
            if mapped[a] and mapped[b] and revised in allowed:
                out[a, b] = True
    return out


def _revision_key(value: Any) -> str | None:
    """A document key as text, when the batch's are not all strings: a string marked
    ``s``, anything else canonical JSON marked ``j`` (so "5" and 5 stay apart); None
    for no value."""
    if type(value) is str:
        return "s" + value if value else None
    if value is None or (isinstance(value, float) and value != value):
        return None
    try:
        return "j" + canonical_json(value)
    except NoCanonicalFormError:
        return None


def supersede(
    order: IntArray,
    timing: Timing,
    mark: Callable[[int, int, str], None],
    drop: Callable[[int], None],
) -> tuple[IntArray, dict[int, int]]:
    """``order`` (the kept rows, best first) with each document's revision in force in
    the place of its best-ranked revision and the revisions it replaced gone, and
    ``{in force: the row whose place it took}``. ``mark(kept, other, kind)`` records a
    replaced revision (``revision`` or ``later_revision``) into the kept one's
    provenance; ``drop(row)`` forgets a row that left (its copies go with it)."""
    keys = timing.keys
    if keys is None:
        return order, {}
    shared = {k for k, count in Counter(keys).items() if count > 1 and k is not None}
    if not shared:
        return order, {}
    in_group = np.fromiter(map(shared.__contains__, keys), dtype=bool, count=len(keys))
    places = np.flatnonzero(in_group[order] & ~np.isnan(timing.lo[order]))
    groups: dict[str | None, list[int]] = {}
    for place, i in zip(places.tolist(), order[places].tolist(), strict=True):
        groups.setdefault(keys[i], []).append(place)
    placed, gone = order.copy(), np.zeros(len(order), dtype=bool)
    took: dict[int, int] = {}
    counts: Counter[str] = Counter()
    for group in groups.values():
        if len(group) < 2:
            continue
        at = np.array(group)
        for kept, replaced in _settle(order[at], timing):
            first = min(group[kept], *(group[i] for i, _ in replaced))
            winner = int(order[group[kept]])
            for i, kind in replaced:
                mark(winner, int(order[group[i]]), kind)
                drop(int(order[group[i]]))
                gone[group[i]] = True
                counts[kind] += 1
            gone[group[kept]] = True
            gone[first], placed[first] = False, winner
            if first != group[kept]:
                took[winner] = int(order[first])
    report = timing.report
    if counts:
        report["superseded"] = counts["revision"]
        if "later_revisions" in report:
            report["later_revisions"] = counts["later_revision"]
    out: IntArray = placed[~gone]
    return out, took


def _settle(rows: IntArray, timing: Timing) -> list[tuple[int, list[tuple[int, str]]]]:
    """One document's dated revisions (``rows``, best-ranked first): each revision that
    stays in force, by position in ``rows``, with the revisions it replaces. Newest
    first, a row that may lead replaces each row it may revise that certainly ended
    before it began, and (with ``as_of``) each row dated after it that may revise it."""
    lo, hi, source = timing.lo[rows], timing.hi[rows], timing.source[rows]
    lead, after = timing.lead[rows], timing.after[rows]
    taken = np.zeros(len(rows), dtype=bool)
    out: list[tuple[int, list[tuple[int, str]]]] = []
    for w in np.lexsort((np.arange(len(rows)), -(lo + hi))).tolist():
        if taken[w] or not lead[w]:
            continue
        taken[w] = True
        older = ~taken & timing.revises[source[w], source] & (hi < lo[w])
        later = ~taken & ~lead & after & timing.revises[source, source[w]] & (lo > hi[w])
        replaced = older | later
        if replaced.any():
            taken |= replaced
            kinds = [
                (i, "revision" if older[i] else "later_revision")
                for i in np.flatnonzero(replaced).tolist()
            ]
            out.append((w, kinds))
    return out
