"""A broker assembled once from the settings, with what every request on it needs.

Every way in — ``nautilus-ranking serve``, ``nautilus-ranking mcp``, ``nautilus-ranking query``, the
retrievers — assembles its broker here, so the checks happen once and alike: a
sources file that lists no source is refused, a boost naming no source is warned
about and dropped (refused in strict mode), and the effective settings (the ones a
request's overrides start from) are the ones the broker applies.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nautilus_ranking.broker import Broker, applied_settings, boost_problems, config_path
from nautilus_ranking.config import ConfigError, NautilusSettings
from nautilus_ranking.embedders import Embedder, embedder_from_name
from nautilus_ranking.errors import Problem
from nautilus_ranking.sources.base import Source

#: What a sources file must list (said when it lists nothing).
NO_SOURCES = "at least one source; docs/sources.md has an example of each type"


@dataclass
class Engine:
    """A broker and the settings its requests start from.

    ``settings`` are effective (boosts that name no source dropped); ``embedder`` is
    the one per-request rankers reuse (onnx is loaded once a process); ``problems``
    lists every value skipped at start-up.
    """

    settings: NautilusSettings
    broker: Broker
    embedder: Embedder | None
    problems: tuple[Problem, ...] = ()

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
        return cls(
            applied_settings(settings, ids),
            broker,
            _embedder_of(broker, settings),
            settings.problems + boost_problems(settings, ids),
        )

    @classmethod
    def of(cls, broker: Broker, settings: NautilusSettings | None = None) -> Engine:
        """A caller's own broker; without ``settings``, its ranker's own knobs (read
        from the synthesizer, not from the environment) are what overrides start from."""
        if settings is None:
            settings = _settings_of(broker)
        ids = [s.id for s in broker.sources]
        return cls(applied_settings(settings, ids), broker, _embedder_of(broker, settings))


def _embedder_of(broker: Broker, settings: NautilusSettings) -> Embedder | None:
    """The embedder per-request rankers reuse: the broker's own, else (passthrough) the
    settings' when it is the cheap default; None defers loading a model to the first
    request that ranks."""
    embedder = broker.synthesizer.embedder
    if embedder is None and settings.embedder == "hashing":
        embedder = embedder_from_name("hashing")
    return embedder


def _settings_of(broker: Broker) -> NautilusSettings:
    """Settings that describe ``broker``'s ranker, built without reading the environment."""
    synthesizer = broker.synthesizer
    values: dict[str, Any] = {}
    if synthesizer.ranking_enabled:
        for name, attribute in (
            ("ranking_top_k", "top_k"),
            ("ranking_idf", "idf"),
            ("source_boosts", "source_boosts"),
            ("ranking_max_candidates", "max_candidates"),
            ("ranking_dedup_key", "dedup_key"),
        ):
            if hasattr(synthesizer, attribute):
                values[name] = getattr(synthesizer, attribute)
    return NautilusSettings.model_construct(**values)
