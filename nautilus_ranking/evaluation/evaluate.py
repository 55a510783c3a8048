"""``nautilus-ranking eval``: fetch every judged query once through the live broker, then score.

The broker is built exactly as ``nautilus-ranking query`` and the service build it
(``Broker.from_config`` with the current ``NAUTILUS_*`` settings); each query is
one ``broker.fetch`` (one fan-out), and every synthesizer — the current one and,
with a sweep, each alternative — ranks the same fetched rows.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nautilus_ranking.broker import Broker, applied_settings
from nautilus_ranking.config import NautilusSettings
from nautilus_ranking.embedders import Embedder, embedder_from_name
from nautilus_ranking.evaluation.coverage import Coverage, coverage
from nautilus_ranking.evaluation.cuts import CutScored, score_cuts
from nautilus_ranking.evaluation.judgments import EvalInputError, read_judgments, read_queries
from nautilus_ranking.evaluation.metrics import DEFAULT_K, relevant
from nautilus_ranking.evaluation.progress import Progress
from nautilus_ranking.evaluation.sweep import (
    Alternative,
    Fetched,
    Recommendation,
    Scored,
    alternatives,
    bootstrap_ci,
    compare,
    recommend,
    score,
    unboosted_reference,
)
from nautilus_ranking.synthesis.ranking import RankingSynthesizer

#: Queries in flight at once: enough to overlap the sources' I/O, few enough to be polite.
CONCURRENT_QUERIES = 4


@dataclass
class EvalResult:
    """Everything a report shows."""

    k: int
    id_field: str
    sources: list[str]
    settings: dict[str, Any]  # the current ranking settings, as NAUTILUS_* values
    ranking_enabled: bool
    queries_format: str
    judgments_format: str
    coverage: Coverage
    scored: list[Scored]  # the current settings first
    references: dict[str, Scored]  # per boosted source: the same ranking unboosted
    recommendation: Recommendation | None
    fetch_seconds: float
    rank_seconds: float
    cuts: list[CutScored] = field(default_factory=list)  # the sweep's relevance-cut table
    #: From passthrough: ranking turned on with no knob's own effect (every knob's gain
    #: includes this one's; a report names which part is the knob's).
    ranking_on: Scored | None = None


async def fetch_all(
    broker: Broker, judged: Sequence[tuple[str, str, Mapping[str, int]]], progress: Progress
) -> list[Fetched]:
    """One ``broker.fetch`` per query, a few at a time; results in the queries' order."""
    gate = asyncio.Semaphore(CONCURRENT_QUERIES)

    async def one(qid: str, text: str, grades: Mapping[str, int]) -> Fetched:
        async with gate:
            results = await broker.fetch(text)
        progress.step()
        return Fetched(qid, text, grades, results)

    return list(await asyncio.gather(*(one(*item) for item in judged)))


def run_eval(
    queries_path: Path,
    judgments_path: Path,
    config: str | None,
    settings: NautilusSettings,
    id_field: str = "id",
    k: int = DEFAULT_K,
    sweep: bool = False,
    progress: bool | None = None,
) -> EvalResult:
    """Read the inputs, fetch once per judged query, score the current settings
    (and every alternative with ``sweep``)."""
    if k < 1:
        raise EvalInputError(f"--k must be an integer >= 1, got {k}")
    queries = read_queries(queries_path)
    judgments = read_judgments(judgments_path)
    judged = [
        (qid, text, judgments.grades[qid])
        for qid, text in queries.texts.items()
        if relevant(judgments.grades.get(qid, {}))
    ]
    if not judged:
        raise EvalInputError(
            f"no query of {queries_path} has a judgment with grade >= 1 in {judgments_path} "
            f"(query ids there: {_some(list(queries.texts))}; judged query ids: "
            f"{_some(list(judgments.grades))})"
        )

    broker = Broker.from_config(config, settings)
    with broker:
        source_ids = [s.id for s in broker.sources]
        current = applied_settings(settings, source_ids)
        embedder = _embedder(broker, current)
        started = time.perf_counter()
        with Progress(len(judged), "fetching", enabled=progress) as bar:
            runs = asyncio.run(fetch_all(broker, judged, bar))
        fetch_seconds = time.perf_counter() - started

    started = time.perf_counter()
    alts = alternatives(current, source_ids, embedder, sweep)
    boosted = sorted({a.source for a in alts if a.kind == "boost" and a.source})
    steps = len(runs) * (len(alts) + len(boosted) + (1 if sweep else 0))
    with Progress(steps, "ranking", enabled=progress) as bar:
        scored = [score(a, runs, source_ids, id_field, k, bar.step) for a in alts]
        references = _references(
            current, boosted, embedder, scored[0], runs, source_ids, id_field, k, bar
        )
        cuts = score_cuts(current, embedder, runs, id_field, k, bar.step) if sweep else []
    compare(scored, references)
    ranking_on = None
    if sweep and not current.ranking_enabled:
        ranking_on = score(
            Alternative(
                "ranking on, no knob",
                "reference",
                RankingSynthesizer.from_settings(current, embedder),
            ),
            runs,
            source_ids,
            id_field,
            k,
        )
        ranking_on.delta = bootstrap_ci(ranking_on.ndcg - scored[0].ndcg)
    cov = coverage(runs, queries.texts, judgments.grades, id_field)
    recommendation = recommend(scored, k) if sweep else None
    if recommendation is not None and cov.mostly_unseen:
        recommendation = Recommendation(
            None,
            [],
            (
                f"{len(cov.never_seen)} of {cov.relevant_ids} judged-relevant ids are carried by "
                f"no row any source returned, so these judgments do not describe these sources "
                f"(is --config the sources file they were made for? is --id-field right?)"
            ),
        )
    rank_seconds = time.perf_counter() - started
    return EvalResult(
        k=k,
        id_field=id_field,
        sources=source_ids,
        settings={
            name: value
            for name, value in current.effective().items()
            if name.removeprefix("NAUTILUS_").lower() in _RANKING_FIELDS
        },
        ranking_enabled=current.ranking_enabled,
        queries_format=queries.format,
        judgments_format=judgments.format,
        coverage=cov,
        scored=scored,
        references=references,
        recommendation=recommendation,
        fetch_seconds=fetch_seconds,
        rank_seconds=rank_seconds,
        cuts=cuts,
        ranking_on=ranking_on,
    )


_RANKING_FIELDS = (
    "ranking_top_k",
    "ranking_idf",
    "source_boosts",
    "ranking_max_candidates",
    "ranking_dedup_key",
    "ranking_cut",
    "embedder",
)


def _embedder(broker: Broker, settings: NautilusSettings) -> Embedder:
    """The broker's own embedder when it ranks, so every alternative scores the same way."""
    if broker.synthesizer.embedder is not None:
        return broker.synthesizer.embedder
    return embedder_from_name(settings.embedder, cache_size=settings.embedder_cache_size)


def _references(
    settings: NautilusSettings,
    boosted: list[str],
    embedder: Embedder,
    current: Scored,
    runs: list[Fetched],
    source_ids: list[str],
    id_field: str,
    k: int,
    bar: Progress,
) -> dict[str, Scored]:
    """Per boosted source, the same ranking without its boost (computed once per distinct
    settings; the current scores are reused when they are that ranking)."""
    out: dict[str, Scored] = {}
    cache: dict[tuple[Any, ...], Scored] = {}
    for sid in boosted:
        reference: Alternative = unboosted_reference(settings, sid, embedder)
        ranker = reference.ranker
        key = (
            (
                ranker.top_k,
                ranker.idf,
                tuple(sorted(ranker.source_boosts.items())),
                ranker.max_candidates,
                ranker.dedup_key,
                ranker.cut,
            )
            if ranker
            else ("passthrough",)
        )
        if settings.ranking_enabled and sid.lower() not in settings.source_boosts:
            cache.setdefault(key, current)
        if key not in cache:
            cache[key] = score(reference, runs, source_ids, id_field, k, bar.step)
        else:
            bar.step(len(runs))
        out[sid] = cache[key]
    return out


def _some(ids: list[str], count: int = 5) -> str:
    shown = ", ".join(repr(i) for i in ids[:count])
    return (shown + ", …") if len(ids) > count else (shown or "none")
