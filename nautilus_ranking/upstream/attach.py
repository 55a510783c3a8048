"""``attach_ranking(broker)``: our ranking inside a broker built by ``Broker.from_config``.

nautilus-rkm 0.3.0 takes its synthesizer as a constructor argument, and
``Broker.from_config`` hard-codes ``BasicSynthesizer()``; it has no setting for it.
So the attachment does, on the built instance, what ``from_config`` would do if it
selected one:

1. reads the ``NAUTILUS_*`` settings (:class:`~nautilus_ranking.config.NautilusSettings`)
   and checks the boosts against the broker's sources (warn and drop, or refuse in
   strict mode, as our own broker does);
2. replaces the instance's ``_synthesizer`` (the attribute ``from_config`` set; the
   broker reads it for every request) with a
   :class:`~nautilus_ranking.upstream.synthesizer.BrokerSynthesizer` that keeps the
   broker's own one as its passthrough;
3. wraps the instance's ``arequest`` (``request`` and the broker's HTTP and MCP
   servers all go through it) to hand ``merge`` the request's intent in a context
   variable, and to file each ranking under the response's ``request_id``.

Both are internals of the broker: the versions this was tested on are
``TESTED_BROKER_VERSIONS``, and another version gets one warning.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from nautilus_ranking.broker import applied_settings, boost_problems
from nautilus_ranking.config import ConfigError, NautilusSettings, log_problem
from nautilus_ranking.embedders import Embedder
from nautilus_ranking.errors import NautilusError
from nautilus_ranking.log import get_logger
from nautilus_ranking.synthesis.ranking import RankingSynthesizer
from nautilus_ranking.upstream.agent_profiles import agent_rankers
from nautilus_ranking.upstream.outcome import RequestRanking
from nautilus_ranking.upstream.request_scope import request_scope
from nautilus_ranking.upstream.source_kinds import SourceKind, kinds_of
from nautilus_ranking.upstream.store import DEFAULT_KEEP, RankingStore
from nautilus_ranking.upstream.synthesizer import BrokerSynthesizer
from nautilus_ranking.upstream.version import check_broker_version, installed_broker_version

logger = get_logger("nautilus_ranking.upstream")

#: The broker attribute that holds its synthesizer (set by ``Broker.__init__``).
SYNTHESIZER_ATTRIBUTE = "_synthesizer"


class IncompatibleBrokerError(NautilusError, TypeError):
    """The object is not a broker this attachment knows how to attach to."""


class AttachedRanking:
    """Our ranking, attached to one broker: its settings and the rankings it made.

    ``ranking(request_id)`` is the accessor: the full ranking (scores, components)
    and the rows left out of one response, by the response's ``request_id``; None
    when ranking is off, or the request is older than the last ``keep``.
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
) -> AttachedRanking:
    """Rank a Nautilus broker's answers with ours; returns the accessor.

    ``broker``: a ``nautilus.Broker`` (nautilus-rkm), as ``Broker.from_config`` built
    it. ``settings``: default, the ``NAUTILUS_*`` environment and ``.env``.
    ``embedder``: default, the one ``NAUTILUS_EMBEDDER`` names. ``keep``: how many
    requests' rankings the accessor keeps. Attaching twice returns the first
    attachment. Raises :class:`IncompatibleBrokerError` when ``broker`` has no
    synthesizer or ``arequest`` to attach to, and
    :class:`~nautilus_ranking.config.ConfigError` in strict mode when a boost names
    no source of the broker.
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
    ids = [str(s.id) for s in broker.sources]
    problems = boost_problems(settings, ids)
    if problems:
        if settings.config_strict:
            raise ConfigError(problems)
        for problem in problems:
            log_problem(problem)
        settings = applied_settings(settings, ids)
    if settings.ranking_max_tokens is not None:
        logger.warning(
            "upstream_setting_not_applied",
            variable="NAUTILUS_RANKING_MAX_TOKENS",
            reason="the broker's response has no token budget; data keeps the top K",
        )
    ranker = (
        RankingSynthesizer.from_settings(settings, embedder=embedder)
        if settings.ranking_enabled
        else None
    )

    def source_kinds() -> Mapping[str, SourceKind]:
        return kinds_of(broker.sources)  # read per request: a reload may change them

    agents = agent_rankers(settings, ids, embedder)  # ranking profiles, by agent id
    synthesizer = BrokerSynthesizer(ranker, existing, source_kinds, agents)
    store = RankingStore(keep)
    attached = AttachedRanking(broker, synthesizer, settings, store)
    inner = broker.arequest

    @functools.wraps(inner)
    async def arequest(
        agent_id: str, intent: str, context: dict[str, Any] | None = None, **kwargs: Any
    ) -> Any:
        with request_scope(intent, agent_id) as scope:
            response = await inner(agent_id, intent, context, **kwargs)
        if scope.outcome is not None:
            try:
                store.put(scope.outcome.with_request_id(str(response.request_id)))
            except Exception as exc:  # the answer is the broker's: never fail it here
                logger.warning(
                    "upstream_ranking_not_filed",
                    error_type=type(exc).__name__,
                    error=str(exc)[:200],
                    action="the response is returned; its ranking is not kept",
                )
        return response

    setattr(broker, SYNTHESIZER_ATTRIBUTE, synthesizer)
    broker.arequest = arequest
    broker.__dict__["_nautilus_ranking"] = attached
    logger.info(
        "upstream_ranking_attached",
        broker_version=installed_broker_version(),
        ranking_enabled=ranker is not None,
        **({"profiles": dict(agents.by_agent)} if agents.by_agent else {}),
        sources={sid: kind.source_type for sid, kind in source_kinds().items()},
    )
    return attached


def attached_ranking(broker: Any) -> AttachedRanking | None:
    """The ranking attached to ``broker`` (None: none is), e.g. to read rankings on a
    broker that ``python -m nautilus_ranking.upstream serve`` attached to."""
    found = getattr(broker, "__dict__", {}).get("_nautilus_ranking")
    return found if isinstance(found, AttachedRanking) else None
