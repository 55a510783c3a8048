"""The HTTP protocol ``nautilus-ranking serve`` runs: uvicorn's httptools one, plus a deadline
on each request's headers.

uvicorn waits for headers forever: a connection that opens and sends nothing, or
sends its headers a byte at a time, holds a socket (and a file descriptor) for as
long as the client likes, and enough of them exhaust the process' descriptors. The
application cuts a slow *body* (``NAUTILUS_SERVE_BODY_TIMEOUT_S``, in ``limits.py``);
this cuts slow *headers* after the same time, by closing the connection.
"""

from __future__ import annotations

import asyncio
import os

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from nautilus_ranking.service import metrics
from nautilus_ranking.settings.model import NautilusSettings
from nautilus_ranking.settings.parsing import parse_seconds

#: Read once a worker: ``nautilus-ranking serve`` exports the effective setting to its workers.
_VARIABLE = "NAUTILUS_SERVE_BODY_TIMEOUT_S"


def _deadline() -> float:
    default = NautilusSettings.model_fields["serve_body_timeout_s"].default
    value, _ = parse_seconds(_VARIABLE, os.environ.get(_VARIABLE), default)  # the settings' rule
    return value


class HeaderDeadlineProtocol(HttpToolsProtocol):
    """Closes a connection whose request headers have not all arrived within the
    deadline — from the connection's start, or from the first byte of the next
    request on a kept-alive connection (the idle time between requests is uvicorn's
    keep-alive timeout)."""

    header_timeout_s = _deadline()
    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._start_header_timer()

    def data_received(self, data: bytes) -> None:
        if self._header_timer is None and (self.cycle is None or self.cycle.response_complete):
            self._start_header_timer()  # the first bytes of the next request
        super().data_received(data)

    def on_headers_complete(self) -> None:
        self._stop_header_timer()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_header_timer()
        super().connection_lost(exc)

    def _start_header_timer(self) -> None:
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._headers_too_slow)

    def _stop_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        metrics.REJECTED.labels("header_timeout").inc()
        self.transport.close()


def with_header_deadline(seconds: float) -> type[HeaderDeadlineProtocol]:
    """The protocol with this header deadline, for a server run in this process (``nautilus
    mcp --transport http``), whose settings are at hand rather than in the environment."""
    return type("HeaderDeadlineProtocol", (HeaderDeadlineProtocol,), {"header_timeout_s": seconds})
