"""nautilus — the ranking layer for retrieval brokers.

The public names below are imported on first use (PEP 562), so ``import nautilus`` —
and ``nautilus --version`` — loads neither numpy nor pydantic; ``from nautilus import
Broker`` loads what the broker needs, as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nautilus.lazy import lazy_getattr

if TYPE_CHECKING:
    from nautilus.broker import Broker
    from nautilus.config import ConfigError, NautilusSettings, parse_source_boosts
    from nautilus.embedders import (
        Embedder,
        EmbeddingUnavailableError,
        HashingEmbedder,
        NoopEmbedder,
    )
    from nautilus.errors import NautilusError, Problem
    from nautilus.log import configure_logging
    from nautilus.records import (
        AdapterResult,
        BrokerResponse,
        ErrorRecord,
        RankedRow,
        SourceWarning,
    )
    from nautilus.response_hash import compute_response_hash
    from nautilus.synthesis.base import Synthesizer
    from nautilus.synthesis.basic import BasicSynthesizer
    from nautilus.synthesis.boosts import BOOST_LEVELS, BoostWeights
    from nautilus.synthesis.ranking import RankingSynthesizer

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
    "Broker": "nautilus.broker",
    "ConfigError": "nautilus.config",
    "NautilusSettings": "nautilus.config",
    "parse_source_boosts": "nautilus.config",
    "Embedder": "nautilus.embedders",
    "EmbeddingUnavailableError": "nautilus.embedders",
    "HashingEmbedder": "nautilus.embedders",
    "NoopEmbedder": "nautilus.embedders",
    "NautilusError": "nautilus.errors",
    "Problem": "nautilus.errors",
    "configure_logging": "nautilus.log",
    "AdapterResult": "nautilus.records",
    "BrokerResponse": "nautilus.records",
    "ErrorRecord": "nautilus.records",
    "RankedRow": "nautilus.records",
    "SourceWarning": "nautilus.records",
    "compute_response_hash": "nautilus.response_hash",
    "Synthesizer": "nautilus.synthesis.base",
    "BasicSynthesizer": "nautilus.synthesis.basic",
    "BOOST_LEVELS": "nautilus.synthesis.boosts",
    "BoostWeights": "nautilus.synthesis.boosts",
    "RankingSynthesizer": "nautilus.synthesis.ranking",
}


__getattr__ = lazy_getattr(__name__, _HOMES, globals())


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


# The one place the version is written: pyproject.toml reads it (dynamic version), so the
# package metadata, ``nautilus --version`` and the service's OpenAPI document agree.
__version__ = "0.1.0"
