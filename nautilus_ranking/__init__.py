"""nautilus — the ranking layer for retrieval brokers.

The public names below are imported on first use (PEP 562), so
``import nautilus_ranking`` — and ``nautilus-ranking --version`` — loads neither numpy
nor pydantic; ``from nautilus_ranking import Broker`` loads what the broker needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nautilus_ranking.lazy import lazy_getattr

if TYPE_CHECKING:
    from nautilus_ranking.broker import Broker
    from nautilus_ranking.embedders import (
        Embedder,
        EmbeddingUnavailableError,
        HashingEmbedder,
        NoopEmbedder,
    )
    from nautilus_ranking.errors import NautilusError, Problem
    from nautilus_ranking.log import configure_logging
    from nautilus_ranking.records import (
        AdapterResult,
        BrokerResponse,
        ErrorRecord,
        RankedRow,
        SourceWarning,
    )
    from nautilus_ranking.response_hash import compute_response_hash
    from nautilus_ranking.settings.model import ConfigError, NautilusSettings, parse_source_boosts
    from nautilus_ranking.synthesis.base import Synthesizer
    from nautilus_ranking.synthesis.basic import BasicSynthesizer
    from nautilus_ranking.synthesis.ranking import RankingSynthesizer
    from nautilus_ranking.synthesis.ranking_boost import BOOST_LEVELS, BoostWeights

__all__ = [
    "BOOST_LEVELS",
    "AdapterResult",
    "BasicSynthesizer",
    "BoostWeights",
    "Broker",
    "BrokerResponse",
    "ConfigError",
    "Embedder",
    "EmbeddingUnavailableError",
    "ErrorRecord",
    "HashingEmbedder",
    "NautilusError",
    "NautilusSettings",
    "NoopEmbedder",
    "Problem",
    "RankedRow",
    "RankingSynthesizer",
    "SourceWarning",
    "Synthesizer",
    "compute_response_hash",
    "configure_logging",
    "parse_source_boosts",
]

#: Where each public name lives (imported by :func:`__getattr__` on first use).
_HOMES = {
    "Broker": "nautilus_ranking.broker",
    "ConfigError": "nautilus_ranking.settings.model",
    "NautilusSettings": "nautilus_ranking.settings.model",
    "parse_source_boosts": "nautilus_ranking.settings.model",
    "Embedder": "nautilus_ranking.embedders",
    "EmbeddingUnavailableError": "nautilus_ranking.embedders",
    "HashingEmbedder": "nautilus_ranking.embedders",
    "NoopEmbedder": "nautilus_ranking.embedders",
    "NautilusError": "nautilus_ranking.errors",
    "Problem": "nautilus_ranking.errors",
    "configure_logging": "nautilus_ranking.log",
    "AdapterResult": "nautilus_ranking.records",
    "BrokerResponse": "nautilus_ranking.records",
    "ErrorRecord": "nautilus_ranking.records",
    "RankedRow": "nautilus_ranking.records",
    "SourceWarning": "nautilus_ranking.records",
    "compute_response_hash": "nautilus_ranking.response_hash",
    "Synthesizer": "nautilus_ranking.synthesis.base",
    "BasicSynthesizer": "nautilus_ranking.synthesis.basic",
    "BOOST_LEVELS": "nautilus_ranking.synthesis.ranking_boost",
    "BoostWeights": "nautilus_ranking.synthesis.ranking_boost",
    "RankingSynthesizer": "nautilus_ranking.synthesis.ranking",
}


__getattr__ = lazy_getattr(__name__, _HOMES, globals())


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


# The one place the version is written: pyproject.toml reads it (dynamic version), so the
# package metadata, ``nautilus-ranking --version`` and the service's OpenAPI document agree.
__version__ = "0.1.0"
