"""A broker assembled once from the settings, with what every request on it needs.

Every way in — ``nautilus-ranking serve``, ``nautilus-ranking mcp``, ``nautilus-ranking query``, the
retrievers — assembles its broker here, so the checks happen once and alike: a
sources file that lists no source is refused, a boost naming no source is warned
about and dropped (refused in strict mode), and the effective settings (the ones a
request's overrides start from) are the ones the broker applies.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from nautilus_ranking.broker import Broker, synthesizer_for
from nautilus_ranking.embedders import Embedder, embedder_from_name
from nautilus_ranking.errors import Problem
from nautilus_ranking.profiles.build import Profile, Profiles, load_profiles
from nautilus_ranking.profiles.read import profiles_in_environment
from nautilus_ranking.settings.knobs import KNOBS
from nautilus_ranking.settings.model import ConfigError, NautilusSettings, log_problem
from nautilus_ranking.source_settings import (
    applied_settings,
    boost_problems,
    config_path,
    named_source_problems,
)
from nautilus_ranking.sources.base import Source
from nautilus_ranking.tracing import configure as configure_tracing

#: What a sources file must list (said when it lists nothing).
NO_SOURCES = "at least one source; docs/sources.md has an example of each type"


@dataclass
class Engine:
    """A broker and the settings its requests start from.

    ``settings`` are effective (boosts that name no source dropped); ``embedder`` is
    the one per-request rankers reuse (onnx is loaded once a process); ``problems``
    lists every value skipped at start-up. ``profiles`` are the configured ranking
    profiles, and ``by_profile`` each one's engine: the same sources, its own settings
    and ranker, built once here (a request only picks one).
    """

    settings: NautilusSettings
    broker: Broker
    embedder: Embedder | None
    problems: tuple[Problem, ...] = ()
    profiles: Profiles = field(default_factory=Profiles)
    by_profile: dict[str, Engine] = field(default_factory=dict)
    #: The profile this engine ranks for (None: the global knobs).
    profile: Profile | None = None

    @property
    def sources(self) -> list[Source]:
        return self.broker.sources

    @property
    def source_ids(self) -> list[str]:
        return [s.id for s in self.broker.sources]

    @classmethod
    def assemble(
        cls, settings: NautilusSettings | None = None, config: str | Path | None = None
    ) -> Engine:
        """The broker of the sources file ``config`` (else ``NAUTILUS_CONFIG``, else the
        demo's) under ``settings``; :class:`ConfigError` when the file lists no source,
        or in strict mode for a boost that names none."""
        settings = settings if settings is not None else NautilusSettings()
        configure_tracing(
            query_text=settings.trace_query_text,
            propagate=settings.trace_propagate,
            baggage=settings.trace_baggage,
        )
        path = config_path(settings, config)
        broker = Broker.from_config(path, settings)
        if not broker.sources:
            broker.close()
            raise ConfigError(
                (
                    Problem(
                        "NAUTILUS_CONFIG",
                        str(path),
                        "the sources file lists no sources",
                        NO_SOURCES,
                    ),
                )
            )
        ids = [s.id for s in broker.sources]
        try:
            profiles = load_profiles(settings)
        except ConfigError:
            broker.close()
            raise
        engine = cls(
            applied_settings(settings, ids),
            broker,
            _embedder_of(broker, settings),
            settings.problems
            + boost_problems(settings, ids)
            + named_source_problems(settings, ids)
            + profiles.problems,
            profiles,
        )
        try:
            engine.build_profiles(settings)
        except ConfigError:
            broker.close()
            raise
        return engine

    def build_profiles(self, settings: NautilusSettings) -> None:
        """Each profile's engine over this one's sources; a boost naming no source is
        warned about and dropped, or refused in strict mode."""
        if not self.profiles:
            return
        ids = self.source_ids
        found: list[Problem] = []
        built: dict[str, Engine] = {}
        for name, profile in self.profiles.by_name.items():
            own = profile.settings(self.settings)
            where = profile.origins.get("source_boosts", "")
            found.extend(
                Problem(where, p.value, p.reason, p.valid, profile=name)
                for p in boost_problems(own, ids)
                if "source_boosts" in profile.values
            )
            own = applied_settings(own, ids)
            if own.ranking_enabled and self.embedder is None:  # one model for every profile
                self.embedder = embedder_from_name(
                    settings.resolved_embedder,
                    cache_size=settings.embedder_cache_size,
                    data_dir=settings.data_dir,
                    disk_cache_mb=settings.embedder_disk_cache_mb,
                )
            broker = Broker(
                self.broker.sources,
                synthesizer_for(own, self.embedder),
                self.broker.limit,
                prepare_timeout_s=self.broker.prepare_timeout_s,
                min_confidence=own.ranking_min_confidence,
            )
            built[name] = Engine(own, broker, self.embedder, profile=profile)
        if found and settings.config_strict:
            raise ConfigError(tuple(found))
        for problem in found:
            log_problem(problem)
        self.problems += tuple(found)
        self.by_profile = built

    def use_sources(self, sources: list[Source]) -> None:
        """These sources (a server's timed wrappers) for this engine and its profiles'."""
        self.broker.sources = sources
        for engine in self.by_profile.values():
            engine.broker.sources = sources

    @classmethod
    def of(
        cls, broker: Broker, settings: NautilusSettings | None = None, profiles: bool = False
    ) -> Engine:
        """A caller's own broker; without ``settings``, its ranker's own knobs (read
        from the synthesizer, not from the environment) are what overrides start from.
        ``profiles``: the ranking profiles of the environment (and ``.env``) too, over
        those knobs (only when a profile variable or ``NAUTILUS_PROFILES_FILE`` is set)."""
        own = settings if settings is not None else _settings_of(broker)
        ids = [s.id for s in broker.sources]
        engine = cls(applied_settings(own, ids), broker, _embedder_of(broker, own))
        if profiles and profiles_in_environment(NautilusSettings.model_config.get("env_file")):
            process = NautilusSettings()
            engine.profiles = load_profiles(process)
            engine.problems += engine.profiles.problems
            engine.build_profiles(process)
        return engine


#: The process settings feedback runs on: its switch and knobs, the data directory its
#: log and key live in, the cursor keys its cites are signed with, the sources file its
#: config hash covers.
FEEDBACK_FIELDS = (
    "feedback",
    "feedback_cite_lifetime_days",
    "feedback_retention_days",
    "feedback_max_mb",
    "feedback_text",
    "feedback_opensearch_url",
    "data_dir",
    "cursor_key",
    "cursor_previous_keys",
    "config",
)


def with_process_feedback(engine: Engine, process: NautilusSettings) -> Engine:
    """``engine`` (a caller's own broker's) with the process's feedback settings, when
    they turn feedback on: an in-process retriever is citable as a server is."""
    if process.feedback:
        engine.settings = engine.settings.model_copy(
            update={name: getattr(process, name) for name in FEEDBACK_FIELDS}
        )
    return engine


def _embedder_of(broker: Broker, settings: NautilusSettings) -> Embedder | None:
    """The embedder per-request rankers reuse: the broker's own, else (passthrough) the
    settings' when it is the cheap default; None defers loading a model to the first
    request that ranks."""
    embedder = broker.synthesizer.embedder
    if embedder is None and settings.resolved_embedder == "hashing":
        embedder = embedder_from_name("hashing")
    return embedder


def _settings_of(broker: Broker) -> NautilusSettings:
    """Settings that describe ``broker``'s ranker, built without reading the environment:
    each knob its ranker states, named for its field by the knob's declaration."""
    stated = broker.synthesizer.ranker_values()
    values = {k.field: stated[k.ranker] for k in KNOBS if k.ranker and k.ranker in stated}
    return NautilusSettings.model_construct(**values)
