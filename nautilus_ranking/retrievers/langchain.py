"""A LangChain retriever over nautilus (extra ``nautilus-ranking[langchain]``).

``NautilusRetriever(broker=broker)`` ranks in this process; ``NautilusRetriever(
url="http://127.0.0.1:8000", api_key=..., top_k=5, boosts={"graph": "high"})`` asks a
running ``nautilus-ranking serve``. ``invoke``/``ainvoke`` return one ``Document`` a ranked
row, best first, with ``source``, ``id``, ``score``, ``rank``, ``explanation`` (the
score's components) and ``fields`` (the row) in its metadata.
"""

from __future__ import annotations

from typing import Any

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForRetrieverRun,
        CallbackManagerForRetrieverRun,
    )
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
except ImportError as exc:  # pragma: no cover - the message is what a user needs
    raise ImportError(
        "nautilus_ranking.retrievers.langchain needs the 'langchain' extra: "
        "pip install 'nautilus-ranking[langchain]'"
    ) from exc
from pydantic import Field, PrivateAttr, model_validator

from nautilus_ranking.broker import Broker
from nautilus_ranking.retrievers.source import OVERRIDE_FIELDS, Hit, HitSource


class NautilusRetriever(BaseRetriever):
    """nautilus' ranking of every source, as LangChain documents. Besides ``broker`` or
    ``url``, ``api_key`` and ``timeout_s``, it takes the request's fields by name
    (``top_k``, ``boosts``, ``sources``, ``idf`` … — those of ``POST /v1/query``),
    gathered in ``overrides``."""

    broker: Broker | None = None
    url: str | None = None
    api_key: str | None = None
    timeout_s: float = 30.0
    overrides: dict[str, Any] = Field(default_factory=dict)
    #: The ranking profile to rank with (one the key allows); None: the default.
    profile: str | None = None
    _source: HitSource = PrivateAttr()

    @model_validator(mode="before")
    @classmethod
    def _gather_overrides(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            given = {name: data.pop(name) for name in OVERRIDE_FIELDS if name in data}
            data["overrides"] = {**data.get("overrides", {}), **given}
        return data

    def model_post_init(self, context: Any) -> None:
        self._source = HitSource(
            self.broker,
            self.url,
            self.api_key,
            self.timeout_s,
            self.overrides,
            profile=self.profile,
        )

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return [_document(hit) for hit in self._source.hits(query)]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        return [_document(hit) for hit in await self._source.ahits(query)]


def _document(hit: Hit) -> Document:
    return Document(page_content=hit.text, metadata=hit.metadata(), id=hit.key)
