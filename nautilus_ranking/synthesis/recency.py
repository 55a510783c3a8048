"""Time as a ranking signal: a bounded decay by age, and the newest revision kept.

**The decay** (``NAUTILUS_RANKING_RECENCY``) is bounded as a boost is
(``ranking_boost.py``): a dated row loses ``RECENCY_SHARE · spread · (1 - freshness)``,
``spread`` the batch's unboosted relevance spread among its best documents (at most a
quarter of one vote) and ``freshness`` the decay of the row's age, 1 when new. So
recency reorders rows of similar relevance and never passes a row over a clearly
better match; a row without relevance, or without a time, is not aged (a missing time
is no evidence of age). Freshness is ``0.5 ** (age / half_life)`` or
``max(0, 1 - age / window)``.

**The reference** a row's age is counted from is the request's ``as_of``, else the
newest row time in the batch — never the wall clock, so the same rows give the same
answer tomorrow. One far-future row cannot age every other: without ``as_of`` the
reference is at most the decay's reach (``Recency.reach``: a window, or eight
half-lives) past the second-newest time — past it every other row would be fully aged
whether that row's time is real or a mistake — and a row past the reference is as new
as it (age 0), counted as ``ahead``.

**Supersession** (``NAUTILUS_RANKING_SUPERSEDE``): rows of one document — the same
value under the source's document key (``NAUTILUS_RANKING_DOCUMENT_KEYS``), else under
``NAUTILUS_RANKING_DEDUP_KEY``, else the same ``id`` — are revisions. The newest is shown in
the place of the group's best-ranked revision, and each revision whose period ends
before the newest's begins leaves the list for its ``also_from`` (``copy:
"revision"``, with its time). Undated revisions, and times that may be in either order
(``row_times.py``), are left as they are. Time wins over
``NAUTILUS_RANKING_CANONICAL_SOURCES``: a canonical source chooses among copies of the
newest revision, never an older revision over a newer one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import numpy as np

from nautilus_ranking.response_hash import NoCanonicalFormError, canonical_json
from nautilus_ranking.settings.time_entries import Recency
from nautilus_ranking.synthesis.rank_warnings import RankWarnings
from nautilus_ranking.synthesis.ranking_boost import relevance_spread
from nautilus_ranking.synthesis.row_times import getter, period_of, read_times
from nautilus_ranking.text.arrays import FloatArray, IntArray

#: The share of the batch's relevance spread a row loses when fully aged (freshness 0):
#: half a ``high`` boost's bump. docs/tuning-time.md measured it.
RECENCY_SHARE = 0.5
DAY = 86_400.0

_REPORT: ContextVar[dict[str, Any] | None] = ContextVar("nautilus_time_report", default=None)


@dataclass
class Timing:
    """The time of each scored row and what it did. ``lo``/``hi``: the period (NaN:
    undated); ``age`` in seconds (NaN: undated or no reference); ``freshness`` (1: new
    or not aged); ``adjust``: what recency adds to each score (None: no decay set);
    ``keys``: each row's revision key (None: no supersession)."""

    lo: FloatArray
    hi: FloatArray
    shown: list[str | None]
    age: FloatArray
    freshness: FloatArray
    adjust: FloatArray | None
    keys: list[str | None] | None

    def row_time(self, i: int) -> dict[str, Any]:
        """Row ``i``'s time as ``--explain`` shows it."""
        age = float(self.age[i])
        return {
            "time": self.shown[i],
            "age_days": round(age / DAY, 3) if age == age else None,
            "freshness": float(self.freshness[i]),
            "recency": float(self.adjust[i]) if self.adjust is not None else 0.0,
        }


def timing(
    recency: Recency | None,
    supersede: bool,
    paths: Mapping[str, str],
    document_keys: Mapping[str, str],
    dedup_key: str | None,
    rows: list[dict[str, Any]],
    source_ids: Sequence[str],
    source_index: IntArray,
    relevance: FloatArray,
    doc: IntArray,
    reference_rows: IntArray,
    as_of: object,
    warnings: RankWarnings,
) -> Timing | None:
    """Each scored row's time, age and recency (None when neither recency nor
    supersession is set); ``paths`` and ``document_keys`` by lower-case source id."""
    if recency is None and not supersede:
        return None
    n = len(rows)
    readers = _readers(paths, source_ids, warnings, "time")
    periods, why = read_times(rows, [readers[j] for j in source_index.tolist()])
    for reason, count in sorted(why.items()):
        warnings.add("rank_time_unreadable", count=count, reason=reason, action="not aged")
    lo = np.array([p[0] if p is not None else np.nan for p in periods], dtype=np.float64)
    hi = np.array([p[1] if p is not None else np.nan for p in periods], dtype=np.float64)
    shown = [p[2] if p is not None else None for p in periods]
    middle = (lo + hi) / 2.0
    reference, origin, ahead = _reference(middle, recency, as_of, warnings)
    newest = [i for i in np.flatnonzero(middle == reference).tolist()][:1]
    age = np.maximum(reference - middle, 0.0) if reference is not None else np.full(n, np.nan)
    freshness = np.ones(n, dtype=np.float64)
    adjust = None
    if recency is not None and reference is not None:
        for j, sid in enumerate(source_ids):
            decay = recency.for_source(sid)
            at = np.flatnonzero((source_index == j) & ~np.isnan(age))
            if decay is None or not len(at):
                continue
            if decay.kind == "half_life":
                freshness[at] = 0.5 ** (age[at] / decay.seconds)
            else:
                freshness[at] = np.maximum(0.0, 1.0 - age[at] / decay.seconds)
        spread = relevance_spread(relevance[reference_rows], doc[reference_rows])
        lost = RECENCY_SHARE * spread * (1.0 - freshness)
        adjust = np.where(relevance > 0, 0.0 - lost, 0.0) + 0.0  # (no -0.0)
    keys = (
        _revision_keys(rows, source_ids, source_index, document_keys, dedup_key, warnings)
        if supersede
        else None
    )
    _REPORT.set(
        {
            # the time as it was given (a date stays a date), else the instant held back to
            "reference": _given(as_of)
            if origin == "as_of"
            else shown[newest[0]]
            if newest
            else _shown(reference),
            "from": origin,
            "recency": str(recency) if recency is not None else None,
            "dated": int(np.count_nonzero(~np.isnan(lo))),
            "undated": int(np.count_nonzero(np.isnan(lo))),
            "ahead": ahead,
            "superseded": 0,
        }
    )
    return Timing(lo, hi, shown, age, freshness, adjust, keys)


def _reference(
    middle: FloatArray, recency: Recency | None, as_of: object, warnings: RankWarnings
) -> tuple[float | None, str, int]:
    """(the reference time, where it came from, how many rows stand past it)."""
    if as_of is not None:
        found = period_of(as_of)
        if isinstance(found, str):
            warnings.add(
                "rank_as_of_invalid",
                value=str(as_of)[:64],
                reason=found,
                action="the newest row's time used",
            )
        else:
            ahead = int(np.count_nonzero(middle > found[1]))
            if ahead:
                warnings.add("rank_time_ahead", count=ahead, reference="as_of", action="aged 0")
            return found[1], "as_of", ahead
    dated = np.sort(middle[~np.isnan(middle)])
    if not len(dated):
        return None, "none", 0
    reference = float(dated[-1])
    limit = recency.reach if recency is not None else 0.0
    if len(dated) >= 2 and limit > 0 and reference - dated[-2] > limit:
        reference = float(dated[-2]) + limit  # one far-future row does not age the rest
        ahead = int(np.count_nonzero(dated > reference))
        warnings.add(
            "rank_time_ahead",
            count=ahead,
            reference="newest row",
            reason="further past every other row's time than the decay reaches",
            action="aged 0, the reference held back",
        )
        return reference, "newest_row", ahead
    return reference, "newest_row", 0


def _readers(
    paths: Mapping[str, str], source_ids: Sequence[str], warnings: RankWarnings, what: str
) -> list[Callable[[dict[str, Any]], Any] | None]:
    out: list[Callable[[dict[str, Any]], Any] | None] = []
    for sid in source_ids:
        path = paths.get(sid.lower()) if isinstance(sid, str) else None
        read = getter(path) if path else None
        if isinstance(read, str):
            warnings.add(
                f"rank_{what}_path_invalid",
                source_id=sid,
                path=path,
                reason=read,
                action="unmapped",
            )
            read = None
        out.append(read)
    return out


def _revision_keys(
    rows: list[dict[str, Any]],
    source_ids: Sequence[str],
    source_index: IntArray,
    document_keys: Mapping[str, str],
    dedup_key: str | None,
    warnings: RankWarnings,
) -> list[str | None]:
    """Each row's document: its source's document key, else the de-duplication key,
    else ``id`` (as canonical JSON; None: no such value)."""
    fallback = getter(dedup_key or "id")
    readers = [r or fallback for r in _readers(document_keys, source_ids, warnings, "document_key")]
    keys: list[str | None] = []
    for row, j in zip(rows, source_index.tolist(), strict=True):
        read = readers[j]
        value = read(row) if not isinstance(read, str) else None
        if value is None or value == "" or (isinstance(value, float) and value != value):
            keys.append(None)
            continue
        try:
            keys.append(canonical_json(value))
        except NoCanonicalFormError:
            keys.append(None)
    return keys


def supersede(
    order: IntArray, timing: Timing, mark: Callable[[int, int], None], drop: Callable[[int], None]
) -> IntArray:
    """``order`` (the kept rows, best first) with each document's older revisions gone
    and its newest in the place of its best-ranked one. ``mark(newest, older)`` records
    an older revision into the newest's provenance; ``drop(row)`` forgets a row that
    left (``also_from`` and its copies go with the newest)."""
    keys = timing.keys
    if keys is None:
        return order
    groups: dict[str, list[int]] = {}
    for place, i in enumerate(order.tolist()):
        key = keys[i]
        if key is not None:
            groups.setdefault(key, []).append(place)
    placed = order.copy()
    gone = np.zeros(len(order), dtype=bool)
    superseded = 0
    for places in groups.values():
        if len(places) < 2:
            continue
        members = [int(order[p]) for p in places]
        dated = [
            (p, i) for p, i in zip(places, members, strict=True) if timing.lo[i] == timing.lo[i]
        ]
        if len(dated) < 2:
            continue
        # the newest: the latest middle; a tie goes to the better-ranked
        _, newest = max(dated, key=lambda pi: ((timing.lo[pi[1]] + timing.hi[pi[1]]) / 2, -pi[0]))
        older = [(p, i) for p, i in dated if i != newest and timing.hi[i] < timing.lo[newest]]
        if not older:
            continue
        own = places[members.index(newest)]
        first = min([own, *(p for p, _ in older)])
        for p, i in older:
            mark(newest, i)
            gone[p] = True
            drop(i)
        gone[own] = own != first
        gone[first] = False
        placed[first] = newest
        superseded += len(older)
    if superseded:
        report = _REPORT.get()
        if report is not None:
            report["superseded"] = superseded
    out: IntArray = placed[~gone]
    return out


def _given(as_of: object) -> str | None:
    found = period_of(as_of)
    return found[2] if not isinstance(found, str) else None


def _shown(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    found = period_of(seconds)
    return found[2] if not isinstance(found, str) else None


def as_of_problem(raw: object) -> str | None:
    """Why ``raw`` is not a time a request may rank as of (None: it is)."""
    found = period_of(raw)
    return found if isinstance(found, str) else None


def taken() -> dict[str, Any] | None:
    """What time did in this request's ranking (None: neither recency nor supersession
    set), forgotten once read."""
    report = _REPORT.get()
    if report is not None:
        _REPORT.set(None)
    return report
