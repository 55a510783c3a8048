"""nautilus — the ranking layer for retrieval brokers."""

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
from nautilus.ranking_boost import BOOST_LEVELS, BoostWeights
from nautilus.records import AdapterResult, BrokerResponse, ErrorRecord, RankedRow, SourceWarning
from nautilus.response_hash import compute_response_hash
from nautilus.synthesis.base import Synthesizer
from nautilus.synthesis.basic import BasicSynthesizer
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

# The one place the version is written: pyproject.toml reads it (dynamic version), so the
# package metadata, ``nautilus --version`` and the service's OpenAPI document agree.
__version__ = "0.1.0"
