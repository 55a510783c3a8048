"""A generic prior of how common a word is: the share of documents it is expected in.

The lexical scorer (:mod:`nautilus_ranking.synthesis.lexical`) weighs a query word by
its rarity among the batch's documents. A batch is small and retrieved *for* the query
(the query's words are in most of its rows), so that count alone is a noisy estimate;
it is shrunk toward this prior, which says how common the word is in English text in
general, the same for every request (nothing is learned from requests).

The table (``word_prior.tsv.gz``, package data) holds each token as
:func:`nautilus_ranking.text.tokens.tokenize` makes it and its Zipf frequency (log10 of
its occurrences per billion words of general English; ``python -m tools.word_prior``
builds it from wordfreq's data, CC BY-SA 4.0: ``WORD_PRIOR_LICENSE.md``). A word with
frequency ``f`` is expected in ``1 - exp(-f · DOCUMENT_WORDS)`` of documents of
:data:`DOCUMENT_WORDS` words (each occurrence independent); a token the table lacks
(rarer than one in a million words, a number, another script) is taken at
:data:`UNKNOWN_ZIPF`.
"""

from __future__ import annotations

import gzip
import math
from functools import lru_cache
from importlib import resources

import numpy as np

from nautilus_ranking.text.arrays import FloatArray

#: The length, in words, of the generic document a prior share is expected in.
DOCUMENT_WORDS = 100.0
#: The Zipf frequency of a token the table lacks (one in 100 million words).
UNKNOWN_ZIPF = 1.0
TABLE = "word_prior.tsv.gz"


def _share(zipf: float) -> float:
    """The share of :data:`DOCUMENT_WORDS`-word documents a word of this Zipf frequency
    is expected in."""
    return -math.expm1(-(10.0 ** (zipf - 9.0)) * DOCUMENT_WORDS)


UNKNOWN_SHARE = _share(UNKNOWN_ZIPF)


@lru_cache(maxsize=1)
def table() -> dict[str, float]:
    """Every token of the shipped table and its prior share of documents; empty when the
    table cannot be read (every token then takes :data:`UNKNOWN_SHARE`)."""
    try:
        data = resources.files("nautilus_ranking.text").joinpath(TABLE).read_bytes()
        lines = gzip.decompress(data).decode("utf-8").splitlines()
    except (OSError, EOFError, UnicodeDecodeError, gzip.BadGzipFile):
        return {}
    shares: dict[str, float] = {}
    for line in lines:
        token, _, zipf = line.partition("\t")
        try:
            shares[token] = _share(float(zipf))
        except ValueError:
            continue
    return shares


def prior_shares(tokens: list[str]) -> FloatArray:
    """Each token's prior share of documents, in (0, 1)."""
    shares = table()
    return np.fromiter(
        (shares.get(t, UNKNOWN_SHARE) for t in tokens), dtype=np.float64, count=len(tokens)
    )
