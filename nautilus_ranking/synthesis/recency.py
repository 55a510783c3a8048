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

**Supersession** (``NAUTILUS_RANKING_SUPERSEDE``): which rows are revisions of one
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
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from nautilus_ranking.records import AdapterResult
from nautilus_ranking.response_hash import NoCanonicalFormError, canonical_json
from nautilus_ranking.row_paths import Reader, getter
from nautilus_ranking.settings.time_entries import Recency
from nautilus_ranking.synthesis.batch import RankBatch
from nautilus_ranking.synthesis.rank_warnings import RankWarnings
from nautilus_ranking.synthesis.ranking_boost import relevance_spread
from nautilus_ranking.synthesis.row_times import period_of, read_by_source, read_times
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
    paths = _paths(results, settings.time_fields, "time_field")
    document_keys = _paths(results, settings.document_keys, "document_key")
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
        keys, mapped = _revision_keys(rows, source_ids, source_index, document_keys, warnings)
        revises = _revises(source_ids, mapped, settings.may_revise)
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
    warnings: RankWarnings,
) -> tuple[list[str | None], list[bool]]:
    """Each row's revision key (None: no value), and whether each source maps a document
    key. A mapped source's rows are keyed by that value alone, so they may meet another
    mapped source's (``_revises`` says whether they may revise each other); an unmapped
    source's by its own place and the row's ``id``: revisions within that source only."""
    mapped = _readers(document_keys, source_ids, warnings, "document_key")
    by_id = getter("id")
    readers = [r or (by_id if not isinstance(by_id, str) else None) for r in mapped]
    values, _ = read_by_source(rows, source_index, readers)
    prefixes = ["d" if r is not None else f"{j}:" for j, r in enumerate(mapped)]
    keys: list[str | None] = []
    for value, j in zip(values, source_index.tolist(), strict=True):
        key = _revision_key(value)
        keys.append(prefixes[j] + key if key is not None else None)
    return keys, [r is not None for r in mapped]


def _revises(
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


def _given(value: object) -> str | None:
    """A time as an answer writes it (a date stays a date), None when it is none."""
    found = period_of(value)
    return found[2] if not isinstance(found, str) else None


def as_of_problem(raw: object) -> str | None:
    """Why ``raw`` is not a time a request may rank as of (None: it is)."""
    found = period_of(raw)
    return found if isinstance(found, str) else None
