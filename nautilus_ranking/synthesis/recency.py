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

**Supersession** (which rows are revisions of one document, and which is in force)
is ``supersession.py``'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from nautilus_ranking.records import AdapterResult
from nautilus_ranking.settings.time_entries import Recency
from nautilus_ranking.synthesis import supersession
from nautilus_ranking.synthesis.batch import RankBatch
from nautilus_ranking.synthesis.rank_warnings import RankWarnings
from nautilus_ranking.synthesis.ranking_boost import relevance_spread
from nautilus_ranking.synthesis.row_times import (
    period_of,
    read_times,
    source_paths,
    source_readers,
)
from nautilus_ranking.text.arrays import FloatArray, IntArray

#: The share of the batch's relevance spread a row loses when fully aged (freshness 0):
#: three quarters of a ``low`` boost's bump. The largest share tried at which new
#: irrelevant rows gained under one point of the top 10 in every cell, with both
#: embedders, on dated copies of the shared collections where time does not matter
#: (docs/tuning-time.md): 0.2 let in +1.15 and +1.43 on two onnx cells, 0.5 +2.7 pooled.
RECENCY_SHARE = 0.15
DAY = 86_400.0
#: Without a decay (supersession alone) how far the newest row time may stand past every
#: other's before it is held back as a far-future mistake: ten years (a 2199 typo, a
#: 2052 for 2025), far past any gap between an archive and its current revision.
SUPERSEDE_REACH = 10 * 365 * DAY

BoolArray = npt.NDArray[np.bool_]


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
    source: IntArray
    revises: BoolArray
    lead: BoolArray
    after: BoolArray
    report: dict[str, Any]  # what time did in this ranking (the answer's ``time``)

    def shown(self, i: int) -> str | None:
        """Row ``i``'s time as the answer writes it (a date stays a date; an instant in
        UTC), or None when it has none: made only for the rows an answer shows."""
        return _given(self.values[i]) if self.lo[i] == self.lo[i] else None

    def row_time(self, i: int) -> dict[str, Any]:
        """Row ``i``'s time as ``--explain`` shows it."""
        age = float(self.age[i])
        out = {
            "time": self.shown(i),
            "age_days": round(age / DAY, 3) if age == age else None,
            "freshness": float(self.freshness[i]),
            "recency": float(self.adjust[i]) if self.adjust is not None else 0.0,
        }
        if self.after[i]:
            out["after_as_of"] = True
        return out


class TimeSettings(Protocol):
    """What time reads of a ranker: a RankingSynthesizer's settings."""

    recency: Recency | None
    supersede: bool
    time_fields: dict[str, str]  # by lower-case source id
    document_keys: dict[str, str]
    may_revise: dict[str, frozenset[str]]  # by lower-case source id


def time_stage(
    settings: TimeSettings, results: list[AdapterResult], b: RankBatch, warnings: RankWarnings
) -> Timing | None:
    """The recency and supersession stage over the batch's scored rows (:func:`timing`;
    its ``adjust`` is added to the score after the confidence, which reads none)."""
    return timing(
        settings,
        results,
        b.sub.rows,
        b.cands.source_ids,
        b.sub.source_index,
        b.relevance,
        b.sub_doc,
        b.where_ref,
        b.ctx.get("as_of"),
        warnings,
    )


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
    paths = source_paths(results, settings.time_fields, "time_field")
    document_keys = source_paths(results, settings.document_keys, "document_key")
    n = len(rows)
    readers = source_readers(paths, source_ids, warnings, "time")
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
    lead, after = _in_force(lo, hi, middle, reference, origin)
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
            freshness[at[after[at]]] = 0.0  # dated after as_of: not yet in force, fully aged
        spread = relevance_spread(relevance[reference_rows], doc[reference_rows])
        lost = RECENCY_SHARE * spread * (1.0 - freshness)
        adjust = np.where(relevance > 0, 0.0 - lost, 0.0) + 0.0  # (no -0.0)
    keys, revises = None, np.eye(len(source_ids), dtype=bool)
    if supersede:
        keys, mapped = supersession.revision_keys(
            rows, source_ids, source_index, document_keys, warnings
        )
        revises = supersession.revises(source_ids, mapped, settings.may_revise)
    report: dict[str, Any] = {
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
    if origin == "as_of":
        report["later_revisions"] = 0
        report["after_as_of"] = int(np.count_nonzero(after))
    return Timing(
        lo, hi, values, age, freshness, adjust, keys, source_index, revises, lead, after, report
    )


def _in_force(
    lo: FloatArray, hi: FloatArray, middle: FloatArray, reference: float | None, origin: str
) -> tuple[BoolArray, BoolArray]:
    """(which rows may take a revision's place, which are dated after ``as_of``). With
    ``as_of``: a row whose period ends by it may (the revision in force that day), one
    that begins after it is after it. Without: a dated row not past the reference (a
    far-future time held back never takes another's place)."""
    if reference is None:
        none = np.zeros(len(lo), dtype=bool)
        return none, none.copy()
    if origin == "as_of":
        return hi <= reference, lo > reference
    return middle <= reference, np.zeros(len(lo), dtype=bool)


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
                warnings.add(
                    "rank_time_ahead",
                    count=ahead,
                    reference="as_of",
                    action="fully aged, never in a revision's place",
                )
            return found[1], "as_of", ahead
    dated = np.sort(middle[~np.isnan(middle)])
    if not len(dated):
        return None, "none", 0
    reference = float(dated[-1])
    limit = recency.reach if recency is not None else SUPERSEDE_REACH
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


def _given(value: object) -> str | None:
    """A time as an answer writes it (a date stays a date), None when it is none."""
    found = period_of(value)
    return found[2] if not isinstance(found, str) else None


def as_of_problem(raw: object) -> str | None:
    """Why ``raw`` is not a time a request may rank as of (None: it is)."""
    found = period_of(raw)
    return found if isinstance(found, str) else None
