"""RankingSynthesizer: rank the union of all sources' rows by relevance to the query.

One pass per request, on numpy arrays built once (docs/design.md, "Ranking"):

1. flatten the successful results into candidates (source, source_rank, row) and
   number the documents (copies: the same ``dedup_key`` value, else the same text);
2. stage 1 — when ``max_candidates`` is exceeded, keep the best candidates by the
   fused rank key ``1 / (60 + source_rank / multiplier)`` (boosts in rank space),
   and the rows the cap keeps *without* boosts (the reference): the batch
   statistics (IDF, which sources are ranked, the content scale and ranks) come
   from the reference, so a boost never changes another row's relevance, and a
   boost can let rows in but never push a reference row out;
3. the query vector: ``context["embedding"]``, else the embedder on ``context["query"]``,
   else no ranking at all (passthrough, exactly ``BasicSynthesizer``);
4. row vectors: a row's own ``embedding`` when it is in the query's space, else
   the embedder on the row's text (its string fields);
5. content similarity = cosine × the batch-local IDF factor (when on), or, opt-in with
   ``lexical="bm25"`` and the lexical embedder, BM25 over the batch's rows
   (``lexical.py``); relevance
   = the content vote (normalised similarity) plus the sources' votes (``fusion.py``);
6. stage 2 — ``score = relevance + bump`` of the row's source level, the bump a share
   of the row's source votes only (never of its content vote);
7. sort by (score desc, routing index, source_rank), collapse copies; with
   ``near_duplicates``, collapse near copies into the first kept row above them; with
   ``diversity``, re-order the whole ranking for novelty (MMR); with
   ``max_per_source``, hold each source to its cap in every page (``select.py``); keep
   ``top_k`` (and at most ``max_candidates``); with a ``cut``, stop that list where
   relevance falls away (``nautilus_ranking/selection/cut.py``: a prefix, never empty).

Each step is a module of its own: ``candidates`` (1, 2), ``query`` (3), ``similarity``
(4, 5; vector arithmetic in ``vectors``), ``fusion`` (5, 6), ``select`` (7); this class
wires them. It never raises on bad input: each kind of problem is one structured
warning per call, collected by the stages and logged here once the pass is over
(``rank_warnings``), and the affected rows are scored without the broken part (or
the call falls back to passthrough). Rows are never mutated.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from nautilus_ranking.embedders import (
    Embedder,
    HashingEmbedder,
    embedder_from_name,
    is_token_embedder,
)
from nautilus_ranking.records import AdapterResult, RankedRow
from nautilus_ranking.selection.cut import RelevanceCut, parse_cut, relevance_cut
from nautilus_ranking.settings_parsing import (
    LEXICAL_SCORERS,
    parse_diversity,
    parse_near_duplicates,
)
from nautilus_ranking.synthesis import copies, detection, fusion, lexical
from nautilus_ranking.synthesis.basic import BasicSynthesizer
from nautilus_ranking.synthesis.candidates import (
    MAX_TEXT_CHARS,
    NOT_TEXT,
    Candidates,
    cap,
    declared,
    flatten,
    row_texts,
)
from nautilus_ranking.synthesis.query import TokensToWeight, query_vector, weighted_query
from nautilus_ranking.synthesis.rank_warnings import RankWarnings
from nautilus_ranking.synthesis.ranking_boost import (
    BOOST_LEVELS,
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

if TYPE_CHECKING:
    from nautilus_ranking.config import NautilusSettings


class RankingSynthesizer:
    """Ranks the union of every source's rows; see the module docstring for the steps."""

    ranking_enabled = True

    def __init__(
        self,
        top_k: int | None = None,
        idf: bool = False,
        source_boosts: Mapping[str, str] | None = None,
        embedder: Embedder | None = None,
        max_candidates: int | None = None,
        dedup_key: str | None = None,
        cut: RelevanceCut | str | None = None,
        near_duplicates: float | str | None = None,
        diversity: float | str | None = None,
        max_per_source: int | None = None,
        page_size: int | None = None,
        lexical: str = "cosine",
    ) -> None:
        for name, value in (
            ("top_k", top_k),
            ("max_candidates", max_candidates),
            ("max_per_source", max_per_source),
            ("page_size", page_size),
        ):
            if value is not None and (
                not isinstance(value, int) or isinstance(value, bool) or value < 1
            ):
                raise ValueError(f"{name} must be an integer >= 1 or None, got {value!r}")
        boosts = {str(k).lower(): str(v).lower() for k, v in (source_boosts or {}).items()}
        unknown = {lvl for lvl in boosts.values() if lvl not in BOOST_LEVELS}
        if unknown:
            raise ValueError(
                f"unknown boost level(s) {sorted(unknown)} (valid: {', '.join(BOOST_LEVELS)})"
            )
        if lexical not in LEXICAL_SCORERS:
            raise ValueError(
                f"unknown lexical scorer {lexical!r} (valid: {', '.join(LEXICAL_SCORERS)})"
            )
        self.top_k = top_k
        self.idf = bool(idf)
        #: The lexical content score: "cosine" (the default: the hashing embedder's
        #: cosine, IDF-weighted with IDF on) or the opt-in "bm25" over the batch.
        self.lexical = lexical
        self.source_boosts = boosts
        self.embedder: Embedder = embedder if embedder is not None else HashingEmbedder()
        self.max_candidates = max_candidates
        self.dedup_key = dedup_key
        parsed, problem = parse_cut("cut", cut)
        if problem is not None:
            raise ValueError(f"cut: {problem.reason}, got {cut!r} (valid: {problem.valid})")
        #: The relevance cut applied to the top K (nautilus_ranking/selection/cut.py); None: off.
        self.cut = parsed
        threshold, problem = parse_near_duplicates("near_duplicates", near_duplicates)
        if problem is not None:
            raise ValueError(f"near_duplicates: {problem.reason}, got {near_duplicates!r}")
        weight, problem = parse_diversity("diversity", diversity)
        if problem is not None:
            raise ValueError(f"diversity: {problem.reason}, got {diversity!r}")
        #: Near copies collapse at this resemblance (synthesis/near_duplicates.py); None: off.
        self.near_duplicates = threshold
        #: The MMR weight of novelty (synthesis/diversity.py); None: off.
        self.diversity = weight
        #: Rows of one source in each page of the top K; None: no cap.
        self.max_per_source = max_per_source
        #: The page the cap counts in: the top K, or a page of it when a deeper ranking
        #: is cut into pages (request/pages.py).
        self.page_size = page_size if page_size is not None else top_k

    @classmethod
    def from_settings(
        cls,
        settings: NautilusSettings,
        embedder: Embedder | None = None,
        page_size: int | None = None,
    ) -> RankingSynthesizer:
        return cls(
            top_k=settings.ranking_top_k,
            idf=settings.ranking_idf,
            source_boosts=settings.source_boosts,
            embedder=embedder
            or embedder_from_name(settings.embedder, cache_size=settings.embedder_cache_size),
            max_candidates=settings.ranking_max_candidates,
            dedup_key=settings.ranking_dedup_key,
            cut=settings.ranking_cut,
            near_duplicates=settings.ranking_near_duplicates,
            diversity=settings.ranking_diversity,
            max_per_source=settings.ranking_max_per_source,
            page_size=page_size,
            lexical=settings.ranking_lexical,
        )

    # --- public API ------------------------------------------------------------------

    def merge(
        self, results: list[AdapterResult], context: Mapping[str, Any] | None = None
    ) -> dict[str, list[dict[str, Any]]]:
        """``{source_id: rows}``: every successful source keeps its key; within a
        source, rows in global rank order; rows below the top K are dropped."""
        return self.merge_ranked(results, context)[0]

    def rank(
        self, results: list[AdapterResult], context: Mapping[str, Any] | None = None
    ) -> list[RankedRow]:
        """Every surviving row, best first. Without a query vector: passthrough order."""
        return self.merge_ranked(results, context)[1]

    def merge_ranked(
        self,
        results: list[AdapterResult],
        context: Mapping[str, Any] | None = None,
    ) -> tuple[dict[str, list[dict[str, Any]]], list[RankedRow]]:
        """``merge`` and ``rank`` from one pass."""
        data, ranked, _ = self.merge_ranked_cut(results, context)
        return data, ranked

    def merge_ranked_cut(
        self,
        results: list[AdapterResult],
        context: Mapping[str, Any] | None = None,
    ) -> tuple[dict[str, list[dict[str, Any]]], list[RankedRow], dict[str, Any] | None]:
        """:meth:`merge_ranked`, and what the relevance cut did (what the broker calls):
        ``{"setting": "gap:0.1", "rows_left_out": n}``, the rows of the top K it left
        out; None without a cut."""
        ranked = self._rank(results, context)
        cut_info = None
        if self.cut is not None:  # where relevance falls away: a prefix, never empty
            left_out = 0
            if ranked is not None:  # (a passthrough has no relevance to cut by)
                kept = relevance_cut(ranked, self.cut)
                left_out = len(ranked) - kept
                del ranked[kept:]
            cut_info = {"setting": str(self.cut), "rows_left_out": left_out}
        if ranked is None:
            candidates = flatten(results, None)
            passthrough = [
                RankedRow(candidates.source_ids[s], row, 0.0, i + 1, int(r))
                for i, (s, r, row) in enumerate(
                    zip(
                        candidates.source_index.tolist(),
                        candidates.source_rank.tolist(),
                        candidates.rows,
                        strict=True,
                    )
                )
            ]
            return BasicSynthesizer().merge(results), passthrough, cut_info
        merged: dict[str, list[dict[str, Any]]] = {
            r.source_id: [] for r in results if r.error is None
        }
        for ranked_row in ranked:
            merged[ranked_row.source_id].append(ranked_row.row)
        return merged, ranked, cut_info

    # --- the pass ----------------------------------------------------------------------

    def _rank(
        self, results: list[AdapterResult], context: Mapping[str, Any] | None
    ) -> list[RankedRow] | None:
        warnings = RankWarnings()
        try:
            return self._pass(results, context, warnings)
        finally:
            warnings.emit()

    def _pass(
        self,
        results: list[AdapterResult],
        context: Mapping[str, Any] | None,
        warnings: RankWarnings,
    ) -> list[RankedRow] | None:
        ctx: Mapping[str, Any] = context if isinstance(context, Mapping) else {}
        query, query_in_embedder_space = query_vector(self.embedder, self.idf, ctx, warnings)
        if query is None:
            return None
        cands = flatten(results, warnings)
        level_weights = [
            weights_for(self.source_boosts.get(s.lower()) if isinstance(s, str) else None)
            for s in cands.source_ids
        ]
        multipliers = np.array([w.multiplier for w in level_weights] or [1.0])
        bumps = np.array([w.bump for w in level_weights] or [0.0])

        ranks = cands.source_rank.astype(np.float64)
        keys: FloatArray = stage1_key(ranks, multipliers[cands.source_index])
        if not cands.rows:
            return []
        texts_all = row_texts(cands.rows, warnings) if self.idf else None
        # Content is lexical when the query is in a lexical embedder's space: content then
        # sees words only, and cannot judge a semantic index's order (detection, fusion).
        lexical_content = is_token_embedder(self.embedder) and (
            query_in_embedder_space
            or isinstance(query, TokensToWeight)
            or query.shape[0] == getattr(self.embedder, "dim", None)
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
        if self.max_candidates is not None and len(cands.rows) > self.max_candidates:
            kept = cap(cands, keys, self.max_candidates)
            reference = cap(cands, stage1_key(ranks), self.max_candidates)
            scored = np.union1d(kept, reference)  # sorted positions into the whole union
            sub = cands.take(scored)
            where_ref = np.searchsorted(scored, reference)
        n = len(scored)

        factors = np.ones(n, dtype=np.float64)
        texts: list[str] | None = None
        batch: TokenBatch | None = None
        raw_query = ctx.get("query")
        # The opt-in lexical scorer (lexical="bm25"): BM25 over the batch, for the lexical
        # content of text mode (a query nautilus embedded with its lexical embedder). Rows
        # carrying their own vectors in the embedder's space keep the vector path.
        use_bm25 = (
            self.lexical == "bm25"
            and lexical_content
            and (query_in_embedder_space or isinstance(query, TokensToWeight))
            and not _own_vectors(sub, getattr(self.embedder, "model_id", None))
        )
        query_tokens = (
            tokenize(raw_query[:MAX_TEXT_CHARS] if isinstance(raw_query, str) else "")
            if self.idf or not is_token_embedder(self.embedder) or use_bm25
            else []
        )
        weights: dict[str, float] = {}  # the query's IDF weights (none without IDF)
        if texts_all is not None:
            texts = texts_all if sub is cands else [texts_all[i] for i in scored.tolist()]
        if self.idf and texts_all is not None and texts is not None and not use_bm25:
            batch = TokenBatch.from_texts(texts)
            ref_batch = (
                batch
                if len(reference) == n
                else TokenBatch.from_texts([texts_all[i] for i in reference.tolist()])
            )
            weights = query_token_weights(ref_batch, query_tokens)
            if isinstance(query, TokensToWeight):
                # A lexical embedder weights the query's own tokens: hubs fade from it.
                query = weighted_query(self.embedder, query.tokens, weights, warnings)
                if query is None:
                    return None
            else:
                factors = idf_factors(batch, weights, IDF_FLOOR)
        if use_bm25:  # BM25 needs no query vector: the query's tokens are scored directly
            if texts is None:
                texts = row_texts(sub.rows, warnings)
            if batch is None:
                batch = TokenBatch.from_texts(texts)
            doc = self._documents(cands, texts if n == len(cands.rows) else None, batch)
            similarity = lexical.bm25_scores(
                batch, query_tokens, _each_document_once(doc[scored], where_ref), self.idf
            )
            factors = np.ones(n, dtype=np.float64)
        else:
            # Only an IDF pass defers the query's embedding, and the pass above resolved it.
            assert not isinstance(query, TokensToWeight)
            similarity, texts, batch = similarities(
                sub, self.embedder, query, query_in_embedder_space, texts, batch, warnings
            )
            doc = self._documents(cands, texts if n == len(cands.rows) else None, batch)
        content_similarity = similarity * factors
        # Beside a model's semantic similarity, a lexical one for every row (a lexical
        # embedder's similarity is that already): content then combines both.
        lexical_score: FloatArray | None = None
        if query_tokens and not is_token_embedder(self.embedder):
            if batch is None:
                batch = TokenBatch.from_texts(
                    texts if texts is not None else row_texts(sub.rows, warnings)
                )
            # (BM25 here measured 0.0008 below it on the mean of the onnx cells: not taken)
            lexical_score = lexical_similarities(batch, query_tokens, weights)

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
        # Stage 2: a boost adds a signed share of the spread of the batch's unboosted
        # relevance, decayed by the row's place in its source; both read from unboosted
        # relevance and the reference rows, so a boost never changes another row's bump.
        bump: FloatArray = stage2_bumps(relevance, sub.source_index, sub_doc, where_ref, bumps)
        unboosted = (
            unboosted_places(relevance, sub.source_index, sub.source_rank, sub_doc, where_ref)
            if bumps.any()
            else np.zeros(n, dtype=np.int64)
        )
        scores = Scores(
            score=relevance + bump,
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
        limit = self.top_k
        if len(kept) < len(cands.rows):
            limit = len(kept) if limit is None else min(limit, len(kept))
        spread = None
        if (
            self.near_duplicates is not None
            or self.diversity is not None
            or self.max_per_source is not None
        ):
            built = texts if texts is not None and len(texts) == n else None

            def texts_of(at: list[int]) -> list[str]:
                if built is not None:
                    return [built[i] for i in at]
                return row_texts([sub.rows[i] for i in at], RankWarnings())

            spread = Spread(
                self.near_duplicates,
                self.diversity,
                self.max_per_source,
                self.page_size,
                texts_of,
                batch if batch is not None and batch.n_texts == n else None,
            )
        return select(sub, scores, limit, spread)

    def _documents(
        self, cands: Candidates, texts: list[str] | None, batch: TokenBatch | None
    ) -> IntArray:
        """The document number of every candidate (copies share one): by ``dedup_key``,
        else by canonical text, found from the row texts and tokens already built
        (``texts``/``batch``: of every candidate, in order, when the pass built them)."""
        if self.dedup_key is not None:
            return copies.document_numbers_by_key(cands.rows, self.dedup_key, NOT_TEXT)
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
