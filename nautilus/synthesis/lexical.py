"""Tokens, token batches and the batch-local IDF factor.

One tokenizer serves the hashing embedder, the IDF factor and the SQL sources,
so "a word" means the same thing everywhere: lower-cased runs of letters and
digits, English stop words dropped, plural/verb ``s`` endings folded (a tiny
S-stemmer: ``incidents`` → ``incident``, ``queries`` → ``query``).
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import chain

import numpy as np
import numpy.typing as npt

_TOKEN = re.compile(r"[^\W_]+")

STOPWORDS = frozenset("""
a about above after again against all also am an and any are as at be because been
before being below between both but by can could did do does doing down during each
few for from further had has have having he her here hers herself him himself his how
i if in into is it its itself just me more most my myself no nor not now of off on
once only or other our ours ourselves out over own same she should so some such than
that the their theirs them themselves then there these they this those through to too
under until up very was we were what when where which while who whom why will with
would you your yours yourself yourselves what's it's i'm don't
""".split())

#: Floor of the IDF factor: a row that covers none of the query's rare tokens
#: keeps this share of its similarity (see :func:`idf_factors`). Tuned on the
#: quality benchmark (docs/benchmarks.md).
IDF_FLOOR = 0.5


@lru_cache(maxsize=1 << 18)
def normalize(token: str) -> str:
    """A lower-case token's canonical form; ``""`` for a stop word."""
    if token in STOPWORDS:
        return ""
    n = len(token)
    if n > 4 and token.endswith("ies") and not token.endswith(("eies", "aies")):
        return token[:-3] + "y"
    if n > 3 and token.endswith("es") and not token.endswith(("aes", "ees", "oes", "ses")):
        return token[:-1]
    if n > 3 and token.endswith("s") and not token.endswith(("us", "ss", "is")):
        return token[:-1]
    return token


def tokenize(text: str) -> list[str]:
    """The normalised tokens of ``text``, in order, stop words dropped."""
    return [t for t in map(normalize, _TOKEN.findall(text.lower())) if t]


def keyword_stems(text: str) -> list[str]:
    """Distinct substrings to match a word and its plural with ``LIKE``:
    the common prefix of the word and its normal form (``queries`` → ``quer``)."""
    stems: dict[str, None] = {}
    for raw in _TOKEN.findall(text.lower()):
        normal = normalize(raw)
        if normal:
            stems[os.path.commonprefix([raw, normal])] = None  # noqa: RUF071 (by character)
    return list(stems)


@dataclass
class TokenBatch:
    """The tokens of many texts as flat arrays: occurrence ``i`` of the batch is
    term ``terms[i]`` (an index into ``vocab``) in text ``rows[i]``."""

    n_texts: int
    rows: npt.NDArray[np.int64]
    terms: npt.NDArray[np.int64]
    vocab: dict[str, int]
    _pairs: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]] | None = (
        field(default=None, repr=False))

    @classmethod
    def from_texts(cls, texts: list[str]) -> TokenBatch:
        vocab: dict[str, int] = {}
        add = vocab.setdefault
        findall = _TOKEN.findall
        per_text = [[add(t, len(vocab)) for t in map(normalize, findall(text.lower())) if t]
                    for text in texts]
        lengths = np.fromiter((len(ids) for ids in per_text), dtype=np.int64, count=len(texts))
        total = int(lengths.sum())
        terms = np.fromiter(chain.from_iterable(per_text), dtype=np.int64, count=total)
        rows = np.repeat(np.arange(len(texts), dtype=np.int64), lengths)
        return cls(len(texts), rows, terms, vocab)

    def pairs(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Distinct (text, term) pairs and each one's count in its text."""
        if self._pairs is None:
            width = max(len(self.vocab), 1)
            keys, counts = np.unique(self.rows * width + self.terms, return_counts=True)
            self._pairs = (keys // width, keys % width, counts.astype(np.int64))
        return self._pairs

    def bigrams(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64],
                               npt.NDArray[np.int64]]:
        """Adjacent term pairs within each text: (text, first term, second term)."""
        same_text = self.rows[1:] == self.rows[:-1]
        return self.rows[1:][same_text], self.terms[:-1][same_text], self.terms[1:][same_text]


def idf_factors(batch: TokenBatch, query_tokens: list[str],
                floor: float = IDF_FLOOR) -> npt.NDArray[np.float64]:
    """The batch-local IDF factor of each text, in ``[floor, 1]``.

    With ``N`` texts in the batch and ``df(t)`` the number containing token
    ``t``, a token's weight is ``w(t) = ln(1 + N / df(t)) / ln(1 + N)`` — 1 for
    a token in one text, ``ln 2 / ln(1 + N)`` for one in every text (a hub);
    a query token absent from the batch weighs 1. A text's IDF-weighted
    coverage of the query is ``c = Σ_{t ∈ q ∩ text} w(t) / Σ_{t ∈ q} w(t)``
    over distinct query tokens, and its factor is ``floor + (1 - floor) · c``.
    Rows that match a query only through tokens that recur across the batch
    thus keep little more than ``floor`` of their similarity.
    A query without tokens gives every text the factor 1.
    """
    n = batch.n_texts
    factors = np.ones(n, dtype=np.float64)
    distinct_query = list(dict.fromkeys(query_tokens))
    if n == 0 or not distinct_query:
        return factors
    pair_rows, pair_terms, _ = batch.pairs()
    df = np.bincount(pair_terms, minlength=len(batch.vocab)).astype(np.float64)
    query_ids = np.array([batch.vocab.get(t, -1) for t in distinct_query], dtype=np.int64)
    present = query_ids[query_ids >= 0]
    weight_by_term = np.zeros(len(batch.vocab), dtype=np.float64)
    weight_by_term[present] = np.log1p(n / df[present]) / math.log1p(n)
    total = float(weight_by_term[present].sum()) + float(np.count_nonzero(query_ids < 0))
    covered = np.bincount(pair_rows, weights=weight_by_term[pair_terms], minlength=n)
    factors = floor + (1.0 - floor) * (covered / total)
    return factors
