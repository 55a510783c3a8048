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
5. content similarity = cosine × the batch-local IDF factor (when on); relevance
   = the content vote (normalised similarity) plus the sources' votes (``fusion.py``);
6. stage 2 — ``score = relevance + bump`` of the row's source level, the bump a share
   of the row's source votes only (never of its content vote);
7. sort by (score desc, routing index, source_rank), collapse copies, keep ``top_k``
   (and at most ``max_candidates``).

It never raises on bad input: each kind of problem is one structured warning per
call, and the affected rows are scored without the broken part (or the call
falls back to passthrough). Rows are never mutated.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from itertools import repeat, starmap
from operator import is_not, methodcaller
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from nautilus.embedders import (
    Embedder,
    HashingEmbedder,
    SparseVector,
    embed_texts,
    embedder_from_name,
    is_token_embedder,
)
from nautilus.models import AdapterResult, RankedRow
from nautilus.ranking_boost import BOOST_LEVELS, stage1_key, stage2_bump, weights_for
from nautilus.rows import mapping_problem, source_ranks_problem
from nautilus.synthesis import copies, fusion
from nautilus.synthesis.basic import BasicSynthesizer
from nautilus.text import (
    IDF_FLOOR,
    TokenBatch,
    idf_factors,
    query_token_weights,
    tokenize,
)

if TYPE_CHECKING:
    from nautilus.config import NautilusSettings
from nautilus.log import get_logger

logger = get_logger("nautilus.ranking")

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
#: A query vector: dense (given by the caller, or from a dense embedder) or sparse
#: (a lexical embedder's few hashed features out of 65,536 dimensions).
QueryVector = FloatArray | SparseVector

#: A row's text is cut to this many characters before tokenising or embedding,
#: so one 1 MB field cannot stall a request; the cut is logged.
MAX_TEXT_CHARS = 20_000
#: Below this many matrix entries a matrix-vector product is an ``einsum`` on this
#: thread, not a BLAS call: OpenBLAS splits even a 40 × 384 ``gemv`` over all
#: cores, and under load its threads wait for each other (milliseconds, not µs).
_BLAS_MIN_ENTRIES = 1 << 20
#: Rows converted to float64 at a time for the cosine products (256 × 384 floats:
#: 768 KB, within the L2 cache).
_BLOCK_ROWS = 256
_VECDOT: Any = getattr(np, "vecdot", None)  # numpy >= 2.0
#: Fields that describe a row's vector, not its content.
_NOT_TEXT = frozenset({"embedding", "embedding_model"})
_EMBEDDING_OF = methodcaller("get", "embedding")
_IS_STR = str.__instancecheck__  # a C-level predicate for filter()


@dataclass(frozen=True)
class _TokensToWeight:
    """A lexical embedder's query not embedded yet: its tokens, to embed once with the
    batch's IDF weights (embedding it plainly first would be thrown away)."""

    tokens: list[str]


@dataclass
class _Matrices:
    """Vectors handed over as matrices (``AdapterResult.embeddings``): for each
    candidate, which matrix holds its vector (-1: none) and at which row."""

    parts: list[tuple[Any, int]]  # (the matrix as given, how many rows its source gave)
    matrix_of: IntArray
    row_in: IntArray

    @classmethod
    def build(cls, parts: list[tuple[int, Any, int, IntArray]], n: int) -> _Matrices | None:
        """From (first candidate, matrix, rows given, row of each kept row) per source."""
        if not parts:
            return None
        matrix_of = np.full(n, -1, dtype=np.int64)
        row_in = np.zeros(n, dtype=np.int64)
        for m, (offset, _, _, rows) in enumerate(parts):
            matrix_of[offset:offset + len(rows)] = m
            row_in[offset:offset + len(rows)] = rows
        return cls([(matrix, given) for _, matrix, given, _ in parts], matrix_of, row_in)


@dataclass
class _Candidates:
    """The flattened batch: parallel arrays, one entry per candidate row."""

    source_ids: list[str]          # routing order
    source_index: IntArray
    source_rank: IntArray
    rows: list[dict[str, Any]]
    matrices: _Matrices | None = None
    plain: bool = False  # every row is a plain dict (no subclass): C-level dict.get is safe

    def take(self, keep: IntArray) -> _Candidates:
        matrices = self.matrices
        if matrices is not None:
            matrices = _Matrices(matrices.parts, matrices.matrix_of[keep], matrices.row_in[keep])
        return _Candidates(self.source_ids, self.source_index[keep], self.source_rank[keep],
                           [self.rows[i] for i in keep], matrices, self.plain)


@dataclass
class _Scores:
    """The score of each candidate and its components (fusion.py), parallel arrays."""

    score: FloatArray
    similarity: FloatArray
    factor: FloatArray
    key: FloatArray
    bump: FloatArray
    relevance: FloatArray
    content: FloatArray
    content_rank: IntArray
    evidence: FloatArray
    voters: IntArray
    weight: FloatArray
    doc: IntArray
    unranked: FloatArray
    content_weight: FloatArray


class RankingSynthesizer:
    """Ranks the union of every source's rows; see the module docstring for the steps."""

    def __init__(self, top_k: int | None = None, idf: bool = False,
                 source_boosts: Mapping[str, str] | None = None,
                 embedder: Embedder | None = None, max_candidates: int | None = None,
                 dedup_key: str | None = None, idf_floor: float = IDF_FLOOR) -> None:
        for name, value in (("top_k", top_k), ("max_candidates", max_candidates)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                                      or value < 1):
                raise ValueError(f"{name} must be an integer >= 1 or None, got {value!r}")
        boosts = {str(k).lower(): str(v).lower() for k, v in (source_boosts or {}).items()}
        unknown = {lvl for lvl in boosts.values() if lvl not in BOOST_LEVELS}
        if unknown:
            raise ValueError(f"unknown boost level(s) {sorted(unknown)} "
                             f"(valid: {', '.join(BOOST_LEVELS)})")
        self.top_k = top_k
        self.idf = bool(idf)
        self.source_boosts = boosts
        self.embedder: Embedder = embedder if embedder is not None else HashingEmbedder()
        self.max_candidates = max_candidates
        if (not isinstance(idf_floor, int | float) or isinstance(idf_floor, bool)
                or not 0.0 <= idf_floor <= 1.0):  # also rejects NaN
            raise ValueError(f"idf_floor must be a number in [0, 1], got {idf_floor!r}")
        self.dedup_key = dedup_key
        self.idf_floor = float(idf_floor)

    @classmethod
    def from_settings(cls, settings: NautilusSettings,
                      embedder: Embedder | None = None) -> RankingSynthesizer:
        return cls(top_k=settings.ranking_top_k, idf=settings.ranking_idf,
                   source_boosts=settings.source_boosts,
                   embedder=embedder or embedder_from_name(
                       settings.embedder, cache_size=settings.embedder_cache_size),
                   max_candidates=settings.ranking_max_candidates,
                   dedup_key=settings.ranking_dedup_key)

    # --- public API ------------------------------------------------------------------

    def merge(self, results: list[AdapterResult],
              context: Mapping[str, Any] | None = None) -> dict[str, list[dict[str, Any]]]:
        """``{source_id: rows}``: every successful source keeps its key; within a
        source, rows in global rank order; rows below the top K are dropped."""
        return self.merge_ranked(results, context)[0]

    def rank(self, results: list[AdapterResult],
             context: Mapping[str, Any] | None = None) -> list[RankedRow]:
        """Every surviving row, best first. Without a query vector: passthrough order."""
        return self.merge_ranked(results, context)[1]

    def merge_ranked(self, results: list[AdapterResult], context: Mapping[str, Any] | None = None,
                     ) -> tuple[dict[str, list[dict[str, Any]]], list[RankedRow]]:
        """``merge`` and ``rank`` from one pass (what the broker calls)."""
        ranked = self._rank(results, context)
        if ranked is None:
            candidates = self._flatten(results, warn=False)
            passthrough = [
                RankedRow(candidates.source_ids[s], row, 0.0, i + 1, int(r))
                for i, (s, r, row) in enumerate(zip(candidates.source_index.tolist(),
                                                    candidates.source_rank.tolist(),
                                                    candidates.rows, strict=True))]
            return BasicSynthesizer().merge(results), passthrough
        merged: dict[str, list[dict[str, Any]]] = {
            r.source_id: [] for r in results if r.error is None}
        for ranked_row in ranked:
            merged[ranked_row.source_id].append(ranked_row.row)
        return merged, ranked

    # --- the pass ----------------------------------------------------------------------

    def _rank(self, results: list[AdapterResult],
              context: Mapping[str, Any] | None) -> list[RankedRow] | None:
        ctx: Mapping[str, Any] = context if isinstance(context, Mapping) else {}
        query, query_in_embedder_space = self._query_vector(ctx)
        if query is None:
            return None
        cands = self._flatten(results, warn=True)
        n_sources = len(cands.source_ids)
        level_weights = [weights_for(self.source_boosts.get(s.lower()) if isinstance(s, str)
                                     else None) for s in cands.source_ids]
        multipliers = np.array([w.multiplier for w in level_weights] or [1.0])
        bumps = np.array([w.bump for w in level_weights] or [0.0])

        ranks = cands.source_rank.astype(np.float64)
        keys: FloatArray = stage1_key(ranks, multipliers[cands.source_index])
        if not cands.rows:
            return []
        texts_all = self._texts(cands.rows) if self.idf else None
        declared = fusion.unranked_by_key_order(self._declared(results, cands.source_ids),
                                                cands.rows, cands.source_index)
        # Stage 1: the cap keeps rows by the boosted key; the statistics come from the rows
        # it keeps without boosts (the reference), which no boost can change.
        everyone = np.arange(len(cands.rows))
        kept = reference = scored = where_ref = everyone
        sub = cands
        if self.max_candidates is not None and len(cands.rows) > self.max_candidates:
            kept = self._cap(cands, keys)
            reference = self._cap(cands, stage1_key(ranks))
            scored = np.union1d(kept, reference)  # sorted positions into the whole union
            sub = cands.take(scored)
            where_ref = np.searchsorted(scored, reference)
        n = len(scored)

        factors = np.ones(n, dtype=np.float64)
        texts: list[str] | None = None
        batch: TokenBatch | None = None
        if self.idf and texts_all is not None:
            texts = texts_all if sub is cands else [texts_all[i] for i in scored.tolist()]
            batch = TokenBatch.from_texts(texts)
            ref_batch = batch if len(reference) == n else TokenBatch.from_texts(
                [texts_all[i] for i in reference.tolist()])
            raw_query = ctx.get("query")
            query_tokens = tokenize(raw_query[:MAX_TEXT_CHARS] if isinstance(raw_query, str)
                                    else "")
            weights = query_token_weights(ref_batch, query_tokens)
            if isinstance(query, _TokensToWeight):
                # A lexical embedder weights the query's own tokens: hubs fade from it.
                query = self._weighted_query(query.tokens, weights)
                if query is None:
                    return None
            else:
                factors = idf_factors(batch, weights, self.idf_floor)
        # Only an IDF pass defers the query's embedding, and the pass above resolved it.
        assert not isinstance(query, _TokensToWeight)
        similarity, texts, batch = self._similarities(sub, query, query_in_embedder_space,
                                                      texts, batch)
        doc = self._documents(cands, texts if n == len(cands.rows) else None, batch)
        content_similarity = similarity * factors

        # Fusion: which sources are ranked (declared, else detected on the reference rows),
        # their votes for each document over the whole union, how much content counts in
        # this batch (from how many documents the ranked sources share), the content vote
        # (by normalised similarity), and the votes standing in for unranked sources' orders.
        sub_doc = doc[scored]
        source_weight, _ = fusion.source_weights(
            sub.source_index[where_ref], sub.source_rank[where_ref],
            content_similarity[where_ref], declared, sub_doc[where_ref], factors[where_ref])
        evidence_all, voters_all = fusion.source_evidence(
            doc, cands.source_index, cands.source_rank, source_weight)
        weight = fusion.content_weight(doc, cands.source_index, source_weight)
        voters = voters_all[scored]
        content_rank = fusion.content_ranks(content_similarity, sub_doc, where_ref)
        content = fusion.content_vote(
            fusion.normalised_similarity(content_similarity, sub_doc, where_ref), weight=weight)
        unranked = fusion.unranked_votes(content_similarity, sub_doc, sub.source_index,
                                         where_ref, source_weight, voters, weight)
        evidence = evidence_all[scored]
        relevance = content + evidence + unranked
        votes = evidence + unranked
        # Stage 2: a boost scales the row's source votes only, never its content vote, so
        # a content lead larger than the bump of those votes survives every level.
        bump: FloatArray = stage2_bump(votes, bumps[sub.source_index] if n_sources
                                       else np.zeros(n))
        scores = _Scores(relevance + bump, similarity, factors, keys[scored], bump, relevance,
                         content, content_rank, evidence, voters,
                         source_weight[sub.source_index], sub_doc, unranked,
                         np.full(n, weight))
        # Every row scored stays a candidate: the rows the cap keeps without boosts (the
        # reference) too, so a boost can let rows in but never push a better one out.
        # At most max_candidates rows leave, best first, as without the reference.
        limit = self.top_k
        if len(kept) < len(cands.rows):
            limit = len(kept) if limit is None else min(limit, len(kept))
        return self._select(sub, scores, limit)

    def _cap(self, cands: _Candidates, keys: FloatArray) -> IntArray:
        """Positions of the ``max_candidates`` best rows by ``keys`` (ascending positions)."""
        order = np.lexsort((cands.source_rank, cands.source_index, -keys))
        return np.sort(order[: self.max_candidates])

    @staticmethod
    def _declared(results: list[AdapterResult], source_ids: list[str]) -> list[bool | None]:
        """Each source's own word on whether its order is relevance (AdapterResult.ranked)."""
        said: dict[str, bool] = {}
        for result in results:
            ranked = getattr(result, "ranked", None)
            if result.error is None and isinstance(ranked, bool):
                said.setdefault(result.source_id, ranked)
        return [said.get(sid) for sid in source_ids]

    def _flatten(self, results: list[AdapterResult], warn: bool) -> _Candidates:
        source_ids: list[str] = []
        position: dict[str, int] = {}
        next_rank: list[int] = []
        index_parts: list[IntArray] = []
        rank_parts: list[IntArray] = []
        rows: list[dict[str, Any]] = []
        matrix_parts: list[tuple[int, Any, int, IntArray]] = []
        not_a_dict = 0
        plain = True
        for result in results:
            if result.error is not None:
                continue
            sid = result.source_id
            if sid not in position:
                position[sid] = len(source_ids)
                source_ids.append(sid)
                next_rank.append(1)
            index = position[sid]
            source_rows = result.rows if isinstance(result.rows, list) else []
            if warn and not isinstance(result.rows, list):
                logger.warning("rank_rows_not_a_list", source_id=sid,
                               type=type(result.rows).__name__)
            start, given = next_rank[index], len(source_rows)
            ranks = self._source_ranks(result, given, warn)
            positions = ranks + (start - 1)
            at = np.arange(given, dtype=np.int64)  # where each kept row is in result.rows
            is_dict = [] if set(map(type, source_rows)) <= {dict} else [  # plain dicts: fast
                type(row) is dict or (isinstance(row, dict) and mapping_problem(row) is None)
                for row in source_rows]
            plain = plain and not is_dict
            if not all(is_dict):
                not_a_dict += is_dict.count(False)
                keep = np.array(is_dict, dtype=bool)
                positions, at = positions[keep], at[keep]
                source_rows = [row for row, ok in zip(source_rows, is_dict, strict=True) if ok]
            if result.embeddings is not None:
                matrix_parts.append((len(rows), result.embeddings, given, at))
            rows.extend(source_rows)
            index_parts.append(np.full(len(source_rows), index, dtype=np.int64))
            rank_parts.append(positions)
            # ranks count the rows left out too (here, and by the broker: source_ranks)
            next_rank[index] = start + (int(ranks[-1]) if given else 0)
        if warn and not_a_dict:
            logger.warning("rank_row_not_a_dict", count=not_a_dict,
                           reason="not a dict, or a dict subclass whose methods fail",
                           action="left out of the ranking")
        empty = np.zeros(0, dtype=np.int64)
        return _Candidates(source_ids, np.concatenate(index_parts) if index_parts else empty,
                           np.concatenate(rank_parts) if rank_parts else empty, rows,
                           _Matrices.build(matrix_parts, len(rows)), plain)

    @staticmethod
    def _source_ranks(result: AdapterResult, given: int, warn: bool) -> IntArray:
        """Each given row's 1-based position in its source's own answer: the result's
        ``source_ranks`` when usable, else ``1..given`` (warned about when not)."""
        said = getattr(result, "source_ranks", None)
        if said is not None:
            problem = source_ranks_problem(said, given)
            if problem is None:
                ranks: IntArray = np.asarray(said, dtype=np.int64)
                return ranks
            if warn:
                logger.warning("rank_source_ranks_invalid", source_id=result.source_id,
                               reason=problem, action="rows ranked in the order given")
        return np.arange(1, given + 1, dtype=np.int64)

    def _query_vector(self, ctx: Mapping[str, Any],
                      ) -> tuple[QueryVector | _TokensToWeight | None, bool]:
        """(query vector, whether it is in the embedder's own space). With IDF on, a lexical
        embedder's query is left as its tokens, to embed once with the batch's weights: a
        query with tokens always embeds to a usable vector (see :meth:`_weighted_query`)."""
        given = ctx.get("embedding")
        if given is not None:
            vector = _as_vector(given)
            if vector is not None:
                return vector, False
            logger.warning("rank_query_vector_invalid", reason=_vector_problem(given),
                           action="embedding the query text instead")
        query = ctx.get("query")
        if not isinstance(query, str) or not query.strip():
            logger.warning("rank_no_query_vector",
                           reason="context has neither a usable 'embedding' nor a 'query'",
                           action="passthrough")
            return None, True
        try:
            embedder = self.embedder
            if is_token_embedder(embedder):  # a sparse vector: no list of 65,536 floats
                tokens = tokenize(query[:MAX_TEXT_CHARS])
                if self.idf and tokens:
                    return _TokensToWeight(tokens), True
                vector = _as_vector(embedder.embed_query(tokens, {}))
            else:
                vector = _as_vector(embedder.embed(query[:MAX_TEXT_CHARS]))
        except Exception as exc:  # an embedder is third-party code: never let it fail a request
            logger.warning("rank_embedder_failed", target="query", error_type=type(exc).__name__,
                           error=str(exc)[:200], action="passthrough")
            return None, True
        if vector is None:
            logger.warning("rank_query_vector_invalid", reason="the embedder gave no usable vector",
                           action="passthrough")
        return vector, True

    def _weighted_query(self, tokens: list[str],
                        weights: Mapping[str, float]) -> QueryVector | None:
        """The query's tokens embedded with these weights (its plain vector if the weighted
        one is unusable); None, with a warning, when the embedder fails or gives nothing."""
        embedder = self.embedder
        if not is_token_embedder(embedder):
            return None
        try:
            vector = _as_vector(embedder.embed_query(tokens, weights))
            if vector is None and weights:
                vector = _as_vector(embedder.embed_query(tokens, {}))
        except Exception as exc:  # an embedder is third-party code: never let it fail a request
            logger.warning("rank_embedder_failed", target="query", error_type=type(exc).__name__,
                           error=str(exc)[:200], action="passthrough")
            return None
        if vector is None:
            logger.warning("rank_query_vector_invalid", reason="the embedder gave no usable vector",
                           action="passthrough")
        return vector

    def _similarities(self, cands: _Candidates, query: QueryVector, query_in_embedder_space: bool,
                      texts: list[str] | None, batch: TokenBatch | None,
                      ) -> tuple[FloatArray, list[str] | None, TokenBatch | None]:
        """Cosine similarity of each candidate to the query; and every candidate's text
        and tokens, when they were given or built here (else None).

        ``texts``/``batch``: every candidate's text and tokens when already built."""
        n = len(cands.rows)
        dim = query.shape[0]
        query_unit = _unit(query)
        similarity = np.zeros(n, dtype=np.float64)
        own_model = getattr(self.embedder, "model_id", None) if query_in_embedder_space else None

        with_vector, sims, invalid = _vector_similarities(cands, query_unit, own_model)
        similarity[with_vector] = sims
        if invalid:
            logger.warning("rank_row_vector_invalid", count=invalid,
                           reason=f"not a finite numeric vector of dimension {dim}",
                           action="embedding the row's text instead")
        has_vector = np.zeros(n, dtype=bool)
        has_vector[with_vector] = True
        to_embed = np.flatnonzero(~has_vector)
        if len(to_embed):
            covers_all = texts is not None
            if texts is None:
                texts = self._texts([cands.rows[i] for i in to_embed.tolist()])
                batch = (TokenBatch.from_texts(texts)
                         if is_token_embedder(self.embedder) else None)
            similarity[to_embed] = self._embed_rows(texts, batch, to_embed, covers_all,
                                                    query_unit, query_in_embedder_space)
            if not covers_all and len(to_embed) < n:  # texts of some candidates only
                texts, batch = None, None
        if not np.isfinite(similarity).all():  # (nan_to_num alone costs ~10 µs a request)
            similarity = np.nan_to_num(similarity, nan=0.0, posinf=0.0, neginf=0.0)
        return similarity, texts, batch

    def _embed_rows(self, texts: list[str], batch: TokenBatch | None, to_embed: IntArray,
                    texts_cover_all: bool, query_unit: QueryVector,
                    query_in_embedder_space: bool) -> FloatArray:
        """Similarity of the rows in ``to_embed`` through the embedder; zeros where it fails."""
        dim = query_unit.shape[0]
        zeros = np.zeros(len(to_embed), dtype=np.float64)
        embedder_dim = getattr(self.embedder, "dim", None)
        if not query_in_embedder_space and embedder_dim is not None and embedder_dim != dim:
            logger.warning("rank_row_vector_missing", count=len(to_embed),
                           reason=f"query vector has dimension {dim}, the embedder {embedder_dim}",
                           action="scored 0")
            return zeros
        try:
            embedder = self.embedder
            if is_token_embedder(embedder) and batch is not None:
                rows = embedder.embed_tokens(batch)
                sims = (rows.dot_sparse(query_unit) if isinstance(query_unit, SparseVector)
                        else rows.dot(query_unit))
                return sims[to_embed] if texts_cover_all else sims
            picked = [texts[i] for i in to_embed] if texts_cover_all else texts
            matrix = embed_texts(self.embedder, picked)
            if matrix.shape != (len(picked), dim):
                raise ValueError(f"embedder returned shape {matrix.shape}, "
                                 f"expected {(len(picked), dim)}")
        except Exception as exc:
            logger.warning("rank_embedder_failed", target="rows", count=len(to_embed),
                           error_type=type(exc).__name__, error=str(exc)[:200],
                           action="those rows scored 0")
            return zeros
        norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix))
        finite = np.isfinite(norms) & (norms > 0)
        similarity: FloatArray = np.divide(_matvec(matrix, query_unit), norms, out=zeros,
                                           where=finite)
        return similarity

    def _documents(self, cands: _Candidates, texts: list[str] | None,
                   batch: TokenBatch | None) -> IntArray:
        """The document number of every candidate (copies share one): by ``dedup_key``,
        else by canonical text, found from the row texts and tokens already built
        (``texts``/``batch``: of every candidate, in order, when the pass built them)."""
        if self.dedup_key is not None:
            return fusion.document_numbers(cands.rows, self.dedup_key, _NOT_TEXT)
        return copies.document_numbers(cands.rows, _NOT_TEXT, texts, batch, MAX_TEXT_CHARS,
                                       plain=cands.plain)

    def _texts(self, rows: list[dict[str, Any]]) -> list[str]:
        # A row's text is its string values; "embedding" is never a string, so only
        # rows naming their vector's model need the slower, key-aware join.
        texts = [" ".join(filter(_IS_STR, row.values())) if "embedding_model" not in row
                 else " ".join(v for k, v in row.items() if _IS_STR(v) and k not in _NOT_TEXT)
                 for row in rows]
        long_rows = [i for i, t in enumerate(texts) if len(t) > MAX_TEXT_CHARS]
        if long_rows:
            logger.warning("rank_row_text_truncated", count=len(long_rows),
                           limit_chars=MAX_TEXT_CHARS, action="scored on the first part")
            for i in long_rows:
                texts[i] = texts[i][:MAX_TEXT_CHARS]
        return texts

    def _select(self, cands: _Candidates, scores: _Scores,
                top_k: int | None) -> list[RankedRow]:
        """The best ``top_k`` rows (all when None), copies collapsed."""
        score = scores.score
        at: IntArray | None = None
        if top_k is not None and top_k < len(score) and fusion.every_row_its_document(scores.doc):
            # No copies to collapse: only the rows scoring at least the top_k-th best score
            # (ties included) can be placed; sort those (a partition, not a 10k-row lexsort)
            at = np.flatnonzero(score >= np.partition(score, len(score) - top_k)[-top_k])
        if at is None or len(at) < (top_k or 0):  # (fewer only if a score were NaN)
            order = np.lexsort((cands.source_rank, cands.source_index, -score))
            order, also_from = self._dedup(cands, order, scores.doc)
        else:
            order = at[np.lexsort((cands.source_rank[at], cands.source_index[at], -score[at]))]
            also_from = {}
        if top_k is not None:
            order = order[:top_k]
        # Column by column (one ``tolist`` each, the same Python floats as ``float(x)``):
        # ~1.7 µs a row less than reading each row's 16 numbers from numpy one by one.
        places = order.tolist()
        sids = cands.source_ids
        s = _take_scores(scores, order)
        return list(starmap(RankedRow, zip(
            [sids[j] for j in cands.source_index[order].tolist()],
            [cands.rows[i] for i in places], s.score.tolist(), range(1, len(places) + 1),
            cands.source_rank[order].tolist(), s.similarity.tolist(), s.factor.tolist(),
            s.key.tolist(), s.bump.tolist(), [tuple(also_from.get(i, ())) for i in places],
            s.relevance.tolist(), s.content.tolist(), s.content_rank.tolist(),
            s.evidence.tolist(), s.voters.tolist(), s.weight.tolist(), s.unranked.tolist(),
            s.content_weight.tolist(), strict=True)))

    @staticmethod
    def _dedup(cands: _Candidates, order: IntArray,
               doc: IntArray) -> tuple[IntArray, dict[int, list[tuple[str, int]]]]:
        """Keep the best copy of each document (rows in ``order``, best first); record
        where the others came from."""
        first = np.zeros(len(doc), dtype=bool)
        _, where = np.unique(doc[order], return_index=True)
        first[where] = True
        if first.all():
            return order, {}
        kept = order[first]
        best_of: dict[int, int] = {}
        also_from: dict[int, list[tuple[str, int]]] = {}
        for i, is_first in zip(order.tolist(), first.tolist(), strict=True):
            d = int(doc[i])
            if is_first:
                best_of[d] = i
            else:
                also_from.setdefault(best_of[d], []).append(
                    (cands.source_ids[cands.source_index[i]], int(cands.source_rank[i])))
        return kept, also_from


def _take_scores(scores: _Scores, keep: IntArray) -> _Scores:
    return _Scores(*(getattr(scores, f)[keep] for f in _Scores.__dataclass_fields__))


def _as_vector(value: Any) -> QueryVector | None:
    """A finite, non-zero float64 vector (dense, or sparse as a lexical embedder gives), or None."""
    if _vector_problem(value) is not None:
        return None
    if isinstance(value, SparseVector):
        return value
    array = np.asarray(value, dtype=np.float64)
    peak = float(np.abs(array).max())
    # Only the direction counts: bring extreme magnitudes (1e200, 1e-200) into a range
    # where the squared norm neither overflows nor underflows.
    return array / peak if not 1e-100 < peak < 1e100 else array


def _unit(vector: QueryVector) -> QueryVector:
    """``vector / |vector|`` without BLAS (``np.linalg.norm`` of a long vector is a
    multi-threaded ``ddot``) and, for a sparse vector, without densifying it."""
    if isinstance(vector, SparseVector):
        return SparseVector(vector.dim, vector.columns, vector.values / vector.norm())
    unit: FloatArray = vector / math.sqrt(float(np.einsum("i,i", vector, vector)))
    return unit


def _matvec(matrix: npt.NDArray[np.floating[Any]], vector: QueryVector) -> FloatArray:
    """``matrix @ vector`` in float64; a BLAS call only for a large matrix (see
    ``_BLAS_MIN_ENTRIES``); a sparse vector touches only its own columns."""
    if isinstance(vector, SparseVector):
        product: FloatArray = np.einsum("ij,j->i", matrix[:, vector.columns], vector.values,
                                        dtype=np.float64)
        return product
    if matrix.size < _BLAS_MIN_ENTRIES or matrix.dtype != np.float64:
        product = np.einsum("ij,j->i", matrix, vector, dtype=np.float64)
        return product
    product = (matrix @ vector).astype(np.float64, copy=False)
    return product


def _dots_and_norms(blocks: Iterator[npt.NDArray[np.float64]], n: int,
                    query: QueryVector) -> tuple[FloatArray, FloatArray]:
    """(each row · ``query``, each row's norm) for ``n`` rows given as consecutive float64
    blocks, accumulated in float64.

    A row at a time (``np.vecdot``: one single-threaded ``ddot`` a row, with SIMD):
    about twice as fast as ``einsum``, and never a multi-threaded BLAS ``gemv``
    (see ``_BLAS_MIN_ENTRIES``), whatever the size."""
    dots = np.empty(n, dtype=np.float64)
    squares = np.empty(n, dtype=np.float64)
    start = 0
    for block in blocks:
        stop = start + len(block)
        if isinstance(query, SparseVector):
            dots[start:stop] = np.einsum("ij,j->i", block[:, query.columns], query.values)
        else:
            dots[start:stop] = _row_dot(block, query)
        squares[start:stop] = _row_dot(block, block)
        start = stop
    return dots, np.sqrt(squares, out=squares)


def _row_dot(a: FloatArray, b: FloatArray) -> FloatArray:
    """``a[i] · b[i]`` (``b`` broadcast) for each row ``i``: ``np.vecdot`` (numpy >= 2),
    else ``einsum``."""
    if _VECDOT is not None:
        out: FloatArray = _VECDOT(a, b)
        return out
    out = np.einsum("ij,ij->i" if b.ndim == 2 else "ij,j->i", a, b)
    return out


def _matrix_blocks(matrix: npt.NDArray[Any]) -> Iterator[npt.NDArray[np.float64]]:
    """``matrix`` as float64 blocks of ``_BLOCK_ROWS`` rows: views when it is float64
    already, else converted into one reused block (a block stays in the CPU cache, so
    the dots and the norms read it there, where a whole float64 copy would not fit;
    ``einsum(..., dtype=float64)`` casts through a small buffer, several times slower)."""
    if matrix.dtype == np.float64:
        for start in range(0, len(matrix), _BLOCK_ROWS):
            yield matrix[start:start + _BLOCK_ROWS]
        return
    buffer = np.empty((min(len(matrix), _BLOCK_ROWS), matrix.shape[1]), dtype=np.float64)
    for start in range(0, len(matrix), _BLOCK_ROWS):
        part = matrix[start:start + _BLOCK_ROWS]
        block = buffer[:len(part)]
        np.copyto(block, part, casting="unsafe")
        yield block


def _gathered_blocks(vectors: list[npt.NDArray[Any]],
                     dim: int) -> Iterator[npt.NDArray[np.float64]]:
    """Row vectors (1-d arrays of length ``dim``) gathered ``_BLOCK_ROWS`` at a time into
    one reused float64 block: no matrix of every row (10k × 384 floats is a 30 MB
    allocation, its pages faulted in on every call). Raises TypeError for a vector
    numpy does not cast to float64 by itself (object, complex)."""
    buffer = np.empty(min(len(vectors), _BLOCK_ROWS) * dim, dtype=np.float64)
    for start in range(0, len(vectors), _BLOCK_ROWS):
        part = vectors[start:start + _BLOCK_ROWS]
        flat = buffer[:len(part) * dim]
        np.concatenate(part, out=flat, casting="same_kind")
        yield flat.reshape(len(part), dim)


def _vector_problem(value: Any) -> str | None:
    if isinstance(value, SparseVector):
        values = value.values
        if not np.isfinite(values).all():
            return "holds NaN or infinity"
        return None if values.any() else "is all zeros"
    if not isinstance(value, list | tuple | np.ndarray):
        return f"not a list of numbers ({type(value).__name__})"
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        return "holds non-numeric values (or numbers beyond float64)"
    if array.ndim != 1 or array.size == 0:
        return f"not a flat vector (shape {array.shape})"
    if not np.isfinite(array).all():
        return "holds NaN or infinity"
    if not np.any(array):
        return "is all zeros"
    return None


def _vector_similarities(cands: _Candidates, query_unit: QueryVector, own_model: str | None,
                         ) -> tuple[IntArray, FloatArray, int]:
    """:func:`_row_vector_similarities`, with the rows whose source handed its vectors
    over as a matrix (``AdapterResult.embeddings``) scored from that matrix instead."""
    matrices = cands.matrices
    if matrices is None:
        return _row_vector_similarities(cands.rows, query_unit, own_model, cands.plain)
    positions, sims, invalid = _matrix_similarities(matrices, cands.rows, query_unit, own_model)
    rest = np.ones(len(cands.rows), dtype=bool)
    rest[positions] = False
    others = np.flatnonzero(rest)
    if len(others):
        found, other_sims, other_invalid = _row_vector_similarities(
            [cands.rows[i] for i in others.tolist()], query_unit, own_model, cands.plain)
        positions = np.concatenate((positions, others[found]))
        sims = np.concatenate((sims, other_sims))
        invalid += other_invalid
    return positions, sims, invalid


def _matrix_problem(matrix: Any, given: int, dim: int) -> str | None:
    if not isinstance(matrix, np.ndarray):
        return f"not a numpy array ({type(matrix).__name__})"
    if matrix.dtype.kind not in "fiu":
        return f"not numeric (dtype {matrix.dtype})"
    if matrix.shape != (given, dim):
        return f"shape {matrix.shape}, expected {(given, dim)} (rows given, query dimension)"
    return None


def _matrix_similarities(matrices: _Matrices, rows: list[dict[str, Any]],
                         query_unit: QueryVector, own_model: str | None,
                         ) -> tuple[IntArray, FloatArray, int]:
    """Cosine of each matrix-backed candidate to the query: (their positions, their
    similarities, how many matrix rows were not finite). A matrix of the wrong shape
    or kind is warned about once and its rows fall back to their own ``embedding``."""
    dim = query_unit.shape[0]
    found: list[IntArray] = []
    sims: list[FloatArray] = []
    invalid = 0
    for m, (matrix, given) in enumerate(matrices.parts):
        at = np.flatnonzero(matrices.matrix_of == m)
        if not len(at):
            continue
        problem = _matrix_problem(matrix, given, dim)
        if problem is not None:
            logger.warning("rank_embeddings_invalid", reason=problem,
                           action="using each row's own embedding or text instead")
            continue
        if own_model is not None:  # as for row vectors: another model's vectors are not used
            models = [rows[i].get("embedding_model", own_model) for i in at.tolist()]
            at = at[np.array([model == own_model for model in models], dtype=bool)]
        picked = matrices.row_in[at]
        whole = len(picked) == len(matrix) and bool((picked == np.arange(len(matrix))).all())
        part = matrix if whole else matrix[picked]
        with np.errstate(invalid="ignore", over="ignore"):
            dots, norms = _dots_and_norms(_matrix_blocks(part), len(part), query_unit)
        usable = np.isfinite(dots) & np.isfinite(norms)
        if not usable.all():  # NaN or infinity inside a vector: its row falls back
            invalid += int((~usable).sum())
            at, dots, norms = at[usable], dots[usable], norms[usable]
        found.append(at)
        sims.append(np.divide(dots, norms, out=np.zeros(len(dots)), where=norms > 0))
    if not found:
        return np.zeros(0, dtype=np.int64), np.zeros(0), invalid
    return np.concatenate(found), np.concatenate(sims), invalid


def _row_vector_similarities(rows: list[dict[str, Any]], query_unit: QueryVector,
                             own_model: str | None, plain: bool = False,
                             ) -> tuple[IntArray, FloatArray, int]:
    """Cosine of each row's own ``embedding`` to the query, for the rows whose vector
    is usable: (their positions, their similarities, how many vectors were invalid).

    A row's vector is skipped (re-embedded from its text) when it is missing, or
    when ``own_model`` is set and the row says another model made it. ``plain``: every
    row is known to be a plain dict.
    """
    dim = query_unit.shape[0]
    # map and C-level helpers: ~25 ns a row with dict.get, which only a plain dict may take
    # (a dict subclass may define its own get), ~100 ns through methodcaller
    values: list[Any] = (list(map(dict.get, rows, repeat("embedding")))
                         if plain or set(map(type, rows)) == {dict}
                         else list(map(_EMBEDDING_OF, rows)))
    types = set(map(type, values))
    present = [] if type(None) not in types else list(map(is_not, values, repeat(None)))
    if all(present):
        candidates = np.arange(len(rows), dtype=np.int64)
    else:
        candidates = np.flatnonzero(np.array(present, dtype=bool))
    if own_model is not None and len(candidates):
        models = [rows[i].get("embedding_model", own_model) for i in candidates.tolist()]
        candidates = candidates[np.array([m == own_model for m in models], dtype=bool)]
    if not len(candidates):
        return candidates, np.zeros(0), 0
    if len(candidates) == len(values):
        picked = values
    else:
        picked = [values[i] for i in candidates.tolist()]
        types = set(map(type, picked))
    products: tuple[FloatArray, FloatArray] | None = None
    invalid = 0
    with np.errstate(invalid="ignore", over="ignore"):  # non-finite rows are dropped next
        if types == {np.ndarray}:  # the fast path: no matrix of all rows
            try:  # a 0-d array has no len(); a vector that is not flat, or does not cast
                # to float64 by itself (object, complex), fails the gathering: the slow path
                if set(map(len, picked)) == {dim}:
                    products = _dots_and_norms(_gathered_blocks(picked, dim), len(picked),
                                               query_unit)
            except (ValueError, TypeError):
                products = None
        if products is None:
            matrix, ok = _stack(picked, dim)
            invalid = len(candidates) - int(ok.sum())
            matrix, candidates = matrix[ok], candidates[ok]
            products = _dots_and_norms(_matrix_blocks(matrix), len(matrix), query_unit)
    dots, norms = products
    usable = np.isfinite(dots) & np.isfinite(norms)
    if not usable.all():  # NaN or infinity inside a vector: its row falls back to its text
        invalid += int((~usable).sum())
        candidates, dots, norms = candidates[usable], dots[usable], norms[usable]
    sims: FloatArray = np.divide(dots, norms, out=np.zeros(len(dots)), where=norms > 0)
    return candidates, sims, invalid


def _stack(vectors: list[Any], dim: int) -> tuple[FloatArray, npt.NDArray[np.bool_]]:
    """Stack row vectors of any kind into a matrix; rows that do not fit are flagged."""
    matrix = np.zeros((len(vectors), dim), dtype=np.float64)
    ok = np.zeros(len(vectors), dtype=bool)
    try:
        if all(isinstance(v, list | tuple) and len(v) == dim for v in vectors):
            matrix = np.array(vectors, dtype=np.float64).reshape(len(vectors), dim)
            ok[:] = True
            return matrix, ok
    except (TypeError, ValueError, OverflowError):
        pass
    for i, vector in enumerate(vectors):
        if (not isinstance(vector, list | tuple | np.ndarray) or getattr(vector, "ndim", 1) != 1
                or len(vector) != dim):
            continue
        try:
            row = np.asarray(vector, dtype=np.float64)
        except (TypeError, ValueError, OverflowError):
            continue
        if row.shape == (dim,):
            matrix[i] = row
            ok[i] = True
    return matrix, ok
