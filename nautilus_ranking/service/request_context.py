"""Every HTTP request's context: its request id, one access-log line, the request
metrics, and the last line of defence (an unexpected error becomes a 500 problem with
the request id; the log carries the exception). Wrapped around the app by
``app.py``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import structlog
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from nautilus_ranking.fanout.contain import raised_in
from nautilus_ranking.log import get_logger
from nautilus_ranking.request.errors import ProblemError
from nautilus_ranking.service import metrics
from nautilus_ranking.service.limits import request_id_of
from nautilus_ranking.service.problems import problem_response

logger = get_logger("nautilus_ranking.service")

#: The routes the request metrics name; any other path is counted as "other".
_ROUTES = frozenset(
    {
        "/v1/query",
        "/v1/feedback",
        "/v1/config",
        "/v1/profiles",
        "/healthz",
        "/readyz",
        "/metrics",
        "/openapi.json",
    }
)


def _answerable(exc: BaseException, task: asyncio.Task[Any] | None) -> bool:
    """Whether an error out of a request is one to answer with a 500 problem: any but
    this request being cancelled (a shutdown, a client gone), a signal's
    ``KeyboardInterrupt`` or a ``SystemExit``, and a ``GeneratorExit`` closing this
    coroutine — a ``GeneratorExit`` handed over by the broker's loop is answered."""
    if isinstance(exc, (asyncio.CancelledError, KeyboardInterrupt, SystemExit)):
        return False
    return not isinstance(exc, GeneratorExit) or raised_in(task)


class RequestContext:
    """Pure ASGI middleware: request id, one access-log line, request metrics, and the
    last line of defence — an unexpected error becomes a 500 problem with the request
    id (the log carries the exception)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = request_id_of(scope["headers"])
        scope.setdefault("state", {})["request_id"] = rid
        started = time.perf_counter()
        status = 500
        sent_start = False

        async def send_with_id(message: Message) -> None:
            nonlocal status, sent_start
            if message["type"] == "http.response.start":
                status = message["status"]
                sent_start = True
                MutableHeaders(scope=message)["X-Request-ID"] = rid
            await send(message)

        path: str = scope["path"]
        me = asyncio.current_task()
        with structlog.contextvars.bound_contextvars(request_id=rid):
            try:
                await self.app(scope, receive, send_with_id)
            except BaseException as exc:
                if not _answerable(exc, me):
                    raise
                logger.error(
                    "request_failed",
                    path=path,
                    error_type=type(exc).__name__,
                    error=str(exc)[:500],
                    exc_info=True,
                )
                if not sent_start:
                    error = ProblemError(
                        500,
                        "internal",
                        "Internal error",
                        "the service failed to answer; quote the request id to the operator",
                    )
                    await problem_response(error, rid)(scope, receive, send_with_id)
            finally:
                metrics.record_http_request(
                    scope, status, started, _ROUTES, client=(scope.get("client") or ("", 0))[0]
                )
