"""Near copies: how alike two rows' texts are, and the greedy collapse of a ranking.

The measure is the *resemblance* of two texts: the Jaccard similarity of their sets of
word 3-shingles (Broder, 1997), over the ranker's tokens of each row's text
(:class:`~nautilus_ranking.text.tokens.TokenBatch`: lower-cased words, stop words
dropped, plurals folded — so case, whitespace and punctuation never tell two copies
apart). It is a property of the two texts alone: the same threshold means the same
thing whichever embedder scores the rows, and 1 means the same words in the same
order. A text of fewer than three tokens is one shingle of all of them; a text without
tokens has none and is near nothing. Two texts whose facts conflict — each states a
number, a date or an amount the other does not (``synthesis/facts.py``) — resemble each
other by 0 however many shingles they share: "within 24 hours" and "within 48 hours"
are two obligations, never near copies.

Only pairs that share a shingle can resemble each other, so the pairs are found from
the shingles themselves — sorted, grouped, and each group's members paired in numpy
— never by comparing every row with every other. Texts with the same set of shingles
(copies: a mirror returning one document many times) are paired once: each later copy
has one pair, with its first copy (resemblance 1), and otherwise resembles every text
as its first copy does (:attr:`Resemblance.first`), so ten thousand copies cost ten
thousand pairs, not fifty million. A shingle shared by more than
:data:`COMMON_SHINGLE` *distinct* texts (a template's boilerplate) is left out of the
pairing and still counted in each text's set: it makes texts *less* alike, never more;
copies count once, so more copies of a text never mean less collapsing.

The collapse (:func:`collapse`) walks a ranking best first: a row that is near a row
kept above it (resemblance at least the threshold) joins the first such row and is
left out; every other row is kept. A row's fate depends only on the rows above it, so
a longer ranking never changes a shorter one's rows (pages stay stable).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nautilus_ranking.settings.parsing import NEAR_DUPLICATES_ON
from nautilus_ranking.synthesis.facts import Facts, conflicting, facts
from nautilus_ranking.text.arrays import FloatArray, IntArray
from nautilus_ranking.text.tokens import TokenBatch

__all__ = [
    "COMMON_SHINGLE",
    "NEAR_DUPLICATES_ON",
    "SHINGLE",
    "Resemblance",
    "collapse",
    "resemblance",
    "shingles",
]

#: Words a shingle spans.
SHINGLE = 3
#: A shingle in more rows than this is boilerplate: counted, never paired on.
COMMON_SHINGLE = 64
#: Up to this many possible pairs (n²) the shared shingles are counted in an array.
_DENSE_PAIRS = 1 << 22


@dataclass(frozen=True)
class Shingles:
    """Each text's distinct shingles as flat arrays: ``keys[i]`` belongs to text
    ``rows[i]`` (sorted by text, then key); ``sizes[t]``: how many text ``t`` has;
    ``facts``: the texts' facts (None: not read, no pair conflicts)."""

    rows: IntArray
    keys: IntArray
    sizes: IntArray
    facts: Facts | None = None


def shingles(batch: TokenBatch) -> Shingles:
    """The distinct word shingles of every text of ``batch``, in numpy."""
    n = batch.n_texts
    rows, terms = batch.rows, batch.terms
    stated = facts(batch)
    base = len(batch.vocab) + 1  # one more than any term: the pad of a short text
    if base**SHINGLE >= 2**62:  # never in practice: a batch with two million words
        return _hashed_shingles(batch, stated)
    lengths = np.bincount(rows, minlength=n)
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    key_parts, row_parts = [], []
    if len(terms) >= SHINGLE:
        same = rows[: -SHINGLE + 1] == rows[SHINGLE - 1 :]
        at = np.flatnonzero(same)
        key = terms[at].copy()
        for k in range(1, SHINGLE):
            key = key * base + terms[at + k]
        key_parts.append(key)
        row_parts.append(rows[at])
    short = np.flatnonzero((lengths > 0) & (lengths < SHINGLE))
    if len(short):  # one shingle of all its tokens, padded
        key = np.zeros(len(short), dtype=np.int64)
        for k in range(SHINGLE):
            has = lengths[short] > k
            term = np.where(has, terms[np.minimum(starts[short] + k, len(terms) - 1)], base - 1)
            key = key * base + term
        key_parts.append(key)
        row_parts.append(short)
    return _distinct(
        np.concatenate(row_parts) if row_parts else np.zeros(0, dtype=np.int64),
        np.concatenate(key_parts) if key_parts else np.zeros(0, dtype=np.int64),
        n,
        stated,
    )


def subset(found: Shingles, at: IntArray, n: int) -> Shingles:
    """The shingles of texts ``at`` (of the ``n`` texts ``found`` covers), renumbered
    ``0 … len(at)-1`` in that order."""
    where = np.full(n, -1, dtype=np.int64)
    where[at] = np.arange(len(at))
    rows = where[found.rows]
    keep = rows >= 0
    rows = rows[keep]
    return Shingles(
        rows,
        found.keys[keep],
        np.bincount(rows, minlength=len(at)).astype(np.int64),
        None if found.facts is None else found.facts.subset(at, n),
    )


def _hashed_shingles(batch: TokenBatch, stated: Facts) -> Shingles:
    """:func:`shingles` with 64-bit mixed keys (for a vocabulary too large to pack)."""
    rows, terms = batch.rows, batch.terms.astype(np.uint64)
    n = batch.n_texts
    mix = np.uint64(0x9E3779B97F4A7C15)
    same = rows[: -SHINGLE + 1] == rows[SHINGLE - 1 :] if len(terms) >= SHINGLE else None
    if same is None:
        return _distinct(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), n, stated)
    at = np.flatnonzero(same)
    key = terms[at].copy()
    with np.errstate(over="ignore"):
        for k in range(1, SHINGLE):
            key = (key * mix) ^ terms[at + k]
    return _distinct(rows[at], key.view(np.int64), n, stated)


def _distinct(rows: IntArray, keys: IntArray, n: int, stated: Facts | None) -> Shingles:
    order = _sorted_by(rows, keys, n, rows_first=True)
    rows, keys = rows[order], keys[order]
    keep = np.ones(len(rows), dtype=bool)
    keep[1:] = (rows[1:] != rows[:-1]) | (keys[1:] != keys[:-1])
    rows, keys = rows[keep], keys[keep]
    return Shingles(rows, keys, np.bincount(rows, minlength=n).astype(np.int64), stated)


def _sorted_by(rows: IntArray, keys: IntArray, n: int, rows_first: bool) -> IntArray:
    """The order that sorts by (row, key) or (key, row): one sort of a packed key when
    the two fit in 63 bits (packed shingles do), else a lexsort."""
    if len(keys) and keys.min() >= 0 and int(keys.max()) < (1 << 62) // max(n, 1):
        packed = rows * (int(keys.max()) + 1) + keys if rows_first else keys * n + rows
        return np.argsort(packed, kind="stable")
    return np.lexsort((keys, rows)) if rows_first else np.lexsort((rows, keys))


@dataclass(frozen=True)
class Resemblance:
    """The pairs of texts that share a shingle: texts ``a[i] < b[i]`` resemble each
    other by ``value[i]`` (Jaccard of their shingle sets, in (0, 1]).

    ``first[t]``, when given, is the first text with text ``t``'s shingle set (``t``
    itself for every first copy): a later copy's only pair is with its first copy, at 1,
    and it resembles every other text as its first copy does. None: no text is a later
    copy (every pair is listed)."""

    a: IntArray
    b: IntArray
    value: FloatArray
    first: IntArray | None = None

    def expanded(self) -> Resemblance:
        """Every pair listed, copies' included (quadratic in the copies: for a small batch
        or a report, never the ranking)."""
        if self.first is None:
            return self
        first = self.first.tolist()
        copies: dict[int, list[int]] = {}
        for t, f in enumerate(first):
            copies.setdefault(f, []).append(t)
        out: dict[tuple[int, int], float] = {}
        for a, b, v in zip(self.a.tolist(), self.b.tolist(), self.value.tolist(), strict=True):
            if first[b] != b:  # a later copy's pair with its first copy: below
                continue
            for x in copies[a]:
                for y in copies[b]:
                    out[(min(x, y), max(x, y))] = v
        for group in copies.values():
            for i, x in enumerate(group):
                for y in group[i + 1 :]:
                    out[(x, y)] = 1.0
        keys = sorted(out)
        return Resemblance(
            np.array([k[0] for k in keys], dtype=np.int64),
            np.array([k[1] for k in keys], dtype=np.int64),
            np.array([out[k] for k in keys], dtype=np.float64),
        )


def _empty() -> Resemblance:
    return Resemblance(
        np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
    )


def first_copies(found: Shingles) -> IntArray | None:
    """``first[t]``: the first text whose shingle set is text ``t``'s (``t`` for a first
    copy and for a text without shingles); None when no text is a later copy. Grouped by
    size and a 64-bit sum of mixed keys, then checked key for key (a collision keeps the
    text its own first copy)."""
    n = len(found.sizes)
    sizes = found.sizes
    if n < 2 or len(found.keys) == 0:
        return None
    with np.errstate(over="ignore"):
        mixed = found.keys.view(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        mixed ^= mixed >> np.uint64(29)
        starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
        has = sizes > 0
        digest = np.zeros(n, dtype=np.uint64)
        digest[has] = np.add.reduceat(mixed, starts[has])
    order = np.lexsort((np.arange(n), digest, sizes))
    same = np.zeros(n, dtype=bool)
    same[1:] = (
        (sizes[order][1:] == sizes[order][:-1])
        & (digest[order][1:] == digest[order][:-1])
        & (sizes[order][1:] > 0)
    )
    if not same.any():
        return None
    group_start = np.maximum.accumulate(np.where(same, 0, np.arange(n)))
    first = np.empty(n, dtype=np.int64)
    first[order] = order[group_start]
    later = np.flatnonzero(first != np.arange(n))
    # key for key: a later copy's keys against its first copy's
    lengths = sizes[later]
    offsets = _ranges(lengths)
    mine = np.repeat(starts[later], lengths) + offsets
    theirs = np.repeat(starts[first[later]], lengths) + offsets
    differs = found.keys[mine] != found.keys[theirs]
    if differs.any():
        bad = np.unique(np.repeat(np.arange(len(later)), lengths)[differs])
        first[later[bad]] = later[bad]
    if (first == np.arange(n)).all():
        return None
    return first


def resemblance(found: Shingles) -> Resemblance:
    """Every pair of texts sharing a shingle, and how alike the two are; a later copy of
    a text is paired with its first copy only (:class:`Resemblance`)."""
    first = first_copies(found)
    if first is None:
        return _pairs(found)
    n = len(found.sizes)
    firsts = np.flatnonzero(first == np.arange(n))
    among = _pairs(subset(found, firsts, n))
    later = np.flatnonzero(first != np.arange(n))
    return Resemblance(
        np.concatenate((firsts[among.a], first[later])),
        np.concatenate((firsts[among.b], later)),
        np.concatenate((among.value, np.ones(len(later)))),
        first,
    )


def _pairs(found: Shingles) -> Resemblance:
    """Every pair of texts sharing a shingle that at most :data:`COMMON_SHINGLE` texts
    share and whose facts do not conflict, and how alike the two are."""
    rows, keys = found.rows, found.keys
    empty = _empty()
    if len(keys) < 2:
        return empty
    n = len(found.sizes)
    if keys.min() >= 0 and int(keys.max()) < (1 << 62) // max(n, 1):
        packed = np.sort(keys * n + rows)  # by shingle, then text: one sort, no gather
        keys, rows = packed // n, packed % n
    else:
        by_key = np.lexsort((rows, keys))
        keys, rows = keys[by_key], rows[by_key]
    starts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
    sizes = np.diff(np.concatenate((starts, [len(keys)])))
    paired = (sizes >= 2) & (sizes <= COMMON_SHINGLE)
    if not paired.any():
        return empty
    starts, sizes = starts[paired], sizes[paired]
    # Each member pairs with the members after it in its group: member at offset o of a
    # group of g makes g - 1 - o pairs.
    member = np.repeat(starts, sizes) + _ranges(sizes)
    after = np.repeat(sizes, sizes) - 1 - _ranges(sizes)
    left = np.repeat(member, after)
    right = left + 1 + _ranges(after)
    ids = rows[left] * n + rows[right]  # a < b: members are sorted by text in a group
    if n * n <= _DENSE_PAIRS:  # count in place: no sort of the pairs
        counts = np.bincount(ids, minlength=n * n)
        pair = np.flatnonzero(counts)
        shared = counts[pair]
    else:
        pair, shared = np.unique(ids, return_counts=True)
    a, b = pair // n, pair % n
    if found.facts is not None:
        agree = ~conflicting(found.facts, a, b)
        a, b, shared = a[agree], b[agree], shared[agree]
    union = found.sizes[a] + found.sizes[b] - shared
    return Resemblance(a, b, shared / union)


def _ranges(lengths: IntArray) -> IntArray:
    """``0 … k-1`` for each ``k`` of ``lengths``, concatenated."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(lengths)
    return np.arange(total, dtype=np.int64) - np.repeat(ends - lengths, lengths)


def collapse(pairs: Resemblance, n: int, threshold: float) -> IntArray:
    """Greedy collapse of ``n`` texts given best first (text ``i`` is the ranking's
    ``i``-th): ``into[i]`` is the kept text that text ``i`` joins, or ``-1`` when it is
    kept. A text joins the first kept text above it whose resemblance to it is at least
    ``threshold``."""
    into = np.full(n, -1, dtype=np.int64)
    near = pairs.value >= threshold
    if not near.any():
        return into
    a, b = pairs.a[near], pairs.b[near]
    order = np.lexsort((a, b))  # by the lower text, then the higher one above it
    a, b = a[order].tolist(), b[order].tolist()
    # Only texts with a near text above them are walked, in ranking order; a text above
    # is decided before any text below it looks at it.
    joins = into.tolist()
    for above, below in zip(a, b, strict=True):
        if joins[below] == -1 and joins[above] == -1:  # undecided, and above is kept
            joins[below] = above
    into = np.array(joins, dtype=np.int64)
    if pairs.first is not None:
        # A later copy joins its first copy when that is kept, else where it went: the
        # first kept text above it that resembles it is the one its first copy joined.
        later = np.flatnonzero(pairs.first != np.arange(n))
        first = pairs.first[later]
        into[later] = np.where(into[first] == -1, first, into[first])
    return into
