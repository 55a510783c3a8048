"""Diversity: re-order a ranking for novelty (MMR) and cap each source's share of a page.

:func:`mmr_order` is maximal marginal relevance (Carbonell and Goldstein, 1998) over the
*whole* ranking: each next row is the one with the best ``(1 - w) · relevance − w ·
redundancy``, relevance being the row's score scaled to [0, 1] over the ranking and
redundancy its largest resemblance (:mod:`.near_duplicates`, the same text measure as
the collapse) to a row already placed. Greedy over every row, never a top slice, so
the first m rows of the order are the same however many are asked for: pages cut from
it never overlap or skip. The first row is always the ranking's first.

Each pick is one pass of numpy over the rows (their keys less the redundancy so far),
and only the rows the ranking keeps (the top K, or n·K + 1 for page n) are picked this
way: the greedy's first picks are the same whatever follows them, so the rows past them
follow in ranking order without changing any page.

:func:`cap_per_source` holds each source to ``cap`` rows in every block of ``block``
rows (a page of the top K; the whole list without one): a row over its source's cap
moves down to the next block with room. A page is never left short while rows remain:
when only rows of sources at their cap are left, each source may have one more row
(in ranking order), then one more, until the page is full — so every page is full and
every row keeps a place.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

import numpy as np

from nautilus_ranking.fanout.abandon import checkpoint
from nautilus_ranking.synthesis.near_duplicates import Resemblance
from nautilus_ranking.text.arrays import FloatArray, IntArray

#: Up to this many picks each scans the pairs; more group them by row first.
_SCANNED_PICKS = 32
#: MMR looks whether the caller still waits every this many picks (fanout/abandon.py).
_PICKS_BETWEEN_CHECKS = 256


def mmr_order(
    score: FloatArray, pairs: Resemblance, weight: float, limit: int | None = None
) -> IntArray:
    """The positions ``0 … n-1`` of a ranking (best first, ``score`` its scores) in MMR
    order at ``weight`` (0: the ranking itself). Only the first ``limit`` are chosen by
    MMR — the greedy's first picks never depend on how many follow — and the rest follow
    in ranking order."""
    n = len(score)
    if n == 0 or weight <= 0 or len(pairs.a) == 0:
        return np.arange(n, dtype=np.int64)
    low, high = float(score.min()), float(score.max())
    scaled = (score - low) / (high - low) if high > low else np.ones(n)
    key = (1.0 - weight) * scaled
    penalty = np.zeros(n)
    open_ = np.ones(n, dtype=bool)
    picks = n if limit is None else min(limit, n)
    out = np.empty(n, dtype=np.int64)
    # Each picked row's neighbours (the rows it resembles, both ways): found by a scan of
    # the pairs for a few picks, grouped by row once for many.
    a = np.concatenate((pairs.a, pairs.b))
    b = np.concatenate((pairs.b, pairs.a))
    v = np.concatenate((pairs.value, pairs.value)) * weight
    grouped = picks > _SCANNED_PICKS
    if grouped:
        by_row = np.argsort(a)
        b, v = b[by_row], v[by_row]
        starts = np.searchsorted(a[by_row], np.arange(n + 1))
    first = pairs.first
    for k in range(picks):
        if k % _PICKS_BETWEEN_CHECKS == 0:
            checkpoint("diversity")
        # A later copy's redundancy is its first copy's too (near_duplicates.Resemblance):
        # its own pairs hold only the one with its first copy.
        now = penalty if first is None else np.maximum(penalty, penalty[first])
        # the best key left; np.argmax takes the first of equals: the higher-ranked row
        i = int(np.argmax(np.where(open_, key - now, -np.inf)))
        out[k] = i
        open_[i] = False
        if grouped:
            near, value = b[starts[i] : starts[i + 1]], v[starts[i] : starts[i + 1]]
        else:
            hit = a == i
            near, value = b[hit], v[hit]
        np.maximum.at(penalty, near, value)
    out[picks:] = np.flatnonzero(open_)
    return out


def cap_per_source(
    sources: Sequence[int], cap: int, block: int | None, limit: int | None = None
) -> IntArray:
    """The positions ``0 … n-1`` of a ranking (``sources[i]``: the source of its ``i``-th
    row) re-ordered so that each block of ``block`` rows (None: one block of them all)
    holds at most ``cap`` rows of one source while rows of other sources remain; only the
    first ``limit`` positions are placed with care (the rest follow in order).

    A block takes its rows by (round, position): each source's first ``cap`` rows left
    are round 0, its next one round 1, the next round 2 … — the page-filling rule, one
    more row of each source per round. Each source's rows left are a queue in ranking
    order, and a heap holds each queue's next row: a push and a pop or two a row placed,
    O(n log n) whatever the blocks and the sources (one pass over the pending rows per
    round, as before, was quadratic)."""
    n = len(sources)
    size = n if block is None else block
    wanted = n if limit is None else min(limit, n)
    queues: dict[int, list[int]] = {}
    for i, source in enumerate(sources):
        queues.setdefault(source, []).append(i)
    heads = dict.fromkeys(queues, 0)
    # (round, position, source): every source's next row and its round in this block;
    # ``rounds`` holds each source's current one (an entry of another round is stale)
    heap = [(0, queue[0], source) for source, queue in queues.items()]
    heapq.heapify(heap)
    rounds = dict.fromkeys(queues, 0)
    placed = np.zeros(n, dtype=bool)
    out: list[int] = []
    while heap and len(out) < wanted:
        taken: list[int] = []
        counts: dict[int, int] = {}
        while heap and len(taken) < size:
            round_, i, source = heapq.heappop(heap)
            queue = queues[source]
            if heads[source] == len(queue) or i != queue[heads[source]] or round_ != rounds[source]:
                continue  # replaced when its block ended
            taken.append(i)
            count = counts[source] = counts.get(source, 0) + 1
            heads[source] += 1
            if heads[source] < len(queue):
                rounds[source] = max(count - cap + 1, 0)
                heapq.heappush(heap, (rounds[source], queue[heads[source]], source))
        taken.sort()
        out.extend(taken)
        placed[taken] = True
        # A new block: the next row of every source this block took from is round 0
        # again (the others' are round 0 already).
        for source in counts:
            if heads[source] < len(queues[source]) and rounds[source] != 0:
                rounds[source] = 0
                heapq.heappush(heap, (0, queues[source][heads[source]], source))
    return np.concatenate((np.array(out, dtype=np.int64), np.flatnonzero(~placed)))
