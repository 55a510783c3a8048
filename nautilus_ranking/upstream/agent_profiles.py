"""Inside the Nautilus broker, which ranking a request gets: by its ``agent_id``.

A ranking profile lists the broker agents it ranks for (``…__AGENTS``); the broker
names the agent of every request (``arequest(agent_id, intent, …)``), so the
attachment builds each profile's ranker once, against the broker's sources, and the
synthesizer picks the one of the request's agent. An agent no profile lists gets the
global knobs. This is only as strong as the broker's own binding of callers to agent
ids: whoever may ask as an agent gets that agent's ranking.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from nautilus_ranking.embedders import Embedder
from nautilus_ranking.errors import Problem
from nautilus_ranking.profiles.build import load_profiles
from nautilus_ranking.settings.model import ConfigError, NautilusSettings, log_problem
from nautilus_ranking.source_settings import applied_settings, boost_problems
from nautilus_ranking.synthesis.ranking import RankingSynthesizer


@dataclass(frozen=True)
class AgentRankers:
    """Each listed agent's profile, and each profile's ranker (None: it ranks nothing,
    the broker's own answer)."""

    by_agent: Mapping[str, str] = field(default_factory=dict)
    rankers: Mapping[str, RankingSynthesizer | None] = field(default_factory=dict)
    #: Each profile's ``NAUTILUS_RANKING_MAX_TOKENS`` (its own, else the global one).
    budgets: Mapping[str, int | None] = field(default_factory=dict)
    #: Each profile's ``NAUTILUS_RANKING_MIN_CONFIDENCE`` (its own, else the global one).
    min_confidences: Mapping[str, float | None] = field(default_factory=dict)
    #: Each profile's ``NAUTILUS_RANKING_BUDGET_PASSAGES`` (its own, else the global one).
    passages: Mapping[str, bool] = field(default_factory=dict)

    def profile_of(self, agent_id: object) -> str | None:
        """The profile that ranks ``agent_id``'s requests (None: the global knobs)."""
        return self.by_agent.get(agent_id) if isinstance(agent_id, str) else None

    def budget_of(self, profile: str | None, default: int | None) -> int | None:
        """The token budget of ``profile``'s requests (None profile: ``default``)."""
        return self.budgets.get(profile, default) if profile is not None else default

    def min_confidence_of(self, profile: str | None, default: float | None) -> float | None:
        """The minimum confidence of ``profile``'s requests (None profile: ``default``)."""
        return self.min_confidences.get(profile, default) if profile is not None else default

    def passages_of(self, profile: str | None, default: bool) -> bool:
        """Whether ``profile``'s budget hands a row too large for it over as its passage
        (None profile: ``default``)."""
        return self.passages.get(profile, default) if profile is not None else default


def agent_rankers(
    settings: NautilusSettings, source_ids: Sequence[str], embedder: Embedder | None
) -> AgentRankers:
    """The profiles' rankers over the broker's sources; a boost naming none of them is
    warned about and dropped, or refused in strict mode (as the global boosts are)."""
    profiles = load_profiles(settings)
    if not profiles:
        return AgentRankers()
    found: list[Problem] = []
    rankers: dict[str, RankingSynthesizer | None] = {}
    budgets: dict[str, int | None] = {}
    min_confidences: dict[str, float | None] = {}
    passages: dict[str, bool] = {}
    for name, profile in profiles.by_name.items():
        own = profile.settings(settings)
        budgets[name] = own.ranking_max_tokens
        min_confidences[name] = own.ranking_min_confidence
        passages[name] = own.ranking_budget_passages
        if "source_boosts" in profile.values:
            where = profile.origins["source_boosts"]
            found.extend(
                Problem(where, p.value, p.reason, p.valid) for p in boost_problems(own, source_ids)
            )
        own = applied_settings(own, source_ids)
        rankers[name] = (
            RankingSynthesizer.from_settings(own, embedder=embedder)
            if own.ranking_enabled
            else None
        )
    if found and settings.config_strict:
        raise ConfigError(tuple(found))
    for problem in found:
        log_problem(problem)
    return AgentRankers(profiles.by_agent, rankers, budgets, min_confidences, passages)
