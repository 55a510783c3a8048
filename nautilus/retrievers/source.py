"""Where a retriever's hits come from: a :class:`Broker` in this process, or the
HTTP API of a running ``nautilus serve``. Both give the same :class:`Hit` rows in the
same order as ``nautilus query --json`` with the same settings."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from nautilus.broker import Broker
from nautilus.errors import NautilusError
from nautilus.records import BrokerResponse
from nautilus.request.answer import Answer, answer, answer_sync
from nautilus.request.engine import Engine
from nautilus.request.errors import ProblemError
from nautilus.request.model import QueryRequest, parse_request

#: Row fields never copied into a hit's text or fields (vectors are for the ranker).
_HIDDEN = frozenset({"embedding"})


class ServiceError(NautilusError, RuntimeError):
    """The service refused the query (problem+json) or could not be reached."""


@dataclass(frozen=True)
class Hit:
    """One ranked row: where it came from, its place and score, and why."""

    source: str
    id: Any
    score: float | None  # None when ranking is off (a passthrough has no scores)
    rank: int
    text: str
    fields: dict[str, Any]
    explanation: dict[str, Any]

    def metadata(self) -> dict[str, Any]:
        """What both frameworks carry beside the text."""
        return {"source": self.source, "id": self.id, "score": self.score, "rank": self.rank,
                "explanation": self.explanation, "fields": self.fields}


def row_text(row: Mapping[str, Any]) -> str:
    """A row's text for a model to read: its string fields, one a line (the id left
    out, it is in the metadata)."""
    parts = [v for k, v in row.items() if isinstance(v, str) and k != "id" and k not in _HIDDEN]
    return "\n".join(parts) or str(row.get("id", ""))


def _hit(source: str, row: Mapping[str, Any], explanation: dict[str, Any],
         ranked: bool) -> Hit:
    fields = {k: v for k, v in row.items() if k not in _HIDDEN}
    why = {k: v for k, v in explanation.items() if k not in ("source_id", "id", "rank", "score")}
    score = explanation.get("score")
    return Hit(source, row.get("id"), float(score) if ranked and score is not None else None,
               int(explanation["rank"]), row_text(row), fields, why)


def hits_of(response: BrokerResponse, ranked: bool = True) -> list[Hit]:
    """A broker's answer as hits, best first (``ranked``: its synthesizer scored them)."""
    return [_hit(r.source_id, r.row, r.explain(), ranked) for r in response.ranking]


def hits_of_json(body: Mapping[str, Any]) -> list[Hit]:
    """``POST /v1/query``'s JSON answer as hits, best first (each ranking entry's row
    is the next one of its source in ``data``, in rank order)."""
    taken: dict[str, int] = {}
    hits = []
    for entry in body["ranking"]:
        source = entry["source_id"]
        at = taken.get(source, 0)
        taken[source] = at + 1
        hits.append(_hit(source, body["data"][source][at], entry,
                         body.get("ranking_enabled", True)))
    return hits


@dataclass
class HitSource:
    """A broker or a service URL, and the request's overrides (the fields of
    :class:`~nautilus.request.model.QueryRequest`).

    With a ``broker`` the request is answered in this process by the request core, as
    ``nautilus query`` answers it; with a ``url`` it is sent as a ``POST /v1/query``
    body. Either way the overrides start from the broker's (or service's) settings.
    """

    broker: Broker | None = None
    url: str | None = None
    api_key: str | None = None
    top_k: int | None = None
    boosts: Mapping[str, str] | None = None
    sources: Sequence[str] | None = None
    idf: bool | None = None
    timeout_s: float = 30.0
    headers: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if (self.broker is None) == (self.url is None):
            raise ValueError("give exactly one of broker= (in-process) or url= (a running "
                             "nautilus serve, e.g. 'http://127.0.0.1:8000')")

    def _request(self, query: str) -> QueryRequest:
        """The request this retriever sends for ``query`` (a bad field is a ServiceError)."""
        payload: dict[str, Any] = {"query": query}
        if self.top_k is not None:
            payload["top_k"] = self.top_k
        if self.boosts is not None:
            payload["boosts"] = dict(self.boosts)
        if self.sources is not None:
            payload["sources"] = list(self.sources)
        if self.idf is not None:
            payload["idf"] = self.idf
        try:
            return parse_request(payload)
        except ProblemError as exc:
            raise ServiceError(f"invalid request: {exc.detail}") from None

    def _answer(self, result: Answer) -> list[Hit]:
        return hits_of(result.response, result.ranked)

    def _body(self, query: str) -> dict[str, Any]:
        return self._request(query).model_dump(exclude_defaults=True)

    def _headers(self) -> dict[str, str]:
        return {**self.headers, **({"Authorization": f"Bearer {self.api_key}"}
                                   if self.api_key else {})}

    def _endpoint(self) -> str:
        return str(self.url).rstrip("/") + "/v1/query"

    def hits(self, query: str) -> list[Hit]:
        if self.broker is not None:
            try:
                return self._answer(answer_sync(Engine.of(self.broker), self._request(query)))
            except ProblemError as exc:
                raise ServiceError(f"invalid request: {exc.detail}") from None
        try:
            response = httpx.post(self._endpoint(), json=self._body(query),
                                  headers=self._headers(), timeout=self.timeout_s)
        except httpx.HTTPError as exc:
            raise ServiceError(f"{self._endpoint()}: {type(exc).__name__}: {exc}") from None
        return hits_of_json(_checked(response))

    async def ahits(self, query: str) -> list[Hit]:
        if self.broker is not None:
            try:
                return self._answer(await answer(Engine.of(self.broker), self._request(query)))
            except ProblemError as exc:
                raise ServiceError(f"invalid request: {exc.detail}") from None
        try:
            async with httpx.AsyncClient(timeout=self.timeout_s) as client:
                response = await client.post(self._endpoint(), json=self._body(query),
                                             headers=self._headers())
        except httpx.HTTPError as exc:
            raise ServiceError(f"{self._endpoint()}: {type(exc).__name__}: {exc}") from None
        return hits_of_json(_checked(response))


def _checked(response: httpx.Response) -> dict[str, Any]:
    if response.status_code != 200:
        try:
            detail = response.json().get("detail", response.text)
        except ValueError:
            detail = response.text[:300]
        raise ServiceError(f"nautilus serve answered {response.status_code}: {detail}")
    body: dict[str, Any] = response.json()
    return body
