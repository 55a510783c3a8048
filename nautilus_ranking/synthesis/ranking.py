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
5. content similarity = with the lexical embedder, BM25 over the batch's rows
   (``lexical.py``; ``lexical="cosine"``: its cosine × the batch-local IDF factor when
   on), else the cosine of the vectors (beside a lexical cosine); relevance
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
(4, 5; vector arithmetic in ``vectors``), ``fusion`` (5, 6), ``select`` (7);
``rank_pass`` calls them as a list of stages over one batch (``batch``: ``gather``,
``content``, ``votes``, ``batch_confidence``, ``bumps``, ``recency``, ``select``), and
this class holds the settings and the public API. It
never raises on bad input: each kind of problem is one structured warning per call,
collected by the stages and logged here once the pass is over (``rank_warnings``), and
the affected rows are scored without the broken part (or the call falls back to
passthrough). Rows are never mutated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from nautilus_ranking.embedders import Embedder, HashingEmbedder, embedder_from_name
from nautilus_ranking.records import AdapterResult, RankedRow
from nautilus_ranking.selection.cut import RelevanceCut, parse_cut, relevance_cut
from nautilus_ranking.settings.knobs import ranker_arguments
from nautilus_ranking.settings.parsing import (
    LEXICAL_SCORERS,
    parse_diversity,
    parse_near_duplicates,
)
from nautilus_ranking.settings.time_entries import Recency, recency_of
from nautilus_ranking.synthesis.basic import BasicSynthesizer
from nautilus_ranking.synthesis.candidates import flatten
from nautilus_ranking.synthesis.rank_pass import rank_pass
from nautilus_ranking.synthesis.rank_warnings import RankWarnings
from nautilus_ranking.synthesis.ranking_boost import BOOST_LEVELS
from nautilus_ranking.synthesis.ranking_result import PassNotes, RankingResult

if TYPE_CHECKING:
    from nautilus_ranking.selection.confidence import Confidence, Fit
    from nautilus_ranking.settings.model import NautilusSettings


def _check_counts(**counts: int | None) -> None:
    """Each count is an integer >= 1 or None (a bool is no count): a caller's mistake
    is refused when the synthesizer is made, not found mid-request."""
    for name, value in counts.items():
        if value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or value < 1
        ):
            raise ValueError(f"{name} must be an integer >= 1 or None, got {value!r}")


def _boost_levels(source_boosts: Mapping[str, str] | None) -> dict[str, str]:
    """The boosts by lower-case source id and level (ids match case-blind, as the
    settings' do); an unknown level is refused."""
    boosts = {str(k).lower(): str(v).lower() for k, v in (source_boosts or {}).items()}
    unknown = {lvl for lvl in boosts.values() if lvl not in BOOST_LEVELS}
    if unknown:
        raise ValueError(
            f"unknown boost level(s) {sorted(unknown)} (valid: {', '.join(BOOST_LEVELS)})"
        )
    return boosts


def _parsed_recency(recency: Recency | str | None) -> Recency | None:
    """A recency decay given as the setting's text parsed as the setting is; a bad
    one is refused."""
    if not isinstance(recency, str):
        return recency
    parsed, problem = recency_of(recency)
    if problem is not None:
        raise ValueError(f"recency: {problem.reason}, got {recency!r} ({problem.valid})")
    return parsed


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
        lexical: str = "bm25",
        canonical_sources: Sequence[str] = (),
        embedding_deadline_ms: int = 0,
        embedding_max_rows: int = 0,
        recency: Recency | str | None = None,
        supersede: bool = False,
        time_fields: Mapping[str, str] | None = None,
        document_keys: Mapping[str, str] | None = None,
        may_revise: Mapping[str, Sequence[str]] | None = None,
        confidence_fits: Mapping[str, Fit] | None = None,
    ) -> None:
        _check_counts(
            top_k=top_k,
            max_candidates=max_candidates,
            max_per_source=max_per_source,
            page_size=page_size,
        )
        boosts = _boost_levels(source_boosts)
        if lexical not in LEXICAL_SCORERS:
            raise ValueError(
                f"unknown lexical scorer {lexical!r} (valid: {', '.join(LEXICAL_SCORERS)})"
            )
        self.top_k = top_k
        self.idf = bool(idf)
        #: The lexical content score of text mode: "bm25" over the batch (the default)
        #: or "cosine" (the hashing embedder's cosine, IDF-weighted with IDF on). Beside
        #: a model's vectors the lexical half is the cosine under either.
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
        #: The sources whose copy of a document is kept when copies collapse, first
        #: preferred (lower-cased, as boosts' ids); empty: the best-ranked copy.
        self.canonical_sources = tuple(str(s).strip().lower() for s in canonical_sources)
        #: The time a request's rows may take to embed with a model, in ms (0: no
        #: deadline); rows not reached are scored by words (synthesis/embedding_deadline.py).
        self.embedding_deadline_ms = max(0, int(embedding_deadline_ms))
        #: With a model, the rows of a batch it embeds: the best this many by the lexical
        #: score; the rest keep that score, on the model's scale (0: every row).
        self.embedding_max_rows = max(0, int(embedding_max_rows))
        #: The decay by age (synthesis/recency.py); None: time does not rank.
        self.recency: Recency | None = _parsed_recency(recency)
        #: Whether the newest revision of a document supersedes the older ones.
        self.supersede = bool(supersede)
        #: By lower-case source id: where a row's time is, and its document key (beside
        #: what each source's result says; these win).
        self.time_fields = {str(k).lower(): str(v) for k, v in (time_fields or {}).items()}
        self.document_keys = {str(k).lower(): str(v) for k, v in (document_keys or {}).items()}
        #: By lower-case source id: the other sources whose revisions its newer ones may
        #: supersede (both mapping a document key); a source always revises its own.
        self.may_revise = {
            str(k).lower(): frozenset(str(v).lower() for v in vs)
            for k, vs in (may_revise or {}).items()
        }
        #: A local fit of the confidence by scoring setup (``nautilus-ranking calibrate``,
        #: selection/local_fit.py); None: the fit shipped in the package.
        self.confidence_fits: Mapping[str, Fit] | None = (
            dict(confidence_fits) if confidence_fits is not None else None
        )

    @classmethod
    def from_settings(
        cls,
        settings: NautilusSettings,
        embedder: Embedder | None = None,
        page_size: int | None = None,
    ) -> RankingSynthesizer:
        # Each knob's ranker argument, from its declaration (settings/knobs.py).
        arguments = ranker_arguments(settings)
        return cls(
            **arguments,
            embedder=embedder
            or embedder_from_name(
                settings.resolved_embedder,
                cache_size=settings.embedder_cache_size,
                data_dir=settings.data_dir,
                disk_cache_mb=settings.embedder_disk_cache_mb,
            ),
            page_size=page_size,
        )

    def ranker_values(self) -> Mapping[str, Any]:
        """The arguments a settings object states as it was given them: the top K,
        IDF, boosts, the candidate cap and the copies' key (the others are held parsed
        here, in forms the settings do not take)."""
        return {
            "top_k": self.top_k,
            "idf": self.idf,
            "source_boosts": self.source_boosts,
            "max_candidates": self.max_candidates,
            "dedup_key": self.dedup_key,
        }

    # --- public API ------------------------------------------------------------------

    def merge(
        self, results: list[AdapterResult], context: Mapping[str, Any] | None = None
    ) -> dict[str, list[dict[str, Any]]]:
        """``{source_id: rows}``: every successful source keeps its key; within a
        source, rows in global rank order; rows below the top K are dropped."""
        return self.merge_ranked(results, context).data

    def rank(
        self, results: list[AdapterResult], context: Mapping[str, Any] | None = None
    ) -> list[RankedRow]:
        """Every surviving row, best first. Without a query vector: passthrough order."""
        return self.merge_ranked(results, context).ranking

    def merge_ranked(
        self,
        results: list[AdapterResult],
        context: Mapping[str, Any] | None = None,
    ) -> RankingResult:
        """``merge`` and ``rank`` from one pass, and what the pass found: what the
        relevance cut did (``{"setting": "gap:0.1", "rows_left_out": n}``, the rows of
        the top K it left out; None without a cut), the confidence, the embedding
        deadline's report and the time report."""
        notes = PassNotes()
        ranked = self._rank(results, context, notes)
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
            data = BasicSynthesizer().merge(results)
            return RankingResult(data, passthrough, cut_info, *_said(notes), rows_unchanged=True)
        merged: dict[str, list[dict[str, Any]]] = {
            r.source_id: [] for r in results if r.error is None
        }
        for ranked_row in ranked:
            merged[ranked_row.source_id].append(ranked_row.row)
        return RankingResult(merged, ranked, cut_info, *_said(notes), rows_unchanged=True)

    # --- the pass ----------------------------------------------------------------------

    def _rank(
        self, results: list[AdapterResult], context: Mapping[str, Any] | None, notes: PassNotes
    ) -> list[RankedRow] | None:
        warnings = RankWarnings()
        try:
            return rank_pass(self, results, context, warnings, notes)
        finally:
            warnings.emit()


def _said(
    notes: PassNotes,
) -> tuple[Confidence | None, dict[str, Any] | None, dict[str, Any] | None]:
    """What the pass's stages said: the confidence, the embedding and time reports."""
    return notes.confidence, notes.embedding, notes.time
