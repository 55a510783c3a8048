"""The facts a text states — its numbers, dates and amounts — and the pairs they split.

Two texts of one template that differ in a number ("within 24 hours" and "within 48
hours"), a date or a currency share nearly every shingle, yet they are two obligations,
not one text seen twice: collapsing one into the other hides the one an agent needed.
So a pair *conflicts* when each text states a fact the other does not, and conflicting
texts never resemble each other (:func:`~nautilus_ranking.synthesis.near_duplicates.resemblance`
leaves the pair out). A text that only states *more* (a copy with a signature date added,
or its last paragraph cut) does not conflict: a copy may be longer or shorter.

A fact is a number, perhaps with a short unit (``24``, ``2024``, ``48h``, ``10kg``,
``2nd``; ``1,000,000`` is three tokens, ``1``, ``000``, ``000``), a month or weekday
name, or a currency (its ISO code or its name: the tokenizer drops ``$`` and ``€``).
A token that starts with letters (``k1``, ``inc2041``, ``v2``) is an identifier, not a
fact: two mirrors of one document may number it their own way. Names of people and companies are
not facts here: the tokens are lower-cased, so a name is a word like any other, and it
counts only through the shingles it is in. "may" and "march" are left out of the months
(a verb first).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from nautilus_ranking.text.arrays import IntArray
from nautilus_ranking.text.tokens import TokenBatch, normalize

_WORDS = """
january february april june july august september october november december
jan feb apr jun jul aug sep sept oct nov dec
monday tuesday wednesday thursday friday saturday sunday
mon tue tues wed thu thur thurs fri sat sun
usd eur gbp jpy chf cny inr cad aud sek nok dkk pln
dollar euro pound yen franc yuan rupee krona krone zloty cent pence
"""
#: The words (as the tokenizer writes them) that are facts though they have no digit.
FACT_WORDS = frozenset(filter(None, (normalize(word) for word in _WORDS.split())))
#: A number and at most three letters of its unit.
_NUMBER = re.compile(r"\d+[^\W\d_]{0,3}")


def is_fact(token: str) -> bool:
    """Whether a token (as the tokenizer writes it) states a fact."""
    return token in FACT_WORDS or (not token.isalpha() and _NUMBER.fullmatch(token) is not None)


@dataclass(frozen=True)
class Facts:
    """Each text's distinct fact terms as flat arrays: ``terms[i]`` belongs to text
    ``rows[i]`` (sorted by text, then term); ``sizes[t]``: how many text ``t`` has."""

    rows: IntArray
    terms: IntArray
    sizes: IntArray

    def subset(self, at: IntArray, n: int) -> Facts:
        """The facts of texts ``at`` (of the ``n`` texts these cover), renumbered
        ``0 … len(at)-1`` in that order."""
        where = np.full(n, -1, dtype=np.int64)
        where[at] = np.arange(len(at))
        rows = where[self.rows]
        keep = rows >= 0
        rows, terms = rows[keep], self.terms[keep]
        order = np.lexsort((terms, rows))
        return Facts(
            rows[order], terms[order], np.bincount(rows, minlength=len(at)).astype(np.int64)
        )


def facts(batch: TokenBatch) -> Facts:
    """The distinct fact terms of every text of ``batch`` (a pass over its vocabulary,
    then numpy)."""
    n = batch.n_texts
    ids = [i for word, i in batch.vocab.items() if is_fact(word)]
    if not ids:
        empty = np.zeros(0, dtype=np.int64)
        return Facts(empty, empty, np.zeros(n, dtype=np.int64))
    marked = np.zeros(max(batch.vocab.values()) + 1, dtype=bool)
    marked[ids] = True
    hit = marked[batch.terms]
    rows, terms = batch.rows[hit], batch.terms[hit]
    order = np.lexsort((terms, rows))
    rows, terms = rows[order], terms[order]
    keep = np.ones(len(rows), dtype=bool)
    keep[1:] = (rows[1:] != rows[:-1]) | (terms[1:] != terms[:-1])
    rows, terms = rows[keep], terms[keep]
    return Facts(rows, terms, np.bincount(rows, minlength=n).astype(np.int64))


def conflicting(found: Facts, a: IntArray, b: IntArray) -> npt.NDArray[np.bool_]:
    """For each pair ``(a[i], b[i])``: whether each of the two texts states a fact the
    other does not. Counted in numpy: each fact of ``a`` looked up among ``b``'s."""
    out = np.zeros(len(a), dtype=bool)
    sizes = found.sizes
    both = np.flatnonzero((sizes[a] > 0) & (sizes[b] > 0))
    if len(both) == 0:
        return out
    aa, bb = a[both], b[both]
    span = int(found.terms.max()) + 1
    packed = found.rows * span + found.terms  # sorted: by text, then term
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    lengths = sizes[aa]
    owner = np.repeat(np.arange(len(both)), lengths)
    ends = np.cumsum(lengths)
    offsets = np.arange(int(ends[-1]), dtype=np.int64) - np.repeat(ends - lengths, lengths)
    wanted = bb[owner] * span + found.terms[np.repeat(starts[aa], lengths) + offsets]
    at = np.minimum(np.searchsorted(packed, wanted), len(packed) - 1)
    shared = np.bincount(owner, weights=packed[at] == wanted, minlength=len(both))
    out[both] = (shared < sizes[aa]) & (shared < sizes[bb])
    return out
