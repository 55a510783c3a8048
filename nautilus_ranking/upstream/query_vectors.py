"""Query vectors for the broker's ``pgvector`` adapters, when the caller passes none.

nautilus-rkm 0.3.0's ``PgVectorAdapter`` takes its query vector from
``context["embedding"]`` first, then from an embedder: a per-source one (none can be
configured: ``embedder: default`` names the broker's), then the broker's default,
which ``Broker.from_config`` sets to a strict ``NoopEmbedder`` that refuses. So a
request without ``context["embedding"]`` errors on every pgvector source.

Putting a vector into the request's ``context`` would fix that where the broker's LLM
analyser reads it too (its providers serialise the whole context into the prompt).
So the attachment gives the adapters our embedder as their default instead
(:func:`give_query_vectors`): it replaces each pgvector adapter's
``_broker_default_embedder`` while that is still the broker's refusing
``NoopEmbedder``. ``context["embedding"]`` still wins when a caller passes one.

The adapter hands its embedder ``context["raw_intent"]``, which the broker never sets
(an empty string). :class:`QueryVectors` then embeds the request's intent, taken from
the request scope the attachment opens around ``arequest``, without the words that
only routed it (the ranked query). The vectors are ``NAUTILUS_EMBEDDER``'s at
``NAUTILUS_UPSTREAM_VECTOR_DIM`` dimensions (the hashing embedder; a model has its
own): what ``nautilus-ranking load`` writes with ``layout: nautilus-broker`` and the
same ``dim``, and at most 2,000, so pgvector can index them (HNSW).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from nautilus_ranking.embedders import Embedder, embedder_from_name
from nautilus_ranking.upstream.request_scope import current_scope
from nautilus_ranking.upstream.version import seam_missing

#: The broker's own embedder class, whose refusing instance we replace.
BROKER_NOOP = "NoopEmbedder"
#: The adapter attribute that holds the broker's default embedder.
DEFAULT_EMBEDDER_ATTRIBUTE = "_broker_default_embedder"


class QueryVectors:
    """The broker's ``Embedder`` protocol (``embed(text) -> list[float]``) over ours.

    ``text`` when the caller gave one (``context["raw_intent"]``), else the current
    request's ranked query (``query_of(intent)``)."""

    def __init__(self, embedder: Embedder, query_of: Callable[[str], str]) -> None:
        self.embedder = embedder
        self.query_of = query_of
        #: As ``nautilus_vector_models`` records it for the tables ``load`` wrote.
        self.model_id = str(getattr(embedder, "model_id", type(embedder).__name__))

    @classmethod
    def from_settings(
        cls, embedder_name: str, dim: int, cache_size: int, query_of: Callable[[str], str]
    ) -> QueryVectors:
        """The vectors ``nautilus-ranking load`` writes for ``embedder_name`` at ``dim``
        (``noop`` stores lexical vectors: the hashing embedder's)."""
        name = "hashing" if embedder_name == "noop" else embedder_name
        return cls(embedder_from_name(name, dim, cache_size), query_of)

    def embed(self, text: str) -> list[float]:
        if not text:
            scope = current_scope()
            if scope is None:
                raise _unavailable(
                    "no request intent to embed (outside a request of the attached broker); "
                    "pass context['embedding']"
                )
            text = self.query_of(scope.intent)
        return [float(x) for x in self.embedder.embed(text)]


def give_query_vectors(broker: Any, vectors: QueryVectors) -> list[str]:
    """Make ``vectors`` the default embedder of every ``pgvector`` adapter of
    ``broker`` that still has the broker's refusing one; the source ids given it."""
    try:
        adapters = dict(broker._adapters)
    except Exception as exc:
        seam_missing(
            "Broker._adapters",
            f"pgvector sources need context['embedding'] ({type(exc).__name__}: {str(exc)[:120]})",
        )
        return []
    given = []
    for source_id, adapter in adapters.items():
        if getattr(adapter, "source_type", None) != "pgvector":
            continue
        current = getattr(adapter, DEFAULT_EMBEDDER_ATTRIBUTE, None)
        if isinstance(current, QueryVectors):
            given.append(str(source_id))
            continue
        if current is None or type(current).__name__ != BROKER_NOOP:
            if current is None:
                seam_missing(
                    "PgVectorAdapter._broker_default_embedder",
                    f"source {source_id!r} needs context['embedding']",
                )
            continue  # an embedder the operator set: theirs
        setattr(adapter, DEFAULT_EMBEDDER_ATTRIBUTE, vectors)
        given.append(str(source_id))
    return given


def _unavailable(message: str) -> Exception:
    """The broker's ``EmbeddingUnavailableError`` (a ``sources_errored`` entry)."""
    try:
        error: type[Exception] = importlib.import_module(
            "nautilus.adapters.embedder"
        ).EmbeddingUnavailableError
    except Exception:
        return RuntimeError(message)
    return error(message)
