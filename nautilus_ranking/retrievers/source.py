"""Where a retriever's hits come from: a :class:`Broker` in this process, or the
HTTP API of a running ``nautilus-ranking serve``. Both give the same :class:`Hit` rows in the
same order as ``nautilus-ranking query --json`` with the same settings.

One module just past 400 lines because the two ways share the :class:`Hit`, made from
one ranked entry whichever way it came; the retrievers themselves are ``langchain.py``
and ``llamaindex.py``."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from nautilus_ranking.broker import Broker
from nautilus_ranking.errors import NautilusError
from nautilus_ranking.fanout.thread_loop import run_sync
from nautilus_ranking.feedback.citing import Citations
from nautilus_ranking.ranking_hash import ranked_rows_of_json
from nautilus_ranking.records import BrokerResponse
from nautilus_ranking.request.answer import Answer, answer, answer_sync
from nautilus_ranking.request.engine import Engine, with_process_feedback
from nautilus_ranking.request.errors import ProblemError
from nautilus_ranking.request.model import QueryRequest, parse_request
from nautilus_ranking.rows import content_id
from nautilus_ranking.settings.model import NautilusSettings
from nautilus_ranking.sources.http.bounded import (
    ACCEPT_ENCODING,
    EncodingError,
    TooLargeError,
    read_capped,
)

#: What a retriever may set on its requests: every request field but the query.
OVERRIDE_FIELDS: tuple[str, ...] = tuple(
    name for name in QueryRequest.model_fields if name != "query"
)
#: Row fields never copied into a hit's text or fields (vectors are for the ranker).
_HIDDEN = frozenset({"embedding"})
#: The largest answer read from a service by default (bytes; ``max_answer_bytes``): a
#: bigger one is refused as it streams in, never read whole. A service answers with the
#: rows without their vectors: 100 rows of 10 KB are 1 MB.
MAX_ANSWER_BYTES = 32 << 20
#: What a malformed answer can raise while it is read into hits.
_MALFORMED = (
    KeyError,
    IndexError,
    TypeError,
    ValueError,
    AttributeError,
    OverflowError,
    RecursionError,
)


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
    #: The answer's ``ranking_hash`` (the order of all its hits; None when ranking is off).
    ranking_hash: str | None = None
    #: With feedback on: the answer's ``ranking_id``, the hit's ``position`` and its
    #: ``cite`` (docs/feedback.md); None off, and then absent from the metadata.
    citation: dict[str, Any] | None = None
    #: Under a budget, a row too large for it handed over in part: the ``field`` cut,
    #: its ``start`` and ``end`` in the field's value, the value's ``length`` (the row
    #: is longer) and the ``handle`` a request's ``whole`` names to get the row whole.
    #: None for a row handed over whole, and then absent from the metadata.
    passage: dict[str, Any] | None = None

    @property
    def key(self) -> str:
        """The row's stable name, what a framework's document id is: ``source:id``, or
        for a row without an id a digest of its content (:func:`row_key`)."""
        return row_key(self.source, self.id, self.fields)

    def metadata(self) -> dict[str, Any]:
        """What both frameworks carry beside the text (``ranking_hash`` only when the
        hits were ranked)."""
        out = {
            "source": self.source,
            "id": self.id,
            "score": self.score,
            "rank": self.rank,
            "explanation": self.explanation,
            "fields": self.fields,
        }
        if self.ranking_hash is not None:
            out["ranking_hash"] = self.ranking_hash
        if self.citation is not None:
            out.update(self.citation)
        if self.passage is not None:
            out["passage"] = dict(self.passage)
        return out


def row_key(source: str, row_id: Any, row: Mapping[str, Any]) -> str:
    """``source:id``; for a row without an id, ``source:sha256-`` and 16 hex digits of
    its content (:func:`nautilus_ranking.rows.content_id`: its canonical JSON, the
    per-query fields left out) — the same row has the same key in every call, never one
    that depends on its rank."""
    if row_id is not None and row_id != "":
        return f"{source}:{row_id}"
    return f"{source}:{content_id(dict(row))}"


def row_text(row: Mapping[str, Any]) -> str:
    """A row's text for a model to read: its string fields, one a line (the id left
    out, it is in the metadata; so is the source's ``id_field``, whose value ``id``
    repeats)."""
    ident = row.get("id")
    parts = [
        v
        for k, v in row.items()
        if isinstance(v, str) and k != "id" and k not in _HIDDEN and v != ident
    ]
    return "\n".join(parts) or str(row.get("id", ""))


def _hit(
    source: str,
    row: Mapping[str, Any],
    explanation: dict[str, Any],
    ranked: bool,
    ranking_hash: str | None = None,
    citation: dict[str, Any] | None = None,
) -> Hit:
    fields = {k: v for k, v in row.items() if k not in _HIDDEN}
    found = explanation.get("passage")
    # a row handed over in part: its passage is the hit's, not a reason for its score
    part = dict(found) if isinstance(found, dict) and "handle" in found else None
    left_out = _NOT_WHY | {"passage"} if part is not None else _NOT_WHY
    why = {k: v for k, v in explanation.items() if k not in left_out}
    score = explanation.get("score")
    return Hit(
        source,
        row.get("id"),
        float(score) if ranked and score is not None else None,
        int(explanation["rank"]),
        row_text(row),
        fields,
        why,
        ranking_hash if ranked else None,
        citation,
        part,
    )


#: What a ranking entry holds that is not its explanation: which row, its place, its
#: citation (with feedback on).
_NOT_WHY = frozenset({"source_id", "id", "rank", "score", "position", "cite"})


def hits_of(
    response: BrokerResponse,
    ranked: bool = True,
    explain: bool = False,
    ranking_hash: str | None = None,
    citations: Citations | None = None,
) -> list[Hit]:
    """A broker's answer as hits, best first (``ranked``: its synthesizer scored them).
    Each hit's explanation is what the ranking entry of a JSON answer holds beyond
    source, id, rank and score: ``also_from``, and every score component with
    ``explain`` — the same as a hit read from ``POST /v1/query``. ``ranking_hash``: the
    answer's, carried by every hit; ``citations``: with feedback on, each hit's."""
    return [
        _hit(
            r.source_id,
            r.row,
            r.entry(explain),
            ranked,
            ranking_hash,
            None
            if citations is None
            else {"ranking_id": citations.ranking_id, **citations.entry(index)},
        )
        for index, r in enumerate(response.ranking)
    ]


def hits_of_json(body: Mapping[str, Any]) -> list[Hit]:
    """``POST /v1/query``'s JSON answer as hits, best first (each ranking entry's row
    is the next one of its source in ``data``, in rank order)."""
    ranked = body.get("ranking_enabled", True)
    ranking_id = body.get("ranking_id")
    return [
        _hit(
            source,
            row,
            entry,
            ranked,
            body.get("ranking_hash"),
            None
            if ranking_id is None
            else {
                "ranking_id": ranking_id,
                "position": entry.get("position"),
                "cite": entry.get("cite"),
            },
        )
        for entry, source, row in ranked_rows_of_json(body)
    ]


@dataclass
class HitSource:
    """A broker or a service URL, and the request's overrides: any field of
    :class:`~nautilus_ranking.request.model.QueryRequest` but the query (``top_k``, ``boosts``,
    ``sources``, ``idf`` …), by name.

    With a ``broker`` the request is answered in this process by the request core, as
    ``nautilus-ranking query`` answers it; with a ``url`` it is sent as a ``POST /v1/query``
    body. Either way the overrides start from the broker's (or service's) settings.
    """

    broker: Broker | None = None
    url: str | None = None
    api_key: str | None = None
    timeout_s: float = 30.0
    overrides: Mapping[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    max_answer_bytes: int = MAX_ANSWER_BYTES
    #: The ranking profile to rank with (one the key allows); None: the caller's default.
    profile: str | None = None
    _core: Engine | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if (self.broker is None) == (self.url is None):
            raise ValueError(
                "give exactly one of broker= (in-process) or url= (a running "
                "nautilus-ranking serve, e.g. 'http://127.0.0.1:8000')"
            )
        unknown = sorted(set(self.overrides) - set(OVERRIDE_FIELDS))
        if unknown:
            raise ValueError(
                f"unknown request field(s) {', '.join(unknown)} (valid: "
                f"{', '.join(OVERRIDE_FIELDS)})"
            )
        self.overrides = {k: v for k, v in self.overrides.items() if v is not None}

    def _engine(self, broker: Broker) -> Engine:
        """The in-process broker as the request core runs it (assembled on first use)."""
        if self._core is None:
            # the process's own settings: feedback on there makes these answers citable
            self._core = with_process_feedback(Engine.of(broker, profiles=True), NautilusSettings())
        return self._core

    def _request(self, query: str) -> QueryRequest:
        """The request this retriever sends for ``query`` (a bad field is a ServiceError)."""
        payload = {
            "query": query,
            **{
                k: dict(v) if isinstance(v, Mapping) else list(v) if isinstance(v, tuple) else v
                for k, v in self.overrides.items()
            },
        }
        with _refused_as_service_error():
            return parse_request(payload)

    def _answer(self, result: Answer) -> list[Hit]:
        return hits_of(
            result.response,
            result.ranked,
            bool(result.request.explain),
            result.ranking_hash,
            result.citations,
        )

    def _body(self, query: str) -> dict[str, Any]:
        body = self._request(query).model_dump(exclude_defaults=True)
        if self.profile is not None:
            body["profile"] = self.profile
        return body

    def _headers(self) -> dict[str, str]:
        return {
            "Accept-Encoding": ACCEPT_ENCODING,  # the codings read_capped bounds
            **self.headers,
            **({"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}),
        }

    def _endpoint(self) -> str:
        return str(self.url).rstrip("/") + "/v1/query"

    def hits(self, query: str) -> list[Hit]:
        if self.broker is not None:
            with _refused_as_service_error():
                # a budget counts each row as POST /v1/query hands it over, in-process
                # as over HTTP: the same rows either way
                return self._answer(
                    answer_sync(
                        self._engine(self.broker), self._request(query), profile=self.profile
                    )
                )
        body = self._body(query)
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # the usual case: this thread's own loop
            return run_sync(self._post(body), "hits()", "await ahits(...)")
        # called synchronously inside a running loop (a notebook): a thread of its own
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            return pool.submit(asyncio.run, self._post(body)).result()

    async def ahits(self, query: str) -> list[Hit]:
        if self.broker is not None:
            with _refused_as_service_error():
                return self._answer(
                    await answer(
                        self._engine(self.broker), self._request(query), profile=self.profile
                    )
                )
        return await self._post(self._body(query))

    async def _post(self, body: dict[str, Any]) -> list[Hit]:
        """One ``POST /v1/query``, all of it — connecting, the headers, the body — within
        ``timeout_s`` (httpx's own timeouts are per read: a server sending a byte a
        second would hold the call for ever), its body read as it streams in and
        refused past ``max_answer_bytes``; anything but a query answer is a
        :class:`ServiceError`."""
        endpoint = self._endpoint()
        try:
            async with asyncio.timeout(self.timeout_s):
                status, raw = await self._exchange(endpoint, body)
        except TimeoutError:
            raise ServiceError(
                f"{endpoint}: no complete answer within timeout_s={self.timeout_s:g} s"
            ) from None
        except httpx.HTTPError as exc:
            raise ServiceError(f"{endpoint}: {type(exc).__name__}: {exc}") from None
        return parse_answer(endpoint, status, raw)

    async def _exchange(self, endpoint: str, body: dict[str, Any]) -> tuple[int, bytes]:
        async with (
            httpx.AsyncClient(timeout=self.timeout_s) as client,
            client.stream("POST", endpoint, json=body, headers=self._headers()) as response,
        ):
            cap = self.max_answer_bytes
            try:
                raw = await read_capped(response, cap)
            except TooLargeError as exc:
                raise ServiceError(_too_large(endpoint, cap, exc.what)) from None
            except EncodingError as exc:
                raise ServiceError(f"{endpoint}: answered {response.status_code} {exc}") from None
            return response.status_code, raw


@contextlib.contextmanager
def _refused_as_service_error() -> Iterator[None]:
    """A request the core refuses (a bad field) as the retrievers' documented error."""
    try:
        yield
    except ProblemError as exc:
        what = "invalid request" if exc.status != 403 else "refused"
        raise ServiceError(f"{what}: {exc.detail}") from None


def _too_large(endpoint: str, cap: int, what: str) -> str:
    return (
        f"{endpoint}: answer larger than max_answer_bytes={cap:,} ({what}); ask for "
        "fewer rows (top_k) or raise max_answer_bytes"
    )


def parse_answer(endpoint: str, status: int, raw: bytes) -> list[Hit]:
    """A service's answer (status and body) as hits, or a :class:`ServiceError` saying
    what is wrong with it: a refusal (its problem+json detail), a body that is not
    JSON or not a query answer (never a raw ``KeyError`` or ``JSONDecodeError``)."""
    try:
        body = json.loads(raw)
    except RecursionError:
        body, problem = None, "JSON nested too deeply"
    except ValueError as exc:  # not JSON, not UTF-8, past the digit limit
        body, problem = None, f"not JSON ({str(exc)[:120]})"
    else:
        problem = ""
    if status != 200:
        detail = body.get("detail") if isinstance(body, dict) else None
        shown = str(detail) if detail is not None else raw[:300].decode("utf-8", "replace")
        raise ServiceError(f"nautilus-ranking serve answered {status}: {shown[:300]}")
    if problem:
        raise ServiceError(f"{endpoint}: the answer is {problem}")
    if not isinstance(body, dict):
        raise ServiceError(f"{endpoint}: the answer is not a JSON object ({type(body).__name__})")
    try:
        return hits_of_json(body)
    except _MALFORMED as exc:
        what = f"{type(exc).__name__}: {str(exc)[:120]}"
        raise ServiceError(f"{endpoint}: the answer is not a query answer ({what})") from None
