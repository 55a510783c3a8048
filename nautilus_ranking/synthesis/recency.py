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
answer tomorrow. Far-future rows cannot age every other, however many they are:
without ``as_of``, when the newer half of the dated rows has a gap wider than the
decay's reach (``Recency.reach``: a window, or eight half-lives) — past it every older
row would be fully aged whether the newer times are real or a mistake — the reference
is held back to the reach past the time below the lowest such gap, and a row past the
reference is as new as it (age 0), counted as ``ahead``. The rows held back are never
more than half: the dated rows' majority always sets the reference.

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

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from nautilus_ranking.records import AdapterResult
from nautilus_ranking.request_note import RequestNote
from nautilus_ranking.response_hash import NoCanonicalFormError, canonical_json
from nautilus_ranking.settings.time_entries import Recency
from nautilus_ranking.synthesis.rank_warnings import RankWarnings
from nautilus_ranking.synthesis.ranking_boost import relevance_spread
from nautilus_ranking.synthesis.row_times import (
    Reader,
    getter,
    period_of,
    read_by_source,
    read_times,
)
from nautilus_ranking.text.arrays import FloatArray, IntArray

#: The share of the batch's relevance spread a row loses when fully aged (freshness 0):
#: three quarters of a ``low`` boost's bump. The largest share tried at which new
#: irrelevant rows gained under one point of the top 10 in every cell, with both
#: embedders, on dated copies of the shared collections where time does not matter
#: (docs/tuning-time.md): 0.2 let in +1.15 and +1.43 on two onnx cells, 0.5 +2.7 pooled.
RECENCY_SHARE = 0.15
DAY = 86_400.0

_REPORT: RequestNote[dict[str, Any]] = RequestNote("nautilus_time_report")


@dataclass
class Timing:
    """The time of each scored row and what it did. ``lo``/``hi``: the period (NaN:
    undated); ``age`` in seconds (NaN: undated or no reference); ``freshness`` (1: new
    or not aged); ``adjust``: what recency adds to each score (None: no decay set);
    ``keys``: each row's revision key (None: no supersession)."""

    lo: FloatArray
    hi: FloatArray
    values: list[Any]  # each row's time as read (what ``shown`` writes out)
    age: FloatArray
    freshness: FloatArray
    adjust: FloatArray | None
    keys: list[str | None] | None

    def shown(self, i: int) -> str | None:
        """Row ``i``'s time as the answer writes it (a date stays a date; an instant in
        UTC), or None when it has none: made only for the rows an answer shows."""
        return _given(self.values[i]) if self.lo[i] == self.lo[i] else None

    def row_time(self, i: int) -> dict[str, Any]:
        """Row ``i``'s time as ``--explain`` shows it."""
        age = float(self.age[i])
        return {
            "time": self.shown(i),
            "age_days": round(age / DAY, 3) if age == age else None,
            "freshness": float(self.freshness[i]),
            "recency": float(self.adjust[i]) if self.adjust is not None else 0.0,
        }


class TimeSettings(Protocol):
    """What time reads of a ranker: a RankingSynthesizer's settings."""

    recency: Recency | None
    supersede: bool
    time_fields: dict[str, str]  # by lower-case source id
    document_keys: dict[str, str]
    dedup_key: str | None


def timing(
    settings: TimeSettings,
    results: list[AdapterResult],
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
    supersession is set). Where a source's rows keep their time and document: the
    settings' entry, else the source's own (its result's ``time_field``,
    ``document_key``)."""
    recency, supersede = settings.recency, settings.supersede
    if recency is None and not supersede:
        return None
    paths = _paths(results, settings.time_fields, "time_field")
    document_keys = _paths(results, settings.document_keys, "document_key")
    dedup_key = settings.dedup_key
    n = len(rows)
    readers = _readers(paths, source_ids, warnings, "time")
    lo, hi, values, why = read_times(rows, source_index, readers)
    for (j, reason), count in sorted(why.items()):
        sid = source_ids[j]
        warnings.add(
            "rank_time_unreadable",
            source_id=sid,
            field=paths.get(sid.lower()),
            count=count,
            reason=reason,
            action="not aged",
        )
    middle = (lo + hi) / 2.0
    reference, origin, ahead = _reference(middle, recency, as_of, warnings)
    newest = np.flatnonzero(middle == reference)[:1].tolist()
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
    _REPORT.keep(
        {
            # the time as it was given (a date stays a date), else the instant held back to
            "reference": _given(as_of)
            if origin == "as_of"
            else _given(values[newest[0]])
            if newest
            else _given(reference),
            "from": origin,
            "recency": str(recency) if recency is not None else None,
            "dated": int(np.count_nonzero(~np.isnan(lo))),
            "undated": int(np.count_nonzero(np.isnan(lo))),
            "ahead": ahead,
            "superseded": 0,
        }
    )
    return Timing(lo, hi, values, age, freshness, adjust, keys)


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
    median = (len(dated) - 1) // 2  # a gap above it leaves at most half the rows past it
    gaps = np.flatnonzero(np.diff(dated[median:]) > limit) if limit > 0 else np.zeros(0, int)
    if len(gaps):
        reference = float(dated[median + gaps[0]]) + limit  # far-future rows age no other
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


def _paths(
    results: list[AdapterResult], settings: Mapping[str, str], option: str
) -> dict[str, str]:
    """By lower-case source id, the path a source's rows hold ``option`` under: the
    setting's entry, else what the source itself says (its sources-file option)."""
    paths = {
        r.source_id.lower(): path
        for r in results
        if isinstance(r.source_id, str) and isinstance(path := getattr(r, option, None), str)
    }
    return {**paths, **settings}


def _readers(
    paths: Mapping[str, str], source_ids: Sequence[str], warnings: RankWarnings, what: str
) -> list[Reader | None]:
    """Each source's reader of its ``paths`` entry (None: unmapped, or a path that is
    not one, warned about)."""
    out: list[Reader | None] = []
    for sid in source_ids:
        path = paths.get(sid.lower()) if isinstance(sid, str) else None
        read = getter(path) if path else None
        if isinstance(read, str):
            warnings.add(
                f"rank_{what}_path_invalid",
                source_id=sid,
                field=path,
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
    default = None if isinstance(fallback, str) else fallback
    readers = [r or default for r in _readers(document_keys, source_ids, warnings, "document_key")]
    values, _ = read_by_source(rows, source_index, readers)
    if set(map(type, values)) == {str} and "" not in values:  # ids, as most rows have
        return values
    return list(map(_revision_key, values))


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
    order: IntArray, timing: Timing, mark: Callable[[int, int], None], drop: Callable[[int], None]
) -> IntArray:
    """``order`` (the kept rows, best first) with each document's older revisions gone
    and its newest in the place of its best-ranked one. ``mark(newest, older)`` records
    an older revision into the newest's provenance; ``drop(row)`` forgets a row that
    left (``also_from`` and its copies go with the newest)."""
    keys = timing.keys
    if keys is None:
        return order
    shared = {k for k, count in Counter(keys).items() if count > 1 and k is not None}
    if not shared:
        return order
    in_group = np.fromiter(map(shared.__contains__, keys), dtype=bool, count=len(keys))
    places = np.flatnonzero(in_group[order])  # the places of the rows of a group
    rows = order[places]
    dated = ~np.isnan(timing.lo[rows])
    places, rows = places[dated], rows[dated]
    if len(rows) < 2:
        return order
    code_of: dict[str | None, int] = {}
    group = np.array([code_of.setdefault(keys[i], len(code_of)) for i in rows.tolist()])
    middle = (timing.lo[rows] + timing.hi[rows]) / 2.0
    # each group's newest: the latest middle, a tie to the better-ranked (the first place)
    by_group = np.lexsort((places, -middle, group))
    starts = np.flatnonzero(np.r_[True, group[by_group][1:] != group[by_group][:-1]])
    newest_at = np.full(len(code_of), -1)
    newest_at[group[by_group[starts]]] = by_group[starts]
    newest = newest_at[group]  # per entry: the position (in these arrays) of its newest
    # an older revision: its period ends before the newest's begins (certainly older)
    older = (newest != np.arange(len(rows))) & (timing.hi[rows] < timing.lo[rows[newest]])
    if not older.any():
        return order
    placed = order.copy()
    gone = np.zeros(len(order), dtype=bool)
    first = places[newest].copy()  # where each group's newest goes: its best place
    np.minimum.at(first, newest[older], places[older])
    for at in np.flatnonzero(older).tolist():
        mark(int(rows[newest[at]]), int(rows[at]))
        drop(int(rows[at]))
    gone[places[older]] = True
    winners = np.unique(newest[older])
    gone[places[winners]] = True  # the newest leaves its own place for the group's best
    gone[first[winners]] = False
    placed[first[winners]] = rows[winners]
    superseded = int(older.sum())
    if superseded:
        report = _REPORT.peek()
        if report is not None:
            report["superseded"] = superseded
    out: IntArray = placed[~gone]
    return out


def _given(value: object) -> str | None:
    """A time as an answer writes it (a date stays a date), None when it is none."""
    found = period_of(value)
    return found[2] if not isinstance(found, str) else None


def as_of_problem(raw: object) -> str | None:
    """Why ``raw`` is not a time a request may rank as of (None: it is)."""
    found = period_of(raw)
    return found if isinstance(found, str) else None


def taken() -> dict[str, Any] | None:
    """What time did in this request's ranking (None: neither recency nor supersession
    set), forgotten once read."""
    return _REPORT.taken()
