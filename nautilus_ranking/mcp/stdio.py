"""``nautilus-ranking mcp`` over stdio: the handshake answered at once, everything else by the SDK.

A desktop agent starts ``nautilus-ranking mcp`` on every start and waits for its handshake
(``server/discover``, or ``initialize`` before the 2026 protocol). Importing the MCP SDK
takes about half a second of CPU and building the broker more, so this module answers
the handshake itself, from the constants below, while a thread imports the SDK and
builds the server; every message (the handshake included) is then handed, in order, to
the SDK's own stdio server, whose answer to an already-answered handshake is compared
with ours (``mcp_handshake_differs`` if the SDK would have said something else) and
dropped. A handshake this module does not know (another protocol version, a malformed
envelope) is left to the SDK, answered once it is loaded.

The process's fd 0 and 1 are the protocol's alone: they are duplicated for the wire and
pointed at ``/dev/null`` and stderr while serving, so nothing else reads the client's
messages or writes into the stream (as the SDK's own stdio transport does).
"""

from __future__ import annotations

import json
import os
import queue
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import IO, Any

from nautilus_ranking import __version__
from nautilus_ranking.log import get_logger

logger = get_logger("nautilus_ranking.mcp")

SERVER_NAME = "nautilus-ranking"
INSTRUCTIONS = (
    "search ranks the rows of every source for a query; list_sources names the "
    "sources that boosts and sources accept."
)
#: The protocol revisions answered here: the stateless one (``server/discover``) and the
#: ones of the ``initialize`` handshake, as the SDK (mcp 2.x) serves them.
MODERN_VERSIONS = ("2026-07-28",)
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
_ENVELOPE = (
    "io.modelcontextprotocol/protocolVersion",
    "io.modelcontextprotocol/clientInfo",
    "io.modelcontextprotocol/clientCapabilities",
)
_CAPABILITIES = {"tools": {"listChanged": False}}
_SERVER_INFO = {"name": SERVER_NAME, "title": SERVER_NAME, "version": __version__}

#: How long the end of the input waits for the answers to the requests handed over.
DRAIN_S = 60.0

#: What :func:`serve_stdio` is given to load: it returns the function that serves the
#: SDK's stdio server over the two streams it is handed (a line iterator and a writer).
Serve = Callable[[Any, Any], Awaitable[None]]


def early_answer(message: Any) -> dict[str, Any] | None:
    """The result of a handshake request this module answers itself, else None."""
    if not isinstance(message, dict) or "id" not in message or message.get("jsonrpc") != "2.0":
        return None
    params = message.get("params")
    if message.get("method") == "server/discover" and isinstance(params, dict):
        meta = params.get("_meta")
        if (
            isinstance(meta, dict)
            and all(key in meta for key in _ENVELOPE)
            and meta[_ENVELOPE[0]] in MODERN_VERSIONS
        ):
            return {
                "cacheScope": "private",
                "capabilities": _CAPABILITIES,
                "instructions": INSTRUCTIONS,
                "resultType": "complete",
                "supportedVersions": list(MODERN_VERSIONS),
                "ttlMs": 0,
                "_meta": {"io.modelcontextprotocol/serverInfo": _SERVER_INFO},
            }
    if message.get("method") == "initialize" and isinstance(params, dict):
        version = params.get("protocolVersion")
        if (
            version in HANDSHAKE_VERSIONS
            and isinstance(params.get("capabilities"), dict)
            and isinstance(params.get("clientInfo"), dict)
        ):
            return {
                "capabilities": _CAPABILITIES,
                "instructions": INSTRUCTIONS,
                "protocolVersion": version,
                "serverInfo": _SERVER_INFO,
            }
    return None


@dataclass
class _Loaded:
    serve: Serve | None
    error: BaseException | None


def serve_stdio(load: Callable[[], Serve]) -> None:
    """Answer the handshake while ``load()`` runs in a thread, then serve with what it
    returned; an exception of ``load()`` is raised here (the process then exits with its
    message, as before any handshake)."""
    import anyio  # the SDK's own dependency; light beside the SDK

    wire_in, wire_out, restore = _claim_stdio()
    inbox: queue.Queue[bytes | _Loaded | None] = queue.Queue()
    writer = _Writer(wire_out)

    def read() -> None:
        for line in wire_in:
            inbox.put(line)
        inbox.put(None)

    def build() -> None:
        try:
            inbox.put(_Loaded(load(), None))
        except BaseException as exc:  # handed to the main thread, raised there
            inbox.put(_Loaded(None, exc))

    threading.Thread(target=read, name="nautilus-mcp-stdin", daemon=True).start()
    threading.Thread(target=build, name="nautilus-mcp-load", daemon=True).start()
    backlog: list[bytes] = []
    answered: dict[Any, dict[str, Any]] = {}
    ended = False
    try:
        while True:
            item = inbox.get()
            if isinstance(item, _Loaded):
                break
            if item is None:
                ended = True
                continue
            backlog.append(item)
            _answer_early(item, answered, writer)
        if item.error is not None:
            raise item.error
        assert item.serve is not None
        relay = _Relay(writer, answered)
        anyio.run(item.serve, _Lines(backlog, inbox, ended, relay), relay)
    finally:
        restore()


def _answer_early(line: bytes, answered: dict[Any, dict[str, Any]], writer: _Writer) -> None:
    try:
        message = json.loads(line)
    except ValueError:
        return  # the SDK answers it
    result = early_answer(message)
    if result is None:
        return
    answered[_key(message["id"])] = result
    writer.send(
        json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}, separators=(",", ":"))
        + "\n"
    )
    logger.info("mcp_handshake", method=message["method"], answered="before the SDK loaded")


class _Writer:
    """The wire out: whole lines, flushed, one writer at a time; once the client has
    closed its end, what is left to say is dropped (nobody reads it)."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out, self.lock, self.gone = out, threading.Lock(), False

    def send(self, text: str) -> None:
        with self.lock:
            if self.gone:
                return
            try:
                self.out.write(text.encode("utf-8"))
                self.out.flush()
            except (BrokenPipeError, ConnectionResetError):
                self.gone = True


class _Lines:
    """The client's lines for the SDK's stdin reader: those read so far, then the rest.
    At the end of the input it waits (up to :data:`DRAIN_S`) for the requests handed
    over to be answered: the SDK's server stops at the end of its input, and a client
    that wrote its requests and closed the pipe still gets every answer."""

    def __init__(
        self,
        backlog: list[bytes],
        inbox: queue.Queue[bytes | _Loaded | None],
        ended: bool,
        relay: _Relay,
    ) -> None:
        self.backlog, self.inbox, self.ended, self.relay = backlog, inbox, ended, relay

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        import anyio.to_thread

        if self.backlog:
            return self._handed(self.backlog.pop(0))
        if not self.ended:
            item = await anyio.to_thread.run_sync(self.inbox.get, abandon_on_cancel=True)
            if isinstance(item, bytes):
                return self._handed(item)
            self.ended = True
        deadline = time.monotonic() + DRAIN_S
        while self.relay.waiting and time.monotonic() < deadline:
            await anyio.sleep(0.005)
        raise StopAsyncIteration

    def _handed(self, line: bytes) -> str:
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        if isinstance(message, dict) and "id" in message and "method" in message:
            self.relay.waiting.add(_key(message["id"]))
        return line.decode("utf-8", "replace")


def _key(request_id: Any) -> Any:
    """A request id as a set member (an id that is not hashable is the SDK's to refuse)."""
    return request_id if isinstance(request_id, str | int | float | None) else repr(request_id)


class _Relay:
    """The SDK's stdout: its messages to the wire, except its answer to a handshake
    answered already (compared with ours, then dropped)."""

    def __init__(self, writer: _Writer, answered: dict[Any, dict[str, Any]]) -> None:
        self.writer, self.answered = writer, answered
        self.pending: list[str] = []
        self.waiting: set[Any] = set()  # the ids of requests handed over, not answered

    async def write(self, text: str) -> None:
        try:
            message = json.loads(text)
        except ValueError:
            message = None
        if isinstance(message, dict) and ("result" in message or "error" in message):
            self.waiting.discard(_key(message.get("id")))
            if self.answered and _key(message.get("id")) in self.answered:
                ours = self.answered.pop(_key(message.get("id")))
                if message.get("result") != ours:
                    logger.warning("mcp_handshake_differs", ours=ours, sdk=message)
                return
        self.pending.append(text)

    async def flush(self) -> None:
        import anyio.to_thread

        text, self.pending = "".join(self.pending), []
        if text:
            await anyio.to_thread.run_sync(self.writer.send, text)


def _claim_stdio() -> tuple[IO[bytes], IO[bytes], Callable[[], None]]:
    """The wire's own copies of fd 0 and 1; fd 0 then reads ``/dev/null`` and fd 1 writes
    to stderr until ``restore()``."""
    wire_in = os.fdopen(os.dup(0), "rb")
    wire_out = os.fdopen(os.dup(1), "wb")
    saved = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)

    def restore() -> None:
        os.dup2(saved[0], 0)
        os.dup2(saved[1], 1)
        for fd in saved:
            os.close(fd)

    return wire_in, wire_out, restore
