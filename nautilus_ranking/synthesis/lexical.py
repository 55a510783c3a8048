"""The lexical content score: BM25 over the batch's rows.

A row's lexical relevance to the query is Okapi BM25 (Robertson et al.), computed over
the rows of the one request, on the tokens every part of nautilus shares
(:func:`nautilus_ranking.text.tokens.tokenize`):

    score(d) = Σ_{t ∈ q} qw(t) · idf(t) · tf(t, d) · (k1 + 1)
                                      / (tf(t, d) + k1 · (1 - b + b · |d| / avgdl))

with ``k1 = 1.2`` and ``b = 0.75`` (the usual defaults, SQLite FTS5's and Lucene's):
a word's repetitions saturate, and a long row is not favoured for holding more words.
``qw(t) = 1 + ln(count of t in the query)``, as the hashing embedder weights a query's
repeated word. ``|d|`` is the row's token count, ``avgdl`` the mean over the batch.

``idf(t) = ln(1 + (N' - df' + 0.5) / (df' + 0.5))`` (BM25's, never negative) with
``N' = N + m`` and ``df' = df(t) + m · p(t)``: the batch's ``N`` documents, ``df(t)`` of
them holding ``t``, and ``m`` = :data:`PRIOR_DOCUMENTS` pseudo-documents in which ``t``
is as common as in English in general (``p(t)``, :mod:`nautilus_ranking.text.word_prior`).
A batch was retrieved for the query, so its counts over-state how common the query's
words are; the prior keeps a handful of rows from deciding that a word is a hub, and
lets a batch of hundreds of rows speak for itself. Without IDF (``idf=False``) the
batch counts are left out: ``idf(t)`` from the prior alone (``N = df = 0``).

The statistics (``N``, ``df``, ``avgdl``) come from the ``statistics`` rows only — the
rows a cap keeps without boosts, each document once — so a boost or a copy never
changes another row's score. Stateless and deterministic: nothing is learned across
requests. Pure numpy; never raises on a batch of any size.
"""

from __future__ import annotations

import numpy as np

from nautilus_ranking.text.arrays import FloatArray, IntArray
from nautilus_ranking.text.tokens import TokenBatch
from nautilus_ranking.text.word_prior import prior_shares

#: Term saturation: the score of a word's ``tf``-th occurrence levels off at ``k1 + 1``.
K1 = 1.2
#: Length normalisation: 0 none, 1 a row's score scaled fully by its length over the mean.
B = 0.75
#: The prior's weight, in documents: the batch's counts outweigh it past ~100 documents.
PRIOR_DOCUMENTS = 100.0


def query_weights(query_tokens: list[str]) -> dict[str, float]:
    """Each distinct query token's weight ``1 + ln(count)``, in order of first appearance."""
    counts: dict[str, int] = {}
    for token in query_tokens:
        counts[token] = counts.get(token, 0) + 1
    return {t: 1.0 + float(np.log(c)) for t, c in counts.items()}


def idf_weights(df: FloatArray, n: float, prior: FloatArray, batch: bool = True) -> FloatArray:
    """BM25's IDF of words in ``df`` of ``n`` documents, shrunk toward the ``prior`` share
    by :data:`PRIOR_DOCUMENTS` pseudo-documents (``batch=False``: the prior alone)."""
    if not batch:
        df, n = np.zeros_like(df), 0.0
    shrunk_df = df + PRIOR_DOCUMENTS * prior
    shrunk_n = n + PRIOR_DOCUMENTS
    idf: FloatArray = np.log1p((shrunk_n - shrunk_df + 0.5) / (shrunk_df + 0.5))
    return idf


def bm25_scores(
    batch: TokenBatch, query_tokens: list[str], statistics: IntArray, idf: bool = True
) -> FloatArray:
    """Each text's BM25 score for the query (0 for a text sharing none of its tokens);
    ``statistics``: the positions of the texts ``N``, ``df`` and ``avgdl`` are taken over;
    ``idf``: whether the batch's counts join the prior (see the module docstring)."""
    n = batch.n_texts
    scores = np.zeros(n, dtype=np.float64)
    weights = query_weights(query_tokens)
    present = [t for t in weights if t in batch.vocab]
    if n == 0 or not present:
        return scores
    rows, terms, counts = batch.pairs()
    slot = np.full(len(batch.vocab), -1, dtype=np.int64)  # vocab term -> query token
    slot[[batch.vocab[t] for t in present]] = np.arange(len(present))
    at = slot[terms]
    hit = at >= 0
    rows, at, tf = rows[hit], at[hit], counts[hit].astype(np.float64)
    lengths = np.bincount(batch.rows, minlength=n).astype(np.float64)
    counted = np.zeros(n, dtype=bool)
    counted[statistics] = True
    n_docs = int(counted.sum())
    avgdl = float(lengths[counted].sum()) / n_docs if n_docs else 0.0
    df = np.bincount(at[counted[rows]], minlength=len(present)).astype(np.float64)
    w = idf_weights(df, float(n_docs), prior_shares(present), batch=idf)
    w *= np.array([weights[t] for t in present], dtype=np.float64)
    relative = lengths[rows] / avgdl if avgdl > 0 else np.ones(len(rows))
    saturation = tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * relative))
    scores += np.bincount(rows, weights=w[at] * saturation, minlength=n)
    return scores
