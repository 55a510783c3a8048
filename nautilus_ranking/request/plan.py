"""A request's overrides turned into what it runs: a broker (shared, or a light
per-request one) and the page to cut from its answer.

Overrides go through the same parsers as the environment variables
(``collect_source_boosts`` for ``boosts``, the integer and boolean parsers for
``top_k`` and ``idf``), so a level or an id means the same thing in a manifest
and in a request; a bad value is refused (422 over HTTP) instead of being skipped,
because the caller is there to fix it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nautilus_ranking.broker import Broker, synthesizer_for
from nautilus_ranking.embedders import Embedder
from nautilus_ranking.errors import Problem, cut
from nautilus_ranking.records import BrokerResponse, RankedRow
from nautilus_ranking.request.errors import ProblemError, invalid
from nautilus_ranking.request.model import QueryRequest, arg_of
from nautilus_ranking.request.pages import PageError, Paging, first_page, paging
from nautilus_ranking.selection.budget import BudgetResult
from nautilus_ranking.settings.knobs import OVERRIDES, OVERRIDING, explained, parse_one
from nautilus_ranking.settings.model import NautilusSettings
from nautilus_ranking.sources.base import Source
from nautilus_ranking.synthesis.base import Synthesizer


@dataclass(frozen=True)
class Plan:
    """What one request runs: a broker (shared, or a light per-request one), the
    settings it ranks under (the engine's with the request's overrides), and the page
    to cut from its answer when the request asked for one."""

    broker: Broker
    effective: NautilusSettings
    explain: dict[str, Any]
    paging: Paging | None = None


def cap_ranked_rows(synthesizer: Synthesizer, max_ranked_rows: int) -> None:
    """Lower a shared ranking synthesizer's candidate cap to a server's ceiling (as
    :func:`within_ceiling` does for a request's own); a passthrough is left alone."""
    current = synthesizer.max_candidates
    if synthesizer.ranking_enabled and (current is None or current > max_ranked_rows):
        synthesizer.max_candidates = max_ranked_rows


def within_ceiling(settings: NautilusSettings, max_ranked_rows: int | None) -> NautilusSettings:
    """``settings`` ranking at most ``max_ranked_rows`` rows a request (a server's
    ``NAUTILUS_SERVE_MAX_RANKED_ROWS``): the candidate cap, lowered to the ceiling when
    it is unset or above it. A passthrough ranks nothing and is left alone."""
    if max_ranked_rows is None or not settings.ranking_enabled:
        return settings
    current = settings.ranking_max_candidates
    if current is not None and current <= max_ranked_rows:
        return settings
    return settings.model_copy(update={"ranking_max_candidates": max_ranked_rows})


def plan(
    request: QueryRequest,
    broker: Broker,
    settings: NautilusSettings,
    embedder: Embedder | None,
    max_query_chars: int,
    profile: str | None = None,
    max_ranked_rows: int | None = None,
    size_fixed: bool = False,
) -> Plan:
    """Validate the overrides against the settings' parsers and the broker's sources;
    a server's ``max_ranked_rows`` bounds the rows the request ranks
    (:func:`within_ceiling`). ``size_fixed``: the caller may not override ``top_k``, so
    a cursor's page size is held to the settings' (a cursor's size is an override)."""
    problems = _query_problems(request, max_query_chars)
    update = _overrides(request, broker, problems)
    chosen = _chosen_sources(request, broker, problems)
    effective = settings.model_copy(update=update) if update else settings
    pages = None
    if not problems:
        pages, effective = _paging(request, effective, chosen, profile, size_fixed, problems)
    if problems:
        raise invalid(problems)
    if update or pages is not None:
        # A synthesizer of the request's own: it ranks at most the server's ceiling of
        # rows (the shared one was capped when the server started). After the cursor's
        # key: the ceiling is the server's, not the ranking's shape.
        capped = within_ceiling(effective, max_ranked_rows)
        if capped is not effective:
            update["ranking_max_candidates"] = capped.ranking_max_candidates
            effective = capped
    explain = _explain(request, broker, effective, chosen, pages)
    # The budget is the core's to apply (to the page, counted as each way in hands rows
    # over): the broker that runs the request has none of its own.
    if (
        not update
        and request.sources is None
        and pages is None
        and broker.max_tokens is None
        and broker.min_confidence == effective.ranking_min_confidence
    ):
        return Plan(broker, effective, explain)
    synthesizer: Synthesizer = broker.synthesizer
    if pages is not None:
        synthesizer = pages.synthesizer(effective, embedder)
    elif set(update) - {"ranking_max_tokens", "ranking_min_confidence"} or (
        not broker.synthesizer.ranking_enabled and effective.ranking_enabled
    ):
        synthesizer = synthesizer_for(effective, embedder)
    explain["synthesizer"] = type(synthesizer).__name__
    run = Broker(
        chosen,
        synthesizer,
        broker.limit,
        prepare_timeout_s=broker.prepare_timeout_s,
        min_confidence=effective.ranking_min_confidence,
    )
    return Plan(run, effective, explain, pages)


def _query_problems(request: QueryRequest, max_query_chars: int) -> list[Problem]:
    """The query's own problem (too long), first of the problems the request is refused
    with."""
    if len(request.query) <= max_query_chars:
        return []
    return [
        Problem(
            "query",
            f"({len(request.query)} characters)",
            "too long (NAUTILUS_SERVE_MAX_QUERY_CHARS)",
            f"at most {max_query_chars} characters",
        )
    ]


def _overrides(request: QueryRequest, broker: Broker, problems: list[Problem]) -> dict[str, Any]:
    """The settings the request's overrides replace, each parsed by its knob's own
    parser (so it means what the variable means); each bad value, or a source id the
    broker has none of, is added to ``problems``."""
    ids = [s.id for s in broker.sources]
    known = {i.lower() for i in ids}
    update: dict[str, Any] = {}
    for knob in OVERRIDING:
        assert knob.override is not None  # OVERRIDING holds the knobs that have one
        raw = request.override(knob.short)
        if raw is None:
            continue
        value, found = parse_one(knob, raw, None)
        for problem in found:  # an entry of a list of sources says what an entry is
            valid = problem.valid if knob.override.source_ids else arg_of(knob.short).valid
            problems.append(Problem(knob.short, problem.value, problem.reason, valid))
        if knob.override.source_ids is not None:
            problems.extend(
                Problem(knob.short, cut(sid), f"no source has id {sid!r}", ", ".join(ids))
                for sid in knob.override.source_ids(value)
                if sid not in known
            )
        update[knob.field] = value
    return update


def _chosen_sources(request: QueryRequest, broker: Broker, problems: list[Problem]) -> list[Source]:
    """The broker's sources the request asks for (all of them when it names none); an
    unknown id, or an empty list, is added to ``problems``."""
    chosen = list(broker.sources)
    if request.sources is None:
        return chosen
    ids = [s.id for s in broker.sources]
    known = {i.lower(): i for i in ids}
    wanted = [s.strip().lower() for s in request.sources]
    for raw, sid in zip(request.sources, wanted, strict=True):
        if sid not in known:
            problems.append(Problem("sources", cut(raw), "unknown source id", ", ".join(ids)))
    if not wanted:
        problems.append(
            Problem("sources", "[]", "no source asked", "one or more of: " + ", ".join(ids))
        )
    return [s for s in broker.sources if s.id.lower() in set(wanted)]


def _paging(
    request: QueryRequest,
    effective: NautilusSettings,
    chosen: list[Source],
    profile: str | None,
    size_fixed: bool,
    problems: list[Problem],
) -> tuple[Paging | None, NautilusSettings]:
    """The page the request asks for (a top K is page 1) and the settings ranking at
    its size; a bad page or cursor is added to ``problems``."""
    pages = None
    try:
        # A cursor without a top_k in the request pages by its own size, whatever
        # NAUTILUS_RANKING_TOP_K says: the next page of the answer it came from.
        by_cursor = (
            request.cursor is not None and request.override("top_k") is None and not size_fixed
        )
        pages = paging(
            request.query,
            effective.model_copy(update={"ranking_top_k": None}) if by_cursor else effective,
            [s.id for s in chosen],
            page=request.page,
            cursor=request.cursor,
            profile=profile,
            size_fixed=size_fixed,
            as_of=request.as_of,
        )
    except PageError as exc:
        problems.append(exc.problem)
    if pages is not None and effective.ranking_top_k != pages.size:  # the cursor's size
        effective = effective.model_copy(update={"ranking_top_k": pages.size})
    if pages is None and request.page is None and request.cursor is None:
        # a top K is page 1: its answer says whether more rows exist
        pages = first_page(request.query, effective, [s.id for s in chosen], profile, request.as_of)
    return pages, effective


def _explain(
    request: QueryRequest,
    broker: Broker,
    effective: NautilusSettings,
    chosen: list[Source],
    pages: Paging | None,
) -> dict[str, Any]:
    """What the request runs under, as the answer's ``explain`` shows it."""
    explain = {
        "synthesizer": type(broker.synthesizer).__name__,
        **explained(effective),
        "sources": [s.id for s in chosen],
        "as_of": request.as_of,
        "overrides": [name for name in OVERRIDES if request.override(name) is not None],
    }
    if pages is not None and pages.asked:
        explain["page"] = pages.number
    return explain


def cut_page(
    run: Plan,
    response: BrokerResponse,
    text: Callable[[RankedRow], str] | None = None,
    whole: tuple[str, ...] = (),
) -> tuple[BrokerResponse, dict[str, Any] | None, BudgetResult | None]:
    """The asked page of ``response``, its ``page`` object and, under the plan's token
    budget, what the budget did (each row counted as ``text(row)``; a row too large for
    it as its passage, unless ``whole`` names it); the response as it is when no page was
    asked. 409 when the sources' answers moved under the cursor."""
    if run.paging is None:
        return response, None, None
    effective = run.effective
    passages = effective.ranking_budget_passages
    try:
        return run.paging.cut(response, effective.ranking_max_tokens, text, passages, whole)
    except PageError as exc:
        if not exc.stale:  # made for another budget: the caller's to fix
            raise invalid([exc.problem]) from None
        raise ProblemError(
            409,
            "cursor-stale",
            "Cursor out of date",
            str(exc),
            extra={"field": exc.field, "value": exc.value, "valid": exc.valid},
        ) from None


def given_overrides(request: QueryRequest) -> dict[str, object]:
    """The override fields ``request`` carries, each with the value it gave."""
    return {
        name: request.override(name) for name in OVERRIDES if request.override(name) is not None
    }


def forbid_overrides(request: QueryRequest) -> None:
    """403 when the operator turned overrides off and the request carries one."""
    given = given_overrides(request)
    if given:
        first = next(iter(given))
        raise ProblemError(
            403,
            "overrides-forbidden",
            "Overrides forbidden",
            f"this service does not accept per-request overrides ({', '.join(given)}): "
            "NAUTILUS_SERVE_ALLOW_OVERRIDES=false",
            extra={
                "field": first,
                "value": cut(given[first]),
                "setting": "NAUTILUS_SERVE_ALLOW_OVERRIDES",
            },
        )
