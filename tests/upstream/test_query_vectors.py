"""The query vectors the attachment gives the broker's ``pgvector`` adapters, without a
broker: which adapters get them, what they embed, and a missing seam (the real broker
and PostgreSQL: inside/test_pgvector_loaded.py)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from structlog.testing import capture_logs

from nautilus_ranking.embedders import embedder_from_name
from nautilus_ranking.upstream import version
from nautilus_ranking.upstream.query_vectors import QueryVectors, give_query_vectors
from nautilus_ranking.upstream.request_scope import request_scope


class NoopEmbedder:
    """Named as the broker's refusing default is."""

    def embed(self, text: str) -> list[float]:
        raise RuntimeError("refuses")


class OperatorsEmbedder:
    def embed(self, text: str) -> list[float]:
        return [1.0, 0.0]


def adapter(source_type: str, embedder: Any) -> SimpleNamespace:
    return SimpleNamespace(source_type=source_type, _broker_default_embedder=embedder)


def vectors(dim: int = 64) -> QueryVectors:
    return QueryVectors.from_settings("hashing", dim, 100, lambda intent: intent.split(":")[-1])


def test_only_pgvector_adapters_with_the_brokers_refusal_get_our_vectors() -> None:
    ours = vectors()
    theirs = OperatorsEmbedder()
    adapters = {
        "notes": adapter("pgvector", NoopEmbedder()),
        "docs": adapter("pgvector", theirs),
        "tickets": adapter("postgres", NoopEmbedder()),
    }
    broker = SimpleNamespace(_adapters=adapters)
    assert give_query_vectors(broker, ours) == ["notes"]
    assert adapters["notes"]._broker_default_embedder is ours
    assert adapters["docs"]._broker_default_embedder is theirs  # the operator's stays
    assert isinstance(adapters["tickets"]._broker_default_embedder, NoopEmbedder)
    assert give_query_vectors(broker, ours) == ["notes"]  # again (a reload): the same


def test_the_vector_is_the_ranked_query_embedded_at_the_dimension() -> None:
    ours = vectors(64)
    hashing = embedder_from_name("hashing", 64)
    with request_scope("kb: forgot my password"):
        vector = ours.embed("")  # what the adapter hands it: the unset raw_intent
    assert len(vector) == 64
    np.testing.assert_allclose(vector, hashing.embed(" forgot my password"))
    # a text the caller gave (context["raw_intent"]) is embedded as it is
    np.testing.assert_allclose(ours.embed("export invoices"), hashing.embed("export invoices"))
    assert ours.model_id == hashing.model_id  # as load records it in nautilus_vector_models


def test_outside_a_request_there_is_nothing_to_embed() -> None:
    with pytest.raises(Exception, match="no request intent to embed"):
        vectors().embed("")


def test_a_broker_without_adapters_is_one_seam_warning() -> None:
    version._missing_said.clear()
    with capture_logs() as logs:
        assert give_query_vectors(SimpleNamespace(), vectors()) == []
    missing = [e for e in logs if e["event"] == "upstream_seam_missing"]
    assert [e["seam"] for e in missing] == ["Broker._adapters"]
    assert "context['embedding']" in missing[0]["action"]


def test_the_dimension_is_checked_as_every_setting_is(monkeypatch: pytest.MonkeyPatch) -> None:
    from nautilus_ranking import NautilusSettings

    monkeypatch.setenv("NAUTILUS_UPSTREAM_VECTOR_DIM", "4096")  # past what HNSW indexes
    with capture_logs() as logs:
        settings = NautilusSettings()
    assert settings.upstream_vector_dim == 1024
    warned = [e for e in logs if "NAUTILUS_UPSTREAM_VECTOR_DIM" in str(e)]
    assert warned and "2000" in str(warned[0])
    monkeypatch.setenv("NAUTILUS_UPSTREAM_VECTOR_DIM", "0")
    assert NautilusSettings().upstream_vector_dim == 0
