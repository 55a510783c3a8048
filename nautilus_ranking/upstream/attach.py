"""``attach_ranking(broker)``: our ranking inside a broker built by ``Broker.from_config``.

nautilus-rkm 0.3.0 takes its synthesizer as a constructor argument, and
``Broker.from_config`` hard-codes ``BasicSynthesizer()``; it has no setting for it.
So the attachment does, on the built instance, what ``from_config`` would do if it
selected one:

1. reads the ``NAUTILUS_*`` settings (:class:`~nautilus_ranking.settings.model.NautilusSettings`)
   and checks the boosts against the broker's sources (warn and drop, or refuse in
   strict mode, as our own broker does);
2. replaces the instance's ``_synthesizer`` (the attribute ``from_config`` set; the
   broker reads it for every request) with a
   :class:`~nautilus_ranking.upstream.synthesizer.BrokerSynthesizer` that keeps the
   broker's own one as its passthrough;
3. wraps the instance's ``arequest`` (``request`` and the broker's HTTP and MCP
   servers all go through it) to hand ``merge`` the request's intent and agent in a
   context variable (:mod:`.request_scope`), to file each ranking under the
   response's ``request_id`` (and hand it to a ranked route's call), and to log one
   ``upstream_request_ranked`` line naming the settings that ranked it;
4. gives the broker's ``pgvector`` adapters our embedder as their default
   (:mod:`.query_vectors`), so a request without ``context["embedding"]`` gets a query
   vector;
5. registers a reload listener (the broker's public ``on_reload``): after a SIGHUP
   reload the boosts are checked again against the new sources, the routing
   vocabulary (:mod:`.routing_words`) is built again and new pgvector adapters get
   the query vectors. The ``NAUTILUS_*`` variables
   are not read again: they are the process's.

Both are internals of the broker: the versions this was tested on are
``TESTED_BROKER_VERSIONS``, and another version gets one warning.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nautilus_ranking.embedders import Embedder, embedder_from_name
from nautilus_ranking.embedders.warm_up import warm_up
from nautilus_ranking.errors import NautilusError, Problem
from nautilus_ranking.log import get_logger
from nautilus_ranking.request.cursor_keys import cursor_keys
from nautilus_ranking.settings.knobs import DEFAULTS, KNOBS, knob_is_set
from nautilus_ranking.settings.model import ConfigError, NautilusSettings, log_problem
from nautilus_ranking.source_settings import applied_settings, boost_problems, named_source_problems
from nautilus_ranking.synthesis.ranking import RankingSynthesizer
from nautilus_ranking.upstream.agent_profiles import agent_rankers
from nautilus_ranking.upstream.confidence_fit import served_fit_problems
from nautilus_ranking.upstream.outcome import RequestRanking
from nautilus_ranking.upstream.query_vectors import QueryVectors, give_query_vectors
from nautilus_ranking.upstream.request_scope import CallerChecked, current_call, request_scope
from nautilus_ranking.upstream.routing_words import NO_ROUTING_WORDS, RoutingWords, routing_words
from nautilus_ranking.upstream.source_kinds import SourceKind, kinds_of
from nautilus_ranking.upstream.store import DEFAULT_KEEP, RankingStore
from nautilus_ranking.upstream.synthesizer import BrokerSynthesizer
from nautilus_ranking.upstream.version import (
    check_broker_version,
    installed_broker_version,
    seam_missing,
)

logger = get_logger("nautilus_ranking.upstream")

#: The broker attribute that holds its synthesizer (set by ``Broker.__init__``).
SYNTHESIZER_ATTRIBUTE = "_synthesizer"


class IncompatibleBrokerError(NautilusError, TypeError):
    """The object is not a broker this attachment knows how to attach to."""


class AttachedRanking:
    """Our ranking, attached to one broker: its settings and the rankings it made.

    ``ranking(request_id)`` is the accessor: the full ranking (scores, components)
    and the rows left out of one response, by the response's ``request_id``; None
    when ranking is off, or the request is older than what the store keeps (the last
    ``keep`` requests within ``NAUTILUS_UPSTREAM_RANKINGS_MAX_BYTES``).
    """

    def __init__(
        self,
        broker: Any,
        synthesizer: BrokerSynthesizer,
        settings: NautilusSettings,
        store: RankingStore,
    ) -> None:
        self.broker = broker
        self.synthesizer = synthesizer
        self.settings = settings
        self.store = store
        #: The words left out of the ranked query (rebuilt on every reload).
        self.routing_words: RoutingWords = NO_ROUTING_WORDS
        #: The ranking knobs set, by variable (what the per-request log line names).
        self.ranked_with: dict[str, Any] = settings_named(settings)
        #: The broker's nautilus.yaml, which the confidence fits were checked against.
        self.config_path: Path | None = None
        #: The pgvector adapters' default embedder (None: NAUTILUS_UPSTREAM_VECTOR_DIM=0),
        #: and the sources given it (again after every reload).
        self.query_vectors: QueryVectors | None = None
        self.vector_sources: list[str] = []

    @property
    def enabled(self) -> bool:
        """Whether rows are ranked (some ranking knob is set, globally or in a profile
        of a listed agent); else the broker's answer."""
        rankers = self.synthesizer.agents.rankers.values()
        return self.synthesizer.ranker is not None or any(r is not None for r in rankers)

    def ranking(self, request_id: str) -> RequestRanking | None:
        """One response's ranking, by its ``request_id``."""
        return self.store.get(request_id)


def attach_ranking(
    broker: Any,
    settings: NautilusSettings | None = None,
    *,
    embedder: Embedder | None = None,
    keep: int = DEFAULT_KEEP,
    config_path: str | Path | None = None,
) -> AttachedRanking:
    """Rank a Nautilus broker's answers with ours; returns the accessor.

    ``broker``: a ``nautilus.Broker`` (nautilus-rkm), as ``Broker.from_config`` built
    it. ``settings``: default, the ``NAUTILUS_*`` environment and ``.env``.
    ``embedder``: default, the one ``NAUTILUS_EMBEDDER`` names. ``keep``: how many
    requests' rankings the accessor keeps (0: none; the bytes they may take are
    ``NAUTILUS_UPSTREAM_RANKINGS_MAX_BYTES``). ``config_path``: the ``nautilus.yaml``
    the broker was built from, which a confidence fit is checked against
    (:mod:`.confidence_fit`). Attaching twice returns the first attachment. Raises
    :class:`IncompatibleBrokerError` when ``broker`` has no synthesizer or ``arequest``
    to attach to, and :class:`~nautilus_ranking.settings.model.ConfigError` in strict
    mode when a boost names no source of the broker, and always when a confidence fit
    was made for other sources, another embedder or setup, or cannot be checked.
    """
    existing = getattr(broker, SYNTHESIZER_ATTRIBUTE, None)
    if isinstance(existing, BrokerSynthesizer):
        attached: AttachedRanking = broker.__dict__["_nautilus_ranking"]
        return attached
    if existing is None or not callable(getattr(existing, "merge", None)):
        raise IncompatibleBrokerError(
            f"{type(broker).__name__} has no {SYNTHESIZER_ATTRIBUTE} with a merge() to "
            f"replace (nautilus-rkm {installed_broker_version() or '(not installed)'}): "
            "attach_ranking needs a nautilus.Broker built by Broker.from_config"
        )
    if not callable(getattr(broker, "arequest", None)):
        raise IncompatibleBrokerError(f"{type(broker).__name__} has no arequest() to wrap")
    check_broker_version()
    settings = settings if settings is not None else NautilusSettings()
    served = Path(config_path).expanduser() if config_path is not None else None
    problems = _settings_checked(broker, settings, served)
    if embedder is None and settings.ranking_enabled:
        embedder = embedder_from_name(
            settings.resolved_embedder,
            cache_size=settings.embedder_cache_size,
            data_dir=settings.data_dir,
            disk_cache_mb=settings.embedder_disk_cache_mb,
        )

    def source_kinds() -> Mapping[str, SourceKind]:
        return kinds_of(broker.sources)  # read per request: a reload may change them

    agents = agent_rankers(settings, _source_ids(broker), embedder)  # profiles, by agent
    ranks = settings.ranking_enabled or any(r is not None for r in agents.rankers.values())
    synthesizer = BrokerSynthesizer(
        None,
        existing,
        source_kinds,
        agents,
        max_tokens=settings.ranking_max_tokens,
        min_confidence=settings.ranking_min_confidence,
        budget_passages=settings.ranking_budget_passages,
        # read at attach, not at the first ranked request: they sign each ranking's hash
        keys=cursor_keys(settings) if ranks else None,
    )
    store = RankingStore(keep, settings.upstream_rankings_max_bytes)
    attached = AttachedRanking(broker, synthesizer, settings, store)
    attached.config_path = served
    synthesizer.query_of = lambda intent: attached.routing_words.query(intent)
    if settings.upstream_vector_dim:
        attached.query_vectors = QueryVectors.from_settings(
            settings.vector_embedder,
            settings.upstream_vector_dim,
            settings.embedder_cache_size,
            synthesizer.query_of,
        )
    _adopt_sources(attached, embedder, problems)
    setattr(broker, SYNTHESIZER_ATTRIBUTE, synthesizer)
    broker.arequest = _scoped(attached, broker.arequest)
    broker.__dict__["_nautilus_ranking"] = attached
    on_reload = getattr(broker, "on_reload", None)
    if callable(on_reload):
        on_reload(lambda: _adopt_sources(attached, embedder, None))
    warm_up(embedder)  # the model loads at attach, not at the first ranked request
    logger.info(
        "upstream_ranking_attached",
        broker_version=installed_broker_version(),
        ranking_enabled=synthesizer.ranker is not None,
        **({"profiles": dict(synthesizer.agents.by_agent)} if synthesizer.agents.by_agent else {}),
        sources={sid: kind.source_type for sid, kind in source_kinds().items()},
        query_vectors=attached.vector_sources,
    )
    return attached


def _settings_checked(
    broker: Any, settings: NautilusSettings, served: Path | None
) -> tuple[Problem, ...]:
    """The boosts' problems against the broker's sources (raised in strict mode), after
    refusing a confidence fit not made for what the broker serves (strict or not)."""
    ids = _source_ids(broker)
    problems = boost_problems(settings, ids) + named_source_problems(settings, ids)
    if problems and settings.config_strict:
        raise ConfigError(problems)
    refused = served_fit_problems(settings, served)
    if refused:  # never a silent fallback to the shipped fit, strict mode or not
        raise ConfigError(tuple(refused))
    return problems


def _scoped(attached: AttachedRanking, inner: Any) -> Any:
    """The broker's ``arequest`` with each request's intent and agent in its scope and
    its ranking filed under its response's id; a ``check_only`` ranked call stops at it
    (:class:`~.request_scope.CallerChecked`: the broker's caller checks have passed)."""

    @functools.wraps(inner)
    async def arequest(
        agent_id: str, intent: str, context: dict[str, Any] | None = None, **kwargs: Any
    ) -> Any:
        call = current_call()
        if call is not None and call.check_only:  # the caller checks passed: no request
            raise CallerChecked(agent_id)
        with request_scope(intent, agent_id) as scope:
            response = await inner(agent_id, intent, context, **kwargs)
        if scope.outcome is not None:
            _file(attached, scope.outcome, response)
        return response

    return arequest


def settings_named(settings: NautilusSettings) -> dict[str, Any]:
    """The ranking knobs ``settings`` sets, by variable, as the docs write them (a decay
    as its text), and the embedder as resolved."""
    named: dict[str, Any] = {}
    for knob in KNOBS:
        if knob.kind == "embedder" and knob.field != "embedder":
            continue
        value = getattr(settings, knob.field)
        if knob.field == "embedder":
            named[knob.variable] = settings.resolved_embedder
        elif knob_is_set(value, DEFAULTS[knob.field]):
            named[knob.variable] = knob.show(value) if knob.show else value
    return named


def _source_ids(broker: Any) -> list[str]:
    return [str(s.id) for s in broker.sources]


def _adopt_sources(
    attached: AttachedRanking, embedder: Embedder | None, problems: tuple[Any, ...] | None
) -> None:
    """What depends on the broker's sources, made (again, after a reload): the boosts
    checked against them (warned and dropped), the ranker, the routing vocabulary."""
    broker, settings = attached.broker, attached.settings
    ids = _source_ids(broker)
    found = (
        boost_problems(settings, ids) + named_source_problems(settings, ids)
        if problems is None
        else problems
    )
    for problem in found:
        log_problem(problem)
    applied = applied_settings(settings, ids) if found else settings
    attached.synthesizer.ranker = (
        RankingSynthesizer.from_settings(applied, embedder=embedder)
        if applied.ranking_enabled
        else None
    )
    if problems is None:  # a reload: the profiles' boosts against the new sources too
        lenient = settings.model_copy(update={"config_strict": False})
        attached.synthesizer.agents = agent_rankers(lenient, ids, embedder)
        if attached.config_path is not None:  # the fits against the file now served
            for problem in served_fit_problems(settings, attached.config_path):
                log_problem(problem)
    attached.routing_words = _vocabulary(broker, settings)
    if attached.query_vectors is not None:
        attached.vector_sources = give_query_vectors(broker, attached.query_vectors)


def _vocabulary(broker: Any, settings: NautilusSettings) -> RoutingWords:
    """The broker's routing vocabulary, built with its own ``build_keyword_map``."""
    try:
        build = importlib.import_module("nautilus.analysis.pattern_matching").build_keyword_map
        keyword_map = broker.config.analysis.keyword_map or {}
        return routing_words(
            broker.sources,
            keyword_map,
            build,
            curated_as_content=settings.ranking_curated_keywords == "content",
        )
    except Exception as exc:
        seam_missing(
            "nautilus.analysis.pattern_matching.build_keyword_map",
            f"routing words are ranked as query text ({type(exc).__name__}: {str(exc)[:120]})",
        )
        return NO_ROUTING_WORDS


def _file(attached: AttachedRanking, outcome: RequestRanking, response: Any) -> None:
    """File one request's ranking under ``response``'s id: to the ranked call waiting
    for it, to the store, and in one log line. Never fails the broker's answer."""
    try:
        outcome = outcome.with_request_id(str(response.request_id))
        call = current_call()
        if call is not None and call.outcome is None:
            call.outcome = outcome
        attached.store.put(outcome)
        logger.info(
            "upstream_request_ranked",
            request_id=outcome.request_id,
            settings=attached.ranked_with,
            profile=outcome.profile,
            ranked=outcome.fallback is None and bool(outcome.ranking),
            rows=len(outcome.ranking),
            routing_words_left_out=outcome.query != outcome.ranked_by,
            budget=outcome.budget,
            fallback=outcome.fallback,
        )
    except Exception as exc:  # the answer is the broker's: never fail it here
        logger.warning(
            "upstream_ranking_not_filed",
            error_type=type(exc).__name__,
            error=str(exc)[:200],
            action="the response is returned; its ranking is not kept",
        )


def attached_ranking(broker: Any) -> AttachedRanking | None:
    """The ranking attached to ``broker`` (None: none is), e.g. to read rankings on a
    broker that ``python -m nautilus_ranking.upstream serve`` attached to."""
    found = getattr(broker, "__dict__", {}).get("_nautilus_ranking")
    return found if isinstance(found, AttachedRanking) else None
