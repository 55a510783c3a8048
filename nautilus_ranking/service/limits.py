"""Limits that keep one worker healthy: body size, body deadline, concurrency (and a
caller who leaves gives its slot back), API keys."""

from __future__ import annotations

import asyncio
import hmac
import json
import re
import uuid
from collections.abc import Awaitable
from typing import TypeVar

from starlette.requests import ClientDisconnect, Request

from nautilus_ranking.errors import Problem, cut
from nautilus_ranking.log import get_logger
from nautilus_ranking.request.errors import ProblemError, invalid

T = TypeVar("T")

logger = get_logger("nautilus_ranking.service")

_REQUEST_ID = re.compile(r"[A-Za-z0-9._:\-]{1,128}")


def valid_request_id(value: str | None) -> bool:
    """A client's ``X-Request-ID`` is echoed only when it is short and plain."""
    return value is not None and _REQUEST_ID.fullmatch(value) is not None


def request_id_of(headers: list[tuple[bytes, bytes]]) -> str:
    """The client's ``X-Request-ID`` when it is valid, else a fresh one (ASGI headers)."""
    given = next((v.decode("latin-1") for k, v in headers if k == b"x-request-id"), None)
    return given if given is not None and valid_request_id(given) else uuid.uuid4().hex


async def read_body(request: Request, max_bytes: int, timeout_s: float) -> bytes:
    """The request body, refused with 413 as soon as it passes ``max_bytes``
    (a declared ``Content-Length`` is checked before anything is read), and with
    408 + ``Connection: close`` when it has not all arrived within ``timeout_s``:
    a client that stalls or trickles its body holds a connection for that long
    and never a concurrency slot (the caller takes the slot after this returns)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise _too_large(max_bytes)
    size = 0
    chunks: list[bytes] = []
    try:
        async with asyncio.timeout(timeout_s):
            async for chunk in request.stream():
                size += len(chunk)
                if size > max_bytes:
                    raise _too_large(max_bytes)
                chunks.append(chunk)
    except TimeoutError:
        raise ProblemError(
            408,
            "body-timeout",
            "Request body too slow",
            f"the body did not arrive within {timeout_s:g} s (NAUTILUS_SERVE_BODY_TIMEOUT_S)",
            headers={"Connection": "close"},
        ) from None
    except ClientDisconnect:  # nobody to answer; the access log shows the 400
        raise ProblemError(
            400,
            "client-disconnected",
            "Client disconnected",
            "the client closed the connection before sending its body",
            headers={"Connection": "close"},
        ) from None
    return b"".join(chunks)


def parse_json_body(body: bytes) -> object:
    """The body as JSON, or 422 naming ``body`` — also for what pushes the parser past
    its limits (nesting past the recursion limit, an integer past Python's 4300
    digits) and for ``NaN``/``Infinity``, which are not JSON numbers."""
    try:
        return json.loads(body, parse_constant=_no_constant)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        reason = (
            "nested too deeply"
            if isinstance(exc, RecursionError)
            else getattr(exc, "msg", None) or str(exc).split(";")[0][:120]
        )
        raise invalid(
            [
                Problem(
                    "body",
                    cut(body[:80].decode("utf-8", "replace")),
                    f"not valid JSON ({reason})",
                    'a JSON object such as {"query": "disk full"}',
                )
            ]
        ) from None


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not a JSON number")


def _too_large(max_bytes: int) -> ProblemError:
    return ProblemError(
        413,
        "body-too-large",
        "Request body too large",
        f"the body exceeds {max_bytes} bytes (NAUTILUS_SERVE_MAX_BODY_BYTES)",
        extra={"field": "body", "valid": f"at most {max_bytes} bytes"},
    )


class ConcurrencyLimit:
    """At most ``limit`` queries at once in this worker; the next one is refused
    (503 + Retry-After) instead of waiting in an unbounded queue. One event loop
    per worker, so a plain counter is enough."""

    def __init__(self, limit: int, retry_after_s: int = 1) -> None:
        self.limit = limit
        self.in_flight = 0
        self.retry_after_s = retry_after_s

    def acquire(self) -> None:
        if self.in_flight >= self.limit:
            raise ProblemError(
                503,
                "overloaded",
                "Service overloaded",
                f"{self.limit} queries are already running in this worker "
                "(NAUTILUS_SERVE_MAX_CONCURRENCY); retry shortly",
                headers={"Retry-After": str(self.retry_after_s)},
            )
        self.in_flight += 1

    def release(self) -> None:
        self.in_flight -= 1


async def while_connected(request: Request, work: Awaitable[T]) -> T:
    """``work``'s result, unless the client disconnects first: then the work is
    cancelled (its concurrency slot freed, the broker's run abandoned) and the answer
    is a 400 nobody reads (the access log shows it). Call it once the body is read:
    the next ASGI message is then the disconnect."""

    async def gone() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass

    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(gone())
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for pending in (task, watcher):
            if not pending.done():
                pending.cancel()
        await asyncio.gather(task, watcher, return_exceptions=True)
    if not task.cancelled():
        return task.result()  # finished (or failed) before the client left: it stands
    # imported here: the metrics module must load after serve has set its multiprocess dir
    from nautilus_ranking.service import metrics

    metrics.REJECTED.labels("disconnected").inc()
    logger.info("client_disconnected", path=request.url.path)
    raise ProblemError(
        400,
        "client-disconnected",
        "Client disconnected",
        "the client closed the connection before its answer was ready; the query was abandoned",
    )


def matched_key(request: Request, keys: tuple[bytes, ...]) -> bytes | None:
    """The key of ``keys`` the request carries (see :func:`key_matches`), or None."""
    found: bytes | None = None
    for candidate in _candidates(request):
        for key in keys:
            if hmac.compare_digest(candidate, key):
                found = key
    return found


def _candidates(request: Request) -> list[bytes]:
    candidates = []
    given = request.headers.get("x-api-key")
    if given is not None:
        candidates.append(given.strip())
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer":
        candidates.append(token.strip())
    # starlette decoded the bytes as latin-1
    return [c.encode("latin-1", "replace") for c in candidates]


def key_matches(request: Request, keys: tuple[bytes, ...]) -> bool:
    """Whether ``Authorization: Bearer KEY`` or ``X-API-Key: KEY`` holds one of ``keys``.

    Either header may carry it (an empty or wrong ``X-API-Key`` does not hide a
    good Bearer token). A header's raw bytes are compared with the key file's
    UTF-8, so a non-ASCII key works as clients send it. Every candidate is
    compared with every key in constant time (no early exit).
    """
    return matched_key(request, keys) is not None


def check_api_key(request: Request, keys: tuple[bytes, ...]) -> None:
    """Refuse the request unless it carries a key (see :func:`key_matches`); nothing
    to check when no key is configured.

    The 401 says the same thing whether the header was missing, malformed or wrong.
    """
    if not keys or key_matches(request, keys):
        return
    raise ProblemError(
        401,
        "unauthorized",
        "Unauthorized",
        "missing or invalid credentials",
        headers={"WWW-Authenticate": "Bearer"},
    )
