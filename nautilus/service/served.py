"""The broker a server runs, assembled once for ``nautilus serve`` and ``nautilus mcp``.

Apart from the web stack so that the MCP server (whose extra has no FastAPI) shares it.
"""

from __future__ import annotations

from dataclasses import dataclass

from nautilus.broker import Broker, applied_settings
from nautilus.config import NautilusSettings
from nautilus.embedders import Embedder, embedder_from_name
from nautilus.service import metrics
from nautilus.sources.base import Source


@dataclass
class ServedBroker:
    """A broker as a server runs it: its sources timed for the metrics, the settings with
    the boosts that name no source dropped, and the embedder per-request overrides use."""

    settings: NautilusSettings
    broker: Broker
    raw_sources: list[Source]
    embedder: Embedder | None


def serve_broker(settings: NautilusSettings) -> ServedBroker:
    """The broker ``nautilus serve`` and ``nautilus mcp`` serve; a bad sources file or a
    strict-mode problem raises here, before anything is served."""
    broker = Broker.from_config(None, settings)
    effective = applied_settings(settings, [s.id for s in broker.sources])
    raw_sources = list(broker.sources)
    broker.sources = [metrics.TimedSource(s) for s in raw_sources]
    # Per-request overrides reuse the ranking embedder (onnx is shared per process).
    embedder = broker.synthesizer.embedder
    if embedder is None and settings.embedder == "hashing":
        embedder = embedder_from_name("hashing")
    return ServedBroker(effective, broker, raw_sources, embedder)
