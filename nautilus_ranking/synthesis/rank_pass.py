"""The ranking pass: one request's rows scored, fused, boosted and selected.

:class:`~nautilus_ranking.synthesis.ranking.RankingSynthesizer` holds the settings and
the public API; this is the pass it runs (its steps are in that module's docstring),
kept apart because it is the one long piece of wiring: every stage module
(``candidates``, ``query``, ``similarity``, ``lexical``, ``detection``, ``fusion``,
``ranking_boost``, ``recency``, ``select``) is called from here, in order. One module
past 400 lines because the order of the calls is the design (what each stage reads
from the ones before it); every stage's own work is in its module.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np

from nautilus_ranking.embedders import Embedder, is_token_embedder
from nautilus_ranking.embedders.registry import embedder_name_of
from nautilus_ranking.fanout.abandon import checkpoint
from nautilus_ranking.records import AdapterResult, RankedRow
from nautilus_ranking.selection import confidence
from nautilus_ranking.settings.time_entries import Recency
from nautilus_ranking.synthesis import copies, detection, fusion, lexical, recency
from nautilus_ranking.synthesis.candidates import (
    MAX_TEXT_CHARS,
    NOT_TEXT,
    Candidates,
    cap,
    declared,
    flatten,
    has_text_id,
    resemblance_texts,
    row_texts,
)
from nautilus_ranking.synthesis.embedding_deadline import (
    best_by_source_rank,
    best_by_words,
    say_scored_by_words,
    scored_by_words,
)
from nautilus_ranking.synthesis.query import TokensToWeight, query_vector, weighted_query
from nautilus_ranking.synthesis.rank_warnings import RankWarnings
from nautilus_ranking.synthesis.ranking_boost import (
    stage1_key,
    stage2_bumps,
    unboosted_places,
    weights_for,
)
from nautilus_ranking.synthesis.select import Scores, Spread, select
from nautilus_ranking.synthesis.similarity import lexical_similarities, similarities
from nautilus_ranking.text.arrays import FloatArray, IntArray
from nautilus_ranking.text.tokens import (
    IDF_FLOOR,
    TokenBatch,
    idf_factors,
    query_token_weights,
    tokenize,
)
from nautilus_ranking.tracing.facts import fusion_stage
from nautilus_ranking.tracing.spans import stages


class RankSettings(Protocol):
    """What the pass reads of a ranker: a RankingSynthesizer's settings."""

    top_k: int | None
    idf: bool
    lexical: str
    source_boosts: dict[str, str]
    embedder: Embedder
    max_candidates: int | None
    dedup_key: str | None
    near_duplicates: float | None
    diversity: float | None
    max_per_source: int | None
    page_size: int | None
    canonical_sources: tuple[str, ...]
    #: The time rows may take to embed with a model (ms; 0: no deadline).
    embedding_deadline_ms: int
    #: With a model, the rows it embeds (the best by words; 0: every row).
    embedding_max_rows: int
    #: The decay by age (None: off) and whether the newest revision supersedes the rest.
    recency: Recency | None
    supersede: bool
    #: By lower-case source id: the row key of a row's time, and of its document.
    time_fields: dict[str, str]
    document_keys: dict[str, str]
    #: By lower-case source id: the other sources whose revisions it may supersede.
    may_revise: dict[str, frozenset[str]]


def rank_pass(
    ranker: RankSettings,
    results: list[AdapterResult],
    context: Mapping[str, Any] | None,
    warnings: RankWarnings,
) -> list[RankedRow] | None:
    ctx: Mapping[str, Any] = context if isinstance(context, Mapping) else {}
    query, query_in_embedder_space = query_vector(ranker.embedder, ranker.idf, ctx, warnings)
    if query is None:
        return None
    checkpoint("query")  # each stage ends here when the caller stopped waiting (504)
    cands = flatten(results, warnings)
    level_weights = [
        weights_for(ranker.source_boosts.get(s.lower()) if isinstance(s, str) else None)
        for s in cands.source_ids
    ]
    multipliers = np.array([w.multiplier for w in level_weights] or [1.0])
    bumps = np.array([w.bump for w in level_weights] or [0.0])

    ranks = cands.source_rank.astype(np.float64)
    keys: FloatArray = stage1_key(ranks, multipliers[cands.source_index])
    if not cands.rows:
        return []
    texts_all = row_texts(cands.rows, warnings) if ranker.idf else None
    # Content is lexical when the query is in a lexical embedder's space: content then
    # sees words only, and cannot judge a semantic index's order (detection, fusion).
    lexical_content = is_token_embedder(ranker.embedder) and (
        query_in_embedder_space
        or isinstance(query, TokensToWeight)
        or query.shape[0] == getattr(ranker.embedder, "dim", None)
    )
    said = detection.orders_from_fields(
        declared(results, cands.source_ids),
        cands.rows,
        cands.source_index,
        scores=lexical_content,
    )
    # Stage 1: the cap keeps rows by the boosted key; the statistics come from the rows
    # it keeps without boosts (the reference), which no boost can change.
    everyone = np.arange(len(cands.rows))
    kept = reference = scored = where_ref = everyone
    sub = cands
    if ranker.max_candidates is not None and len(cands.rows) > ranker.max_candidates:
        kept = cap(cands, keys, ranker.max_candidates)
        reference = cap(cands, stage1_key(ranks), ranker.max_candidates)
        scored = np.union1d(kept, reference)  # sorted positions into the whole union
        sub = cands.take(scored)
        where_ref = np.searchsorted(scored, reference)
        if (recording := stages()) is not None:
            recording.add(
                "candidate_cap", len(cands.rows), len(kept), max_candidates=ranker.max_candidates
            )
    n = len(scored)

    factors = np.ones(n, dtype=np.float64)
    texts: list[str] | None = None
    batch: TokenBatch | None = None
    raw_query = ctx.get("query")
    # The default lexical scorer (lexical="bm25"): BM25 over the batch, for the lexical
    # content of text mode (a query nautilus embedded with its lexical embedder). Rows
    # carrying their own vectors in the embedder's space keep the vector path.
    use_bm25 = (
        ranker.lexical == "bm25"
        and lexical_content
        and (query_in_embedder_space or isinstance(query, TokensToWeight))
        and not _own_vectors(sub, getattr(ranker.embedder, "model_id", None))
    )
    query_tokens = (
        tokenize(raw_query[:MAX_TEXT_CHARS] if isinstance(raw_query, str) else "")
        if ranker.idf or not is_token_embedder(ranker.embedder) or use_bm25
        else []
    )
    weights: dict[str, float] = {}  # the query's IDF weights (none without IDF)
    if texts_all is not None:
        texts = texts_all if sub is cands else [texts_all[i] for i in scored.tolist()]
    if ranker.idf and texts_all is not None and texts is not None and not use_bm25:
        batch = TokenBatch.from_texts(texts)
        ref_batch = (
            batch
            if len(reference) == n
            else TokenBatch.from_texts([texts_all[i] for i in reference.tolist()])
        )
        weights = query_token_weights(ref_batch, query_tokens)
        if isinstance(query, TokensToWeight):
            # A lexical embedder weights the query's own tokens: hubs fade from it.
            query = weighted_query(ranker.embedder, query.tokens, weights, warnings)
            if query is None:
                return None
        else:
            factors = idf_factors(batch, weights, IDF_FLOOR)
    late: IntArray = np.zeros(0, dtype=np.intp)  # rows past the deadline, or past the best
    lexical_score: FloatArray | None = None  # a model's lexical score beside its own
    best: IntArray | None = None  # the rows a model embeds (None: every row)
    if use_bm25:  # BM25 needs no query vector: the query's tokens are scored directly
        if texts is None:
            texts = row_texts(sub.rows, warnings)
        if batch is None:
            batch = TokenBatch.from_texts(texts)
        doc = _documents(ranker, cands, texts if n == len(cands.rows) else None, batch)
        similarity = lexical.bm25_scores(
            batch, query_tokens, _each_document_once(doc[scored], where_ref), ranker.idf
        )
        factors = np.ones(n, dtype=np.float64)
    else:
        # Only an IDF pass defers the query's embedding, and the pass above resolved it.
        assert not isinstance(query, TokensToWeight)
        if ranker.embedding_max_rows and n > ranker.embedding_max_rows and query_tokens:
            lexical_score, texts, batch = _words_beside_model(
                sub, texts, batch, query_tokens, weights, warnings
            )
            best = best_by_words(lexical_score, ranker.embedding_max_rows)
        elif ranker.embedding_max_rows and n > ranker.embedding_max_rows:  # no words
            best = best_by_source_rank(sub.source_rank, ranker.embedding_max_rows)
        similarity, texts, batch, late = similarities(
            sub,
            ranker.embedder,
            query,
            query_in_embedder_space,
            texts,
            batch,
            warnings,
            ranker.embedding_deadline_ms,
            best,
        )
        doc = _documents(ranker, cands, texts if n == len(cands.rows) else None, batch)
    checkpoint("similarity")
    # Beside a model's semantic similarity, a lexical one for every row (a lexical
    # embedder's similarity is that already): content then combines both.
    if query_tokens and not is_token_embedder(ranker.embedder) and lexical_score is None:
        lexical_score, _, batch = _words_beside_model(
            sub, texts, batch, query_tokens, weights, warnings
        )
    if len(late):  # past the deadline, or past the best the model embeds: by words
        similarity = scored_by_words(similarity, late, lexical_score)
        past_deadline = len(late) if best is None else len(np.intersect1d(late, best))
        if past_deadline:
            say_scored_by_words(ranker.embedding_deadline_ms, past_deadline, n - len(late))
    content_similarity = similarity * factors

    # Fusion: which sources are ranked (declared, else detected on the reference rows),
    # their votes for each document over the whole union, how much content counts in
    # this batch (from how many documents the ranked sources share), the content vote
    # (by normalised similarity), and the votes standing in for unranked sources' orders.
    sub_doc = doc[scored]
    source_weight, _ = detection.source_weights(
        sub.source_index[where_ref],
        sub.source_rank[where_ref],
        content_similarity[where_ref],
        said,
        sub_doc[where_ref],
        factors[where_ref],
    )
    evidence_all, voters_all = fusion.source_evidence(
        doc, cands.source_index, cands.source_rank, source_weight
    )
    weight = fusion.content_weight(doc, cands.source_index, source_weight)
    voters = voters_all[scored]
    normalised = fusion.normalised_similarity(content_similarity, sub_doc, where_ref)
    content_score = content_similarity  # what content ranks rows by
    if (
        lexical_score is not None
        and len(np.unique(sub_doc[where_ref][lexical_score[where_ref] > 0])) >= 2
    ):
        # A semantic and a lexical score: their convex combination. A lexical score that
        # fewer than two documents have has no distribution to normalise it by: unused.
        normalised = fusion.convex_content(
            normalised, fusion.normalised_similarity(lexical_score, sub_doc, where_ref)
        )
        content_score = normalised
    elif lexical_content:
        # Lexical content only: a ranked source's row that shares few of the query's
        # words is not rated far below what its rank says (a semantic index's match).
        normalised = fusion.rank_floor(
            normalised, sub.source_index, sub.source_rank, source_weight, where_ref
        )
    content_rank = fusion.content_ranks(content_score, sub_doc, where_ref)
    content = fusion.content_vote(normalised, weight=weight)
    unranked = fusion.unranked_votes(
        content_score, sub_doc, sub.source_index, where_ref, source_weight, voters, weight
    )
    evidence = evidence_all[scored]
    relevance = content + evidence + unranked
    confidence.keep(
        _confidence(
            ranker,
            query_in_embedder_space or isinstance(query, TokensToWeight),
            (content_similarity, lexical_score, relevance, voters, sub_doc),
            where_ref,
            query_tokens or (tokenize(raw_query) if isinstance(raw_query, str) else []),
        )
    )
    # Stage 2: a boost adds a signed share of the spread of the batch's unboosted
    # relevance, decayed by the row's place in its source; both read from unboosted
    # relevance and the reference rows, so a boost never changes another row's bump.
    bump: FloatArray = stage2_bumps(relevance, sub.source_index, sub_doc, where_ref, bumps)
    unboosted = (
        unboosted_places(relevance, sub.source_index, sub.source_rank, sub_doc, where_ref)
        if bumps.any()
        else np.zeros(n, dtype=np.int64)
    )
    timing = recency.timing(  # None unless recency or supersession is set
        ranker,
        results,
        sub.rows,
        cands.source_ids,
        sub.source_index,
        relevance,
        sub_doc,
        where_ref,
        ctx.get("as_of"),
        warnings,
    )
    score = relevance + bump
    if timing is not None and timing.adjust is not None:  # after the confidence: it reads none
        score = score + timing.adjust
    scores = Scores(
        score=score,
        similarity=similarity,
        idf_factor=factors,
        content_rank=content_rank,
        content=content,
        content_weight=np.full(n, weight),
        evidence=evidence,
        voters=voters,
        source_weight=source_weight[sub.source_index],
        unranked_vote=unranked,
        relevance=relevance,
        boost_bump=bump,
        stage1_key=keys[scored],
        doc=sub_doc,
        unboosted_rank=unboosted,
    )
    # Every row scored stays a candidate: the rows the cap keeps without boosts (the
    # reference) too, so a boost can let rows in but never push a better one out.
    # At most max_candidates rows leave, best first, as without the reference.
    limit = ranker.top_k
    if len(kept) < len(cands.rows):
        limit = len(kept) if limit is None else min(limit, len(kept))
    spread = None
    if (
        ranker.near_duplicates is not None
        or ranker.diversity is not None
        or ranker.max_per_source is not None
    ):
        # The texts compared leave each row's id out: the scoring's texts and tokens hold
        # a string id, so they are reused only when no row has one.
        reusable = not has_text_id(sub.rows)
        built = texts if reusable and texts is not None and len(texts) == n else None

        def texts_of(at: list[int]) -> list[str]:
            if built is not None:
                return [built[i] for i in at]
            return resemblance_texts([sub.rows[i] for i in at])

        spread = Spread(
            ranker.near_duplicates,
            ranker.diversity,
            ranker.max_per_source,
            ranker.page_size,
            texts_of,
            batch if reusable and batch is not None and batch.n_texts == n else None,
        )
    if (recording := stages()) is not None:
        fusion_stage(
            recording, n, cands.source_ids, ranker.source_boosts, int(np.count_nonzero(bump))
        )
    checkpoint("fusion")
    return select(sub, scores, limit, spread, ranker.canonical_sources, timing)


def _words_beside_model(
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


def _confidence(
    ranker: RankSettings,
    own_query: bool,
    arrays: tuple[FloatArray, FloatArray | None, FloatArray, IntArray, IntArray],
    reference: IntArray,
    query_tokens: list[str],
) -> confidence.Confidence:
    """The batch's confidence, read from the reference rows before any boost
    (``arrays``: similarity, lexical score, relevance, voters, document of every scored
    row). A query vector the caller brought has no known scale: its setup is
    ``unknown`` (no fit)."""
    similarity, lexical_score, relevance, voters, doc = arrays
    model = getattr(ranker.embedder, "model_id", None)
    name = embedder_name_of(model) if own_query and isinstance(model, str) else None
    observed = confidence.signals(
        similarity[reference],
        lexical_score[reference] if lexical_score is not None else None,
        relevance[reference],
        voters[reference],
        doc[reference],
        len(set(query_tokens)),
    )
    return confidence.estimate(confidence.setup_key(name, ranker.lexical, ranker.idf), observed)


def _documents(
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


def _each_document_once(doc: IntArray, reference: IntArray) -> IntArray:
    """The ``reference`` positions with each document once (its first copy): the rows the
    lexical scorer's batch statistics are counted over."""
    if fusion.every_row_its_document(doc, reference):
        return reference
    _, first = np.unique(doc[reference], return_index=True)
    kept: IntArray = reference[np.sort(first)]
    return kept


def _own_vectors(cands: Candidates, model: str | None) -> bool:
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
