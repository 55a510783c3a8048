"""``nautilus-ranking eval``: fetch every judged query once through the live broker, then score.

The broker is built exactly as ``nautilus-ranking query`` and the service build it
(``Broker.from_config`` with the current ``NAUTILUS_*`` settings); each query is
one ``broker.fetch`` (one fan-out), and every synthesizer — the current one and,
with a sweep, each alternative — ranks the same fetched rows.

One module past 400 lines because a run is one sequence (fetch, rank each alternative,
score, recommend) over one set of fetched rows; the sweep, the metrics, the familywise
rule, the abstain and the reports are modules of their own.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nautilus_ranking.broker import Broker
from nautilus_ranking.embedders import Embedder, embedder_from_name
from nautilus_ranking.evaluation.abstain import (
    MAX_FALSE_ABSTAIN,
    AbstainTable,
    choose,
    score_abstain,
)
from nautilus_ranking.evaluation.alternatives import (
    Alternative,
    alternatives,
    reference,
    signature,
    unboosted,
)
from nautilus_ranking.evaluation.coverage import Coverage, coverage
from nautilus_ranking.evaluation.cuts import CutScored, score_cuts
from nautilus_ranking.evaluation.delivered import Delivery
from nautilus_ranking.evaluation.familywise import Recommendation, recommend
from nautilus_ranking.evaluation.judgments import (
    EvalInputError,
    Judgments,
    Queries,
    read_judgments,
    read_queries,
)
from nautilus_ranking.evaluation.knob_settings import (
    KnobValue,
    RunSettings,
    knobs_line,
    run_settings,
)
from nautilus_ranking.evaluation.metrics import DEFAULT_K, relevant
from nautilus_ranking.evaluation.progress import Progress
from nautilus_ranking.evaluation.sweep import Fetched, Scored, compare, paired_test, score
from nautilus_ranking.settings.model import NautilusSettings
from nautilus_ranking.source_settings import applied_settings
from nautilus_ranking.sources.base import embeds_query, stores_vectors
from nautilus_ranking.synthesis.row_times import period_of

#: Queries in flight at once: enough to overlap the sources' I/O, few enough to be polite.
CONCURRENT_QUERIES = 4


@dataclass
class EvalResult:
    """Everything a report shows."""

    k: int
    id_field: str
    sources: list[str]
    knobs: list[KnobValue]  # every declared knob: value, origin, whether set
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
    #: A sweep's reference: ranking on, every ranking knob at its default. From
    #: passthrough every knob's gain includes this one's (a report names the knob's part).
    reference: Scored | None = None
    notes: list[str] = field(default_factory=list)  # what a row's figures rest on
    settings_line: str = ""  # the knobs in force, as the header shows them
    profile: str | None = None  # the ranking profile resolved into the knobs (--profile)
    delivery: Delivery | None = None  # the budget every row was scored under
    #: The sources whose vectors are stored in PostgreSQL by ``stored_by`` (the embedder
    #: their retrieval queries with): another embedder needs their tables reloaded.
    stored_vectors: list[str] = field(default_factory=list)
    stored_by: str = ""
    config: str = ""  # the sources file, as given
    #: The abstain table (:mod:`.abstain`): with a sweep or unanswerable queries.
    abstain: AbstainTable | None = None
    unanswerable_format: str | None = None  # how the unanswerable queries were read
    as_of: str | None = None  # the time the judgments hold at (--as-of)
    dated: bool = False  # some source maps a time: the sweep tried the time knobs

    @property
    def settings(self) -> dict[str, Any]:
        """Every knob's value, keyed by its variable."""
        return {k.knob.variable: k.value for k in self.knobs}


async def fetch_all(
    broker: Broker,
    judged: Sequence[tuple[str, str, Mapping[str, int]]],
    progress: Progress,
    as_of: str | None = None,
) -> list[Fetched]:
    """One ``broker.fetch`` per query, a few at a time; results in the queries' order
    (``as_of``: the time each query's ranking is asked as of)."""
    gate = asyncio.Semaphore(CONCURRENT_QUERIES)

    async def one(qid: str, text: str, grades: Mapping[str, int]) -> Fetched:
        async with gate:
            results = await broker.fetch(text)
        progress.step()
        return Fetched(qid, text, grades, results, as_of)

    return list(await asyncio.gather(*(one(*item) for item in judged)))


def run_eval(
    queries_path: Path,
    judgments_path: Path,
    config: str | None,
    settings: NautilusSettings | RunSettings,
    id_field: str = "id",
    k: int = DEFAULT_K,
    sweep: bool = False,
    progress: bool | None = None,
    max_tokens: int | None = None,
    counting: str = "json",
    unanswerable_path: Path | None = None,
    as_of: str | None = None,
    max_false_abstain: float = MAX_FALSE_ABSTAIN,
) -> EvalResult:
    """Read the inputs, fetch once per judged query, score the current settings
    (and every alternative with ``sweep``). ``settings``: the run's (with each knob's
    origin), or plain settings whose knobs are the caller's arguments. Under a budget
    (``max_tokens``, else the settings'), every row is scored on the rows that fit,
    each counted as ``counting`` says (:mod:`.delivered`). ``unanswerable_path``:
    queries nothing answers, for the abstain table (:mod:`.abstain`); ``as_of``: the
    time the judgments hold at, sent with every query as a request's ``as_of``."""
    if k < 1:
        raise EvalInputError(f"--k must be an integer >= 1, got {k}")
    if not 0.0 < max_false_abstain < 1.0:
        raise EvalInputError(
            f"--max-false-abstain must be a rate between 0 and 1, got {max_false_abstain:g}"
        )
    _check_as_of(as_of)
    run = settings if isinstance(settings, RunSettings) else run_settings(settings)
    queries = read_queries(queries_path)
    judgments = read_judgments(judgments_path, queries.texts, relevant_only=True)
    judged = _judged(queries, judgments, queries_path, judgments_path)
    unanswerable = read_queries(unanswerable_path) if unanswerable_path is not None else None
    offtopic = _unanswerable(unanswerable, judgments.grades, unanswerable_path)
    fetched = _fetch(config, run, [*judged, *offtopic], progress, as_of)
    fetched.runs, offtopic_runs = fetched.runs[: len(judged)], fetched.runs[len(judged) :]
    current = fetched.current
    budget = max_tokens if max_tokens is not None else current.ranking_max_tokens
    delivery = Delivery(budget, counting) if budget is not None else None
    started = time.perf_counter()
    ranked = _rank(fetched, id_field, k, sweep, progress, delivery, as_of is not None)
    scored, ref = ranked.scored, ranked.reference
    compare(scored, {**ranked.references, **({"": ref} if ref is not None else {})})
    runs = fetched.runs
    cov = coverage(runs, queries.texts, judgments.grades, id_field, judgments.elsewhere)
    abstain = None
    if sweep or offtopic:
        abstain = score_abstain(
            current, fetched.embedder, runs, offtopic_runs, id_field, k, max_false_abstain
        )
    recommendation = _recommendation(ranked, k, sweep, cov, abstain)
    rank_seconds = time.perf_counter() - started
    return EvalResult(
        k=k,
        id_field=id_field,
        sources=fetched.source_ids,
        knobs=run.knobs(),
        ranking_enabled=current.ranking_enabled,
        queries_format=queries.format,
        judgments_format=judgments.format,
        coverage=cov,
        scored=scored,
        references=ranked.references,
        recommendation=recommendation,
        fetch_seconds=fetched.seconds,
        rank_seconds=rank_seconds,
        cuts=ranked.cuts,
        reference=ref,
        notes=_embedder_notes(scored, current.resolved_embedder, fetched.by_embedder),
        settings_line=knobs_line(run, current.ranking_enabled),
        profile=run.profile,
        delivery=delivery,
        stored_vectors=fetched.stored,
        stored_by=current.vector_embedder,
        config=str(config),
        abstain=abstain,
        unanswerable_format=unanswerable.format if unanswerable is not None else None,
        as_of=as_of,
        dated=fetched.dated,
    )


def _check_as_of(as_of: str | None) -> None:
    """A time the ranking can read, or an error naming the flag and the forms it takes."""
    found = period_of(as_of) if as_of is not None else None
    if isinstance(found, str):
        raise EvalInputError(
            f"--as-of {as_of!r} is not a time ({found}): give an ISO date or date-time, "
            "e.g. 2026-06-01 or 2026-06-01T12:00:00Z"
        )


def _unanswerable(
    queries: Queries | None, grades: Mapping[str, Mapping[str, int]], path: Path | None
) -> list[tuple[str, str, dict[str, int]]]:
    """(id, text, no grades) of each unanswerable query; one the judgments judge
    relevant somewhere is an error naming it (the file would count its abstain as right)."""
    if queries is None:
        return []
    if not queries.texts:
        raise EvalInputError(f"{path}: no query in the unanswerable queries file")
    judged = [qid for qid in queries.texts if relevant(grades.get(qid, {}))]
    if judged:
        raise EvalInputError(
            f"{path}: {len(judged)} unanswerable queries have a relevant judgment "
            f"({_some(judged)}): give the unanswerable queries ids of their own"
        )
    return [(qid, text, {}) for qid, text in queries.texts.items()]


def _judged(
    queries: Queries, judgments: Judgments, queries_path: Path, judgments_path: Path
) -> list[tuple[str, str, dict[str, int]]]:
    """(id, text, grades) of each query with a relevant judgment, in the queries' order;
    none is an error naming the ids on both sides (the files do not match)."""
    judged = [
        (qid, text, judgments.grades[qid])
        for qid, text in queries.texts.items()
        if relevant(judgments.grades.get(qid, {}))
    ]
    if not judged:
        raise EvalInputError(
            f"no query of {queries_path} has a judgment with grade >= 1 in {judgments_path} "
            f"(query ids there: {_some(list(queries.texts))}; judged query ids: "
            f"{_some([*judgments.grades, *judgments.elsewhere])})"
        )
    return judged


@dataclass
class _Fetched:
    """The judged queries' rows as the live broker fetched them, and what the ranking
    needs to know of that broker after it is closed."""

    source_ids: list[str]
    current: NautilusSettings  # the run's settings as the broker applies them
    embedder: Embedder
    by_embedder: list[str]  # sources that retrieve by the embedder itself
    stored: list[str]  # sources whose vectors are stored in PostgreSQL
    runs: list[Fetched]
    seconds: float
    dated: bool = False  # some source maps its rows' time


def _fetch(
    config: str | None,
    run: RunSettings,
    judged: Sequence[tuple[str, str, Mapping[str, int]]],
    progress: bool | None,
    as_of: str | None = None,
) -> _Fetched:
    """One fan-out per judged query, through a broker built as ``query`` and the
    service build theirs; the broker is closed once every query is fetched."""
    broker = Broker.from_config(config, run.settings)
    with broker:
        source_ids = [s.id for s in broker.sources]
        current = applied_settings(run.settings, source_ids)
        embedder = _embedder(broker, current)
        by_embedder = [s.id for s in broker.sources if embeds_query(s)]
        stored = [s.id for s in broker.sources if stores_vectors(s)]
        started = time.perf_counter()
        with Progress(len(judged), "fetching", enabled=progress) as bar:
            runs = asyncio.run(fetch_all(broker, judged, bar, as_of))
        seconds = time.perf_counter() - started
    dated = bool(current.ranking_time_fields) or any(
        r.time_field for fetched in runs for r in fetched.results
    )
    return _Fetched(source_ids, current, embedder, by_embedder, stored, runs, seconds, dated)


@dataclass
class _Ranked:
    """Every ranking's figures on the same fetched rows."""

    scored: list[Scored]  # the current settings first
    references: dict[str, Scored]  # per boosted source: the same ranking unboosted
    reference: Scored | None  # a sweep's: ranking on, every knob at its default
    cuts: list[CutScored]  # a sweep's relevance-cut table


def _rank(
    fetched: _Fetched,
    id_field: str,
    k: int,
    sweep: bool,
    progress: bool | None,
    delivery: Delivery | None,
    as_of: bool = False,
) -> _Ranked:
    """Score the current settings, each alternative (with ``sweep``) and each boosted
    source's unboosted reference, ranking each distinct ranking once."""
    current, source_ids, runs = fetched.current, fetched.source_ids, fetched.runs
    embedder = fetched.embedder
    alts = alternatives(
        current,
        source_ids,
        embedder,
        sweep,
        k,
        embed=sweep and _can_embed(),
        dated=fetched.dated,
        as_of=as_of,
    )
    boosted = sorted({a.source for a in alts if a.kind == "boost" and a.source})
    steps = len(runs) * (len(alts) + len(boosted) + (2 if sweep else 0))
    cache: dict[tuple[Any, ...], Scored] = {}
    with Progress(steps, "ranking", enabled=progress) as bar:

        def scored_as(alt: Alternative) -> Scored:
            """Ranked once per distinct ranking; a row that ranks as another shares its
            figures under its own name."""
            key = (*signature(alt.settings or current, ranked=alt.ranker is not None), alt.as_of)
            if key in cache:
                bar.step(len(runs))
                return dataclasses.replace(cache[key], alternative=alt)
            bar.trying(alt.name)
            cache[key] = score(alt, runs, source_ids, id_field, k, bar.step, delivery=delivery)
            return cache[key]

        scored = [scored_as(a) for a in alts]
        references = {sid: scored_as(unboosted(current, sid, embedder)) for sid in boosted}
        ref = scored_as(reference(current, embedder)) if sweep else None
        if sweep:
            bar.trying("relevance cuts")
        cuts = score_cuts(current, embedder, runs, id_field, k, bar.step) if sweep else []
    return _Ranked(scored, references, ref, cuts)


def _recommendation(
    ranked: _Ranked, k: int, sweep: bool, cov: Coverage, abstain: AbstainTable | None
) -> Recommendation | None:
    """A sweep's recommendation, withheld when most judged-relevant ids are in no row
    (then the judgments do not describe these sources); the abstain table's threshold is
    chosen under the same correction (filled into ``abstain``)."""
    recommendation = None
    scored = ranked.scored
    if sweep:
        cut_p = [paired_test(c.ndcg - scored[0].ndcg)[1] for c in ranked.cuts if not c.current]
        tested = abstain.tested if abstain is not None else []
        recommendation = recommend(
            scored,
            k,
            cut_p,
            reference=ranked.reference,
            abstain_p_values=[r.p_value for r in tested],
        )
        if abstain is not None:
            choose(abstain, recommendation.abstain_rejected, recommendation.family)
    if recommendation is not None and cov.mostly_unseen:
        recommendation = Recommendation(
            None,
            [],
            (
                f"{len(cov.never_seen)} of {cov.relevant_ids} judged-relevant ids are in no "
                f"row any source returned, so these judgments do not describe these sources "
                f"(is --config the sources file they were made for? is --id-field right?)"
            ),
            recommendation.family,
            passed=recommendation.passed,
            abstain_rejected=recommendation.abstain_rejected,
        )
    return recommendation


def _embedder(broker: Broker, settings: NautilusSettings) -> Embedder:
    """The broker's own embedder when it ranks, so every alternative scores the same way."""
    if broker.synthesizer.embedder is not None:
        return broker.synthesizer.embedder
    return embedder_from_name(
        settings.resolved_embedder,
        cache_size=settings.embedder_cache_size,
        data_dir=settings.data_dir,
        disk_cache_mb=settings.embedder_disk_cache_mb,
    )


def _can_embed() -> bool:
    """Whether the ``embed`` extra is installed (then the sweep tries the model)."""
    return importlib.util.find_spec("onnxruntime") is not None


def _embedder_notes(scored: list[Scored], current: str, by_embedder: list[str]) -> list[str]:
    """Per embedder row: what re-embedding cost, and which sources' retrieval it did not
    re-run."""
    base = scored[0].seconds
    notes = []
    for entry in scored:
        if entry.alternative.kind != "embedder" or entry.alternative.settings is None:
            continue
        name = entry.alternative.settings.embedder
        notes.append(
            f"{entry.alternative.name}: the rows re-embedded, {entry.seconds:.1f} s ranking "
            f"({current}: {base:.1f} s)"
        )
        notes += [
            f"  {sid} retrieves by the embedder itself: only the ranking was re-run with "
            f"{name}, not its retrieval"
            for sid in by_embedder
        ]
    return notes


def _some(ids: list[str], count: int = 5) -> str:
    shown = ", ".join(repr(i) for i in ids[:count])
    return (shown + ", …") if len(ids) > count else (shown or "none")
