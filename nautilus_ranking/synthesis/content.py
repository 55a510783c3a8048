"""The content stage: each scored row's similarity to the query and its document.

Lexical content is BM25 over the batch (``lexical.py``) or a lexical embedder's cosine,
IDF-weighted (``text/tokens.py``); a model's is its cosine (``similarity.py``), with a
lexical score beside it for every row, and the rows past the embedding deadline (or
past the best it embeds) scored by words (``embedding_deadline.py``).
"""

from __future__ import annotations

import time

import numpy as np

from nautilus_ranking.embedders import is_token_embedder
from nautilus_ranking.fanout.abandon import checkpoint
from nautilus_ranking.synthesis import copies, fusion, lexical
from nautilus_ranking.synthesis.batch import RankBatch, RankSettings
from nautilus_ranking.synthesis.candidates import MAX_TEXT_CHARS, NOT_TEXT, Candidates, row_texts
from nautilus_ranking.synthesis.embedding_deadline import (
    best_by_source_rank,
    best_by_words,
    scored_by_words,
    scored_by_words_report,
)
from nautilus_ranking.synthesis.passages import (
    long_rows,
    passage_lexical,
    passage_similarity,
    row_factors,
    row_lexical,
)
from nautilus_ranking.synthesis.query import MAX_QUERY_CHARS, TokensToWeight, weighted_query
from nautilus_ranking.synthesis.rank_warnings import RankWarnings
from nautilus_ranking.synthesis.similarity import lexical_similarities, similarities
from nautilus_ranking.text.arrays import FloatArray, IntArray
from nautilus_ranking.text.tokens import (
    IDF_FLOOR,
    TokenBatch,
    idf_factors,
    query_token_weights,
    tokenize,
)


def score_content(ranker: RankSettings, b: RankBatch, warnings: RankWarnings) -> bool:
    """Fill in ``b``'s content fields (False: the query weighted by IDF has no vector,
    and there is no ranking)."""
    n = b.n
    factors = np.ones(n, dtype=np.float64)
    by_idf = False  # the rows' IDF factors computed (else 1 each)
    texts: list[str] | None = None
    batch: TokenBatch | None = None
    raw_query = b.ctx.get("query")
    query = b.query
    # The default lexical scorer (lexical="bm25"): BM25 over the batch, for the lexical
    # content of text mode (a query nautilus embedded with its lexical embedder). Rows
    # carrying their own vectors in the embedder's space keep the vector path.
    use_bm25 = (
        ranker.lexical == "bm25"
        and b.lexical_content
        and (b.query_in_embedder_space or isinstance(query, TokensToWeight))
        and not own_vectors(b.sub, getattr(ranker.embedder, "model_id", None))
    )
    query_tokens = (
        tokenize(raw_query[:MAX_QUERY_CHARS] if isinstance(raw_query, str) else "")
        if ranker.idf or not is_token_embedder(ranker.embedder) or use_bm25
        else []
    )
    weights: dict[str, float] = {}  # the query's IDF weights (none without IDF)
    if b.texts_all is not None:
        texts = b.texts_all if b.sub is b.cands else [b.texts_all[i] for i in b.scored.tolist()]
    if ranker.idf and b.texts_all is not None and texts is not None and not use_bm25:
        batch = TokenBatch.from_texts(texts)
        ref_batch = (
            batch
            if len(b.reference) == n
            else TokenBatch.from_texts([b.texts_all[i] for i in b.reference.tolist()])
        )
        weights = query_token_weights(ref_batch, query_tokens)
        if isinstance(query, TokensToWeight):
            # A lexical embedder weights the query's own tokens: hubs fade from it.
            weighted = weighted_query(ranker.embedder, query.tokens, weights, warnings)
            if weighted is None:
                return False
            b.query = weighted
        else:
            factors = idf_factors(batch, weights, IDF_FLOOR)
            by_idf = True
    b.factors, b.texts, b.tokens, b.query_tokens = factors, texts, batch, query_tokens
    if use_bm25:  # BM25 needs no query vector: the query's tokens are scored directly
        _bm25_similarity(ranker, b, warnings)
        late: IntArray = np.zeros(0, dtype=np.intp)
        best: IntArray | None = None
    else:
        late, best = _model_similarity(ranker, b, weights, warnings)
        if by_idf and b.passages is not None:  # a long row's: its passage's that scored
            b.factors = row_factors(b.passages, b.factors)
    checkpoint("similarity")
    # Beside a model's semantic similarity, a lexical one for every row (a lexical
    # embedder's similarity is that already): content then combines both.
    if query_tokens and not is_token_embedder(ranker.embedder) and b.lexical_score is None:
        b.lexical_score, _, b.tokens = words_beside_model(
            b.sub, b.texts, b.tokens, query_tokens, weights, warnings
        )
    if len(late):  # past the deadline, or past the best the model embeds: by words
        b.similarity = scored_by_words(b.similarity, late, b.lexical_score)
        past_deadline = len(late) if best is None else len(np.intersect1d(late, best))
        if past_deadline:
            b.embedding_report = scored_by_words_report(
                ranker.embedding_deadline_ms, past_deadline, n - len(late)
            )
    b.content_similarity = b.similarity * b.factors
    return True


def _bm25_similarity(ranker: RankSettings, b: RankBatch, warnings: RankWarnings) -> None:
    """BM25 over the scored rows, its batch statistics counted over the reference rows
    (each document once)."""
    if b.texts is None:
        b.texts = row_texts(b.sub.rows, warnings)
    if b.tokens is None:
        b.tokens = TokenBatch.from_texts(b.texts)
    b.doc = documents(ranker, b.cands, b.texts if b.n == len(b.cands.rows) else None, b.tokens)
    b.similarity = lexical.bm25_scores(
        b.tokens, b.query_tokens, each_document_once(b.doc[b.scored], b.where_ref), ranker.idf
    )
    b.factors = np.ones(b.n, dtype=np.float64)


def _model_similarity(
    ranker: RankSettings, b: RankBatch, weights: dict[str, float], warnings: RankWarnings
) -> tuple[IntArray, IntArray | None]:
    """The embedder's cosine (a model embeds at most ``embedding_max_rows`` rows, the
    best by words): (the rows past the deadline or past the best, the best)."""
    # Only an IDF pass defers the query's embedding, and the pass above resolved it.
    assert not isinstance(b.query, TokensToWeight)
    started = time.perf_counter()
    best: IntArray | None = None  # the rows a model embeds (None: every row)
    if b.query_tokens and b.query_in_embedder_space:  # a long row's passages, by words
        _passage_words(b, weights, warnings)
    if ranker.embedding_max_rows and b.n > ranker.embedding_max_rows and b.query_tokens:
        if b.lexical_score is None:
            b.lexical_score, b.texts, b.tokens = words_beside_model(
                b.sub, b.texts, b.tokens, b.query_tokens, weights, warnings
            )
        best = best_by_words(b.lexical_score, ranker.embedding_max_rows)
    elif ranker.embedding_max_rows and b.n > ranker.embedding_max_rows:  # no words
        best = best_by_source_rank(b.sub.source_rank, ranker.embedding_max_rows)
    b.similarity, b.texts, b.tokens, late = similarities(
        b.sub,
        ranker.embedder,
        b.query,
        b.query_in_embedder_space,
        b.texts,
        b.tokens,
        warnings,
        ranker.embedding_deadline_ms,
        best,
    )
    if b.passages is not None and b.texts is not None:
        deadline_ms = ranker.embedding_deadline_ms
        embedded = np.setdiff1d(best if best is not None else np.arange(b.n), late)
        b.similarity, b.passages_scored = passage_similarity(
            b.passages,
            b.texts,
            b.similarity,
            embedded,
            ranker.embedder,
            b.query,
            b.query_in_embedder_space,
            warnings,
            started + deadline_ms / 1000 if deadline_ms > 0 else None,
        )
    b.doc = documents(ranker, b.cands, b.texts if b.n == len(b.cands.rows) else None, b.tokens)
    return late, best


def _passage_words(b: RankBatch, weights: dict[str, float], warnings: RankWarnings) -> None:
    """The rows past the model's window read as passages (``passages.py``): each one's
    lexical score its best passage's. Rows within the window are left as they are."""
    texts = b.texts if b.texts is not None else row_texts(b.sub.rows, warnings)
    b.texts = texts
    rows = long_rows(texts)
    if not len(rows):
        return
    b.lexical_score, b.texts, b.tokens = words_beside_model(
        b.sub, texts, b.tokens, b.query_tokens, weights, warnings
    )
    b.passages = passage_lexical(texts, rows, b.query_tokens, weights)
    if b.lexical_score is not None:
        b.lexical_score = row_lexical(b.passages, b.lexical_score)


def words_beside_model(
    sub: Candidates,
    texts: list[str] | None,
    batch: TokenBatch | None,
    query_tokens: list[str],
    weights: dict[str, float],
    warnings: RankWarnings,
) -> tuple[FloatArray | None, list[str], TokenBatch]:
    """A model's lexical score beside its own, for every row, with the rows' texts and
    tokens (built here when not yet). The IDF-weighted cosine: BM25 here measured 0.0008
    below it on the mean of the onnx cells, and was not taken."""
    texts = texts if texts is not None else row_texts(sub.rows, warnings)
    batch = batch if batch is not None else TokenBatch.from_texts(texts)
    return lexical_similarities(batch, query_tokens, weights), texts, batch


def documents(
    ranker: RankSettings, cands: Candidates, texts: list[str] | None, batch: TokenBatch | None
) -> IntArray:
    """The document number of every candidate (copies share one): by ``dedup_key``,
    else by canonical text, found from the row texts and tokens already built
    (``texts``/``batch``: of every candidate, in order, when the pass built them)."""
    if ranker.dedup_key is not None:
        return copies.document_numbers_by_key(cands.rows, ranker.dedup_key, NOT_TEXT)
    return copies.document_numbers(
        cands.rows, NOT_TEXT, texts, batch, MAX_TEXT_CHARS, plain=cands.plain
    )


def each_document_once(doc: IntArray, reference: IntArray) -> IntArray:
    """The ``reference`` positions with each document once (its first copy): the rows the
    lexical scorer's batch statistics are counted over."""
    if fusion.every_row_its_document(doc, reference):
        return reference
    _, first = np.unique(doc[reference], return_index=True)
    kept: IntArray = reference[np.sort(first)]
    return kept


def own_vectors(cands: Candidates, model: str | None) -> bool:
    """Whether any candidate brings a vector the similarity stage would use or warn about
    (a matrix, or an ``embedding`` that names no other model): such a batch is scored by
    cosine, as vectors have no words for BM25 to count."""
    if cands.matrices is not None:
        return True
    for row in cands.rows:
        vector = row.get("embedding")
        if vector is not None and row.get("embedding_model", model) == model:
            return True
    return False
