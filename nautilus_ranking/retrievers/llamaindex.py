"""A LlamaIndex retriever over nautilus (extra ``nautilus-ranking[llamaindex]``).

``NautilusRetriever(broker=broker)`` ranks in this process; ``NautilusRetriever(
url="http://127.0.0.1:8000", api_key=..., top_k=5)`` asks a running ``nautilus-ranking serve``.
``retrieve``/``aretrieve`` return one ``NodeWithScore`` a ranked row, best first: the
node's text is the row's text, its score nautilus' score, and its metadata carries
``source``, ``id``, ``score``, ``rank``, ``explanation`` and ``fields`` (the last two
kept out of what an LLM or an embedder is shown).

Nothing here downloads anything: llama-index-core ships the NLTK data it would
otherwise fetch, and only its text splitters and token counters (not used here)
load a tokenizer.
"""

from __future__ import annotations

from typing import Any

try:
    from llama_index.core.base.base_retriever import BaseRetriever
    from llama_index.core.callbacks import CallbackManager
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
except ImportError as exc:  # pragma: no cover - the message is what a user needs
    raise ImportError(
        "nautilus_ranking.retrievers.llamaindex needs the 'llamaindex' extra: "
        "pip install 'nautilus-ranking[llamaindex]'"
    ) from exc

from nautilus_ranking.broker import Broker
from nautilus_ranking.retrievers.source import Hit, HitSource

_NOT_FOR_MODELS = ["explanation", "fields", "ranking_hash"]
#: A part's offsets and handle: shown to an LLM (the text is part of a longer row, as
#: the MCP line says), not embedded (they are not the row's content).
_NOT_FOR_EMBEDDING = [*_NOT_FOR_MODELS, "passage"]


class NautilusRetriever(BaseRetriever):
    """nautilus' ranking of every source, as LlamaIndex nodes with scores."""

    def __init__(
        self,
        broker: Broker | None = None,
        url: str | None = None,
        *,
        api_key: str | None = None,
        timeout_s: float = 30.0,
        callback_manager: CallbackManager | None = None,
        profile: str | None = None,
        **overrides: Any,
    ) -> None:
        """``overrides``: request fields by name (``top_k``, ``boosts``, ``sources``,
        ``idf`` … — those of ``POST /v1/query``); ``profile``: the ranking profile to
        rank with (one the key allows)."""
        self._source = HitSource(broker, url, api_key, timeout_s, overrides, profile=profile)
        super().__init__(callback_manager=callback_manager)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [_node(hit) for hit in self._source.hits(query_bundle.query_str)]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [_node(hit) for hit in await self._source.ahits(query_bundle.query_str)]


def _node(hit: Hit) -> NodeWithScore:
    node = TextNode(
        id_=hit.key,
        text=hit.text,
        metadata=hit.metadata(),
        excluded_llm_metadata_keys=list(_NOT_FOR_MODELS),
        excluded_embed_metadata_keys=list(_NOT_FOR_EMBEDDING),
    )
    return NodeWithScore(node=node, score=hit.score)
