"""Selection: the best rows by score, copies collapsed into their best copy, as RankedRows.

Order is (score desc, routing index, source rank): deterministic, ties broken by
where a row came from. Then, each only when set (:class:`Spread`): near copies
collapse into the first kept row above them (``near_duplicates.py``), the whole
ranking is re-ordered for novelty (MMR, ``diversity.py``) and each source is held to
its cap in every page; the top K is cut last.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from itertools import starmap
from typing import Any

import numpy as np

from nautilus_ranking.fanout.abandon import checkpoint
from nautilus_ranking.records import SCORE_COMPONENTS, Copy, RankedRow
from nautilus_ranking.synthesis import collapse, diversity, fusion, near_duplicates, recency
from nautilus_ranking.synthesis.batch import RankBatch, RankSettings
from nautilus_ranking.synthesis.candidates import Candidates, has_text_id, resemblance_texts
from nautilus_ranking.synthesis.passages import field_span
from nautilus_ranking.text.arrays import FloatArray, IntArray
from nautilus_ranking.text.tokens import TokenBatch
from nautilus_ranking.tracing.facts import copies_stage, fusion_stage
from nautilus_ranking.tracing.spans import stages


@dataclass
class Scores:
    """Each candidate's score and its components (fusion.py), parallel arrays named as the
    :class:`RankedRow` fields they become (``doc``, the document number, is not one)."""

    score: FloatArray
    similarity: FloatArray
    idf_factor: FloatArray
    content_rank: IntArray
    content: FloatArray
    content_weight: FloatArray
    evidence: FloatArray
    voters: IntArray
    source_weight: FloatArray
    unranked_vote: FloatArray
    relevance: FloatArray
    boost_bump: FloatArray
    stage1_key: FloatArray
    doc: IntArray
    unboosted_rank: IntArray

    def take(self, keep: IntArray) -> Scores:
        return Scores(**{name: values[keep] for name, values in vars(self).items()})


#: The RankedRow fields after ``(source_id, row, score, rank, source_rank, also_from)``, in
#: order: every score component, which Scores holds under the same name.
_COMPONENTS = tuple(name for name, _ in SCORE_COMPONENTS)


@dataclass(frozen=True)
class Spread:
    """What of a ranking is spread out after the fusion, each None when off:
    ``near_duplicates`` (a resemblance threshold in (0, 1]), ``diversity`` (an MMR
    weight in (0, 1]), ``max_per_source`` (rows of one source in each ``page`` rows; a
    page is the top K, None: the whole list); ``texts`` gives the row texts of the
    candidates at the positions it is handed (what the resemblance reads), ``batch``
    the tokens of every candidate's text when the pass built them (reused)."""

    near_duplicates: float | None
    diversity: float | None
    max_per_source: int | None
    page: int | None
    texts: Callable[[list[int]], list[str]]
    batch: TokenBatch | None = None

    @property
    def on(self) -> bool:
        return (
            self.near_duplicates is not None
            or self.diversity is not None
            or self.max_per_source is not None
        )


def select_batch(
    ranker: RankSettings, b: RankBatch, timing: recency.Timing | None
) -> list[RankedRow]:
    """The stage of near copies, diversity and the per-source cap, then the top K: the
    batch's scores (plus recency's adjustment) handed to :func:`select`."""
    score = b.relevance + b.bump
    if timing is not None and timing.adjust is not None:  # after the confidence: it reads none
        score = score + timing.adjust
    scores = Scores(
        score=score,
        similarity=b.similarity,
        idf_factor=b.factors,
        content_rank=b.content_rank,
        content=b.content,
        content_weight=np.full(b.n, b.weight),
        evidence=b.evidence,
        voters=b.voters,
        source_weight=b.source_weight[b.sub.source_index],
        unranked_vote=b.unranked,
        relevance=b.relevance,
        boost_bump=b.bump,
        stage1_key=b.keys[b.scored],
        doc=b.sub_doc,
        unboosted_rank=b.unboosted,
    )
    # Every row scored stays a candidate: the rows the cap keeps without boosts (the
    # reference) too, so a boost can let rows in but never push a better one out.
    # At most max_candidates rows leave, best first, as without the reference.
    limit = ranker.top_k
    if len(b.kept) < len(b.cands.rows):
        limit = len(b.kept) if limit is None else min(limit, len(b.kept))
    spread = _spread_of(ranker, b)
    if (recording := stages()) is not None:
        fusion_stage(
            recording, b.n, b.cands.source_ids, ranker.source_boosts, int(np.count_nonzero(b.bump))
        )
    checkpoint("fusion")
    ranked = select(b.sub, scores, limit, spread, ranker.canonical_sources, timing)
    return with_passages(ranked, b) if b.passages is not None else ranked


def with_passages(ranked: list[RankedRow], b: RankBatch) -> list[RankedRow]:
    """The ranked rows, each long row saying which of its passages scored."""
    passages = b.passages
    if passages is None or b.texts is None:
        return ranked
    by_row: dict[int, dict[str, Any]] = {}
    for k, i in enumerate(passages.rows.tolist()):
        start, end = passages.spans[int(passages.best[k])]
        by_row[id(b.sub.rows[i])] = field_span(b.sub.rows[i], start, end)
    return [replace(r, passage=by_row[id(r.row)]) if id(r.row) in by_row else r for r in ranked]


def _spread_of(ranker: RankSettings, b: RankBatch) -> Spread | None:
    """What of the ranking is spread out (None: near copies, diversity and the
    per-source cap all off)."""
    if (
        ranker.near_duplicates is None
        and ranker.diversity is None
        and ranker.max_per_source is None
    ):
        return None
    # The texts compared leave each row's id out: the scoring's texts and tokens hold
    # a string id, so they are reused only when no row has one.
    sub, n, texts, batch = b.sub, b.n, b.texts, b.tokens
    reusable = not has_text_id(sub.rows)
    built = texts if reusable and texts is not None and len(texts) == n else None

    def texts_of(at: list[int]) -> list[str]:
        if built is not None:
            return [built[i] for i in at]
        return resemblance_texts([sub.rows[i] for i in at])

    return Spread(
        ranker.near_duplicates,
        ranker.diversity,
        ranker.max_per_source,
        ranker.page_size,
        texts_of,
        batch if reusable and batch is not None and batch.n_texts == n else None,
    )


def select(
    cands: Candidates,
    scores: Scores,
    top_k: int | None,
    spread: Spread | None = None,
    canonical: Sequence[str] = (),
    timing: recency.Timing | None = None,
) -> list[RankedRow]:
    """The best ``top_k`` rows (all when None), copies collapsed, spread when asked; a
    document whose copies collapsed is shown by the copy of the first ``canonical``
    source that has one (lower-case ids), in its best copy's place. With ``timing``,
    each row says its time, and older revisions leave for the newest's ``also_from``
    (``supersession.supersede``)."""
    score = scores.score
    at: IntArray | None = None
    shown: dict[int, int] = {}
    revisions: dict[int, list[tuple[int, str, list[Copy]]]] = {}
    took: dict[int, int] = {}
    spreading = spread is not None and spread.on
    superseding = timing is not None and timing.keys is not None
    if (
        not spreading
        and not superseding
        and top_k is not None
        and top_k < len(score)
        and fusion.every_row_its_document(scores.doc)
    ):
        # No copies to collapse: only the rows scoring at least the top_k-th best score
        # (ties included) can be placed; sort those (a partition, not a 10k-row lexsort)
        at = np.flatnonzero(score >= np.partition(score, len(score) - top_k)[-top_k])
    recording = stages()
    available = len(score)  # the rows the top K is cut from
    if at is None or len(at) < (top_k or 0):  # (fewer only if a score were NaN)
        order = np.lexsort((cands.source_rank, cands.source_index, -score))
        order, also_from, members = collapse.collapse_copies(cands, order, scores.doc)
        if recording is not None:
            copies_stage(recording, "copies", len(score), len(order))
        if timing is not None and superseding:
            before = len(order)
            order, took = collapse.supersede_revisions(cands, order, also_from, members, timing)
            revisions = members.revisions
            if recording is not None:
                copies_stage(recording, "revisions", before, len(order))
        if spread is not None and spreading:  # near copies, diversity, the cap
            order = _spread(cands, score, order, also_from, members, spread, top_k, canonical)
            shown = members.shown
        elif canonical and members:
            shown = collapse.canonical_copies(cands, also_from, members, canonical)
        available = len(order)
    else:
        order = at[np.lexsort((cands.source_rank[at], cands.source_index[at], -score[at]))]
        also_from = {}
        if recording is not None:  # every row is its own document: nothing to collapse
            copies_stage(recording, "copies", len(score), len(score))
    if recording is not None:
        recording.add("top_k", available, min(available, top_k or available), k=top_k)
    if top_k is not None:
        order = order[:top_k]
    # Column by column (one ``tolist`` each, the same Python floats as ``float(x)``):
    # ~1.7 µs a row less than reading each row's numbers from numpy one by one.
    places = order.tolist()
    sids = cands.source_ids
    s = scores.take(order)
    columns = [vars(s)[name].tolist() for name in _COMPONENTS]
    shown_scores, own = _place_scores(score, places, s.score.tolist(), took)
    # a document's place and score are its best copy's; the copy shown may be another
    rows = np.array([shown.get(i, i) for i in places], dtype=np.int64) if shown else order
    times = [timing.row_time(i) for i in rows.tolist()] if timing is not None else None
    if times is not None and own:
        for place, i in enumerate(places):
            if i in own:
                times[place]["own_score"] = own[i]
    return list(
        starmap(
            RankedRow,
            zip(
                [sids[j] for j in cands.source_index[rows].tolist()],
                [cands.rows[i] for i in rows.tolist()],
                shown_scores,
                range(1, len(places) + 1),
                cands.source_rank[rows].tolist(),
                [
                    (
                        *also_from.get(i, ()),
                        *collapse.revision_copies(cands, timing, revisions.get(i)),
                    )
                    if revisions and timing is not None
                    else tuple(also_from.get(i, ()))
                    for i in places
                ],
                *columns,
                *([times] if times is not None else []),
                strict=True,
            ),
        )
    )


def _place_scores(
    score: FloatArray, places: list[int], shown: list[float], took: dict[int, int]
) -> tuple[list[float], dict[int, float]]:
    """The scores an answer shows, and ``{row: its own score}`` where another was shown:
    a revision in force shows the score of the place it took when that is higher, so
    the list's scores stay in order."""
    own: dict[int, float] = {}
    for at, i in enumerate(places):
        if i in took and score[took[i]] > shown[at]:
            own[i], shown[at] = shown[at], float(score[took[i]])
    return shown, own


def _spread(
    cands: Candidates,
    score: FloatArray,
    order: IntArray,
    also_from: dict[int, list[Copy]],
    members: collapse.Members,
    spread: Spread,
    top_k: int | None,
    canonical: Sequence[str] = (),
) -> IntArray:
    """The ranking ``order`` (exact copies collapsed) with near copies collapsed (into
    ``also_from`` and ``members``), each document shown by its canonical copy (into
    ``members.shown``), re-ordered for novelty and held to the per-source cap (a
    document counted by the source of the copy shown)."""
    whole = spread.diversity is not None or spread.max_per_source is not None
    # A row's collapse depends only on the rows above it: without a stage that reads the
    # whole ranking, the top K needs only as many rows as it takes to keep K of them.
    length = len(order) if whole or top_k is None else min(len(order), 2 * top_k + 16)
    read_texts = spread.near_duplicates is not None or spread.diversity is not None
    every = (
        near_duplicates.shingles(spread.batch)
        if read_texts and spread.batch is not None and spread.batch.n_texts == len(score)
        else None
    )
    while True:
        head = order[:length]
        if not read_texts:
            break
        found = (
            near_duplicates.subset(every, head, len(score))
            if every is not None
            else near_duplicates.shingles(TokenBatch.from_texts(spread.texts(head.tolist())))
        )
        pairs = near_duplicates.resemblance(found)
        if spread.near_duplicates is None:
            break
        into = near_duplicates.collapse(pairs, length, spread.near_duplicates)
        kept = into < 0
        if length == len(order) or int(kept.sum()) >= (top_k or 0):
            break
        length = min(len(order), 2 * length)
    checkpoint("near_duplicates")
    near = spread.near_duplicates is not None
    if near:
        heads = head.tolist()
        for below in np.flatnonzero(~kept).tolist():
            i = heads[below]
            joined = heads[int(into[below])]
            target = also_from.setdefault(joined, [])
            target.append(collapse.copy_of(cands, i, "near"))
            target.extend(
                c._replace(copy="near") if c.copy == "exact" else c for c in also_from.pop(i, ())
            )
            members.setdefault(joined, []).extend([i, *members.pop(i, ())])
            if i in members.revisions:  # a newest revision's older ones go with it
                members.revisions.setdefault(joined, []).extend(members.revisions.pop(i))
        # what the stages below read: the kept rows and their resemblance
        positions = np.flatnonzero(kept)
        renumber = np.full(length, -1, dtype=np.int64)
        renumber[positions] = np.arange(len(positions))
        both = kept[pairs.a] & kept[pairs.b]
        pairs = near_duplicates.Resemblance(
            renumber[pairs.a[both]], renumber[pairs.b[both]], pairs.value[both]
        )
        head = head[positions]
        if (recording := stages()) is not None:
            copies_stage(recording, "near_duplicates", len(order), len(order) - int((~kept).sum()))
    shown = (
        collapse.canonical_copies(cands, also_from, members, canonical)
        if canonical and members
        else {}
    )
    if spread.diversity is not None:
        # MMR picks only the rows kept (the rest follow in order), unless a cap re-orders
        # what follows them: then every row, so a deeper page never changes a shallower one
        picks = top_k if spread.max_per_source is None else None
        head = head[diversity.mmr_order(score[head], pairs, spread.diversity, picks)]
        if (recording := stages()) is not None:
            recording.add("diversity", len(head), len(head), weight=spread.diversity)
    checkpoint("diversity")
    if spread.max_per_source is not None:
        block = spread.page if spread.page is not None else top_k
        shown_head = [shown.get(i, i) for i in head.tolist()] if shown else head
        head = head[
            diversity.cap_per_source(
                cands.source_index[shown_head].tolist(), spread.max_per_source, block, top_k
            )
        ]
        if (recording := stages()) is not None:
            recording.add(
                "per_source_cap", len(head), len(head), max_per_source=spread.max_per_source
            )
    return np.concatenate((head, order[length:]))
