"""The MCP server: the tools of ``tools.py`` over stdio or streamable HTTP.

stdio is what a desktop agent starts (Claude Desktop, an IDE): stdout carries the
protocol, so every log line goes to stderr. Streamable HTTP is for hosted agents:
one process at ``/mcp`` (stateless, JSON answers), behind the service's API keys
(``NAUTILUS_SERVE_API_KEYS_FILE``: ``Authorization: Bearer KEY`` or ``X-API-Key``,
a problem+json 401 otherwise), with ``/healthz`` and ``/metrics`` beside it.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from types import FrameType
from typing import TYPE_CHECKING, Any

from nautilus_ranking import __version__
from nautilus_ranking.log import get_logger
from nautilus_ranking.mcp.stdio import INSTRUCTIONS, SERVER_NAME
from nautilus_ranking.settings.model import NautilusSettings

if TYPE_CHECKING:
    from nautilus_ranking.mcp.tools import Tools

logger = get_logger("nautilus_ranking.mcp")

#: ``--port``'s default: beside ``nautilus-ranking serve``'s 8000, so both can run on one host.
DEFAULT_PORT = 8001
MCP_PATH = "/mcp"
#: Where the guard leaves the checked API key in the request's scope state, for the tool.
KEY_STATE = "nautilus_api_key"


def run_mcp(transport: str = "stdio", host: str | None = None, port: int | None = None) -> int:
    """Serve until stdin closes (stdio) or SIGINT/SIGTERM (http); the exit code."""
    if transport == "stdio":  # the handshake first, the SDK and the broker meanwhile
        if importlib.util.find_spec("mcp") is None:
            raise ImportError(
                f"nautilus-ranking mcp needs the 'mcp' extra: {_EXTRA} (no module 'mcp')"
            )
        from nautilus_ranking.mcp.stdio import serve_stdio

        serve_stdio(_stdio_server)
        return 0
    settings, engine = _prepare()
    import uvicorn

    from nautilus_ranking.service.server import listen_problem
    from nautilus_ranking.tracing.sdk import sdk_problem

    host = host or settings.serve_host
    port = port if port is not None else DEFAULT_PORT
    problem = listen_problem(host, port) or sdk_problem()
    if problem is not None:  # before anything starts, as nautilus-ranking serve checks it
        print(f"nautilus-ranking: {problem}", file=sys.stderr)
        return 1
    logger.info(
        "mcp_starting",
        transport="http",
        host=host,
        port=port,
        path=MCP_PATH,
        api_keys=len(engine.state.api_keys),
    )
    # uvicorn drains on SIGTERM, then raises the signal again with the handler it found:
    # ours makes that a clean exit 0 (as nautilus-ranking serve does).
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    from nautilus_ranking.service.protocol import with_header_deadline

    try:
        # The service's edge: slow headers closed and slow bodies cut after
        # NAUTILUS_SERVE_BODY_TIMEOUT_S, idle connections kept longer than a load
        # balancer keeps them (75 s), as nautilus-ranking serve runs.
        uvicorn.run(
            http_app(engine, host),
            host=host,
            port=port,
            access_log=False,
            log_level="warning",
            server_header=False,
            timeout_keep_alive=75,
            http=with_header_deadline(settings.serve_body_timeout_s),
            timeout_graceful_shutdown=int(
                max(settings.serve_request_timeout_s, settings.serve_body_timeout_s)
            )
            + 5,
        )
    except _Terminated:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
    return 0


class _Terminated(Exception):
    """SIGTERM, re-raised by uvicorn once its graceful shutdown is done."""


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise _Terminated


#: How to install what ``nautilus-ranking mcp`` needs.
_EXTRA = "pip install 'nautilus-ranking[mcp]'"


def _prepare(keys: bool = True) -> tuple[NautilusSettings, Tools]:
    """The settings and the tools over a server's state; a bad sources file, a strict-mode
    problem or no sources at all raise here, before anything is served. ``keys=False``
    (stdio: the client started this process, no key travels) leaves the API keys file
    unread, so any profile may be named as the docs say."""
    try:
        import anyio  # noqa: F401
        import mcp.server  # noqa: F401  (the SDK itself, before the broker is built)
        import uvicorn  # noqa: F401

        from nautilus_ranking.mcp.tools import Tools
        from nautilus_ranking.service.server import listen_problem  # noqa: F401
        from nautilus_ranking.service.state import ServerState
    except ImportError as exc:
        raise ImportError(f"nautilus-ranking mcp needs the 'mcp' extra: {_EXTRA} ({exc})") from exc
    settings = NautilusSettings()  # strict mode raises ConfigError here
    if not keys:
        settings = settings.model_copy(update={"serve_api_keys_file": None})
    return settings, Tools(
        ServerState.build(settings)
    )  # as nautilus-ranking serve checks everything


def _stdio_server() -> Callable[[Any, Any], Awaitable[None]]:
    """Built in :func:`nautilus_ranking.mcp.stdio.serve_stdio`'s loading thread: the SDK's stdio
    server over the two streams it is given."""
    _, engine = _prepare(keys=False)
    return functools.partial(_serve_stdio, engine)


def _server(engine: Tools) -> Any:
    import mcp_types as types
    from mcp.server import Server

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=engine.tools())

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        # the HTTP transport's request, where the guard left the key it checked
        http = getattr(ctx, "request", None)
        key = getattr(http, "scope", {}).get("state", {}).get(KEY_STATE)
        result: types.CallToolResult = await engine.call(params.name, params.arguments, key)
        return result

    return Server(
        SERVER_NAME,
        version=__version__,
        title=SERVER_NAME,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def _serve_stdio(engine: Tools, stdin: Any = None, stdout: Any = None) -> None:
    from mcp.server.stdio import stdio_server

    server = _server(engine)
    async with engine.state.running("mcp"), stdio_server(stdin, stdout) as (read, write):
        logger.info("mcp_starting", transport="stdio")
        await server.run(read, write, server.create_initialization_options())


def http_app(engine: Tools, host: str) -> Any:
    """The ASGI app: ``/mcp`` behind the API keys, ``/healthz``, ``/metrics``."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Mount, Route

    from nautilus_ranking.service import metrics
    from nautilus_ranking.service.limits import matched_key
    from nautilus_ranking.tracing import tracer
    from nautilus_ranking.tracing.sdk import start_sdk, stop_sdk, wanted

    inner = _server(engine).streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        json_response=True,
        host=host,
        max_request_body_size=engine.settings.serve_max_body_bytes,
    )

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def prometheus(request: Request) -> Response:
        # open to probes; a profile's series only to a key that may name it
        grant = engine.state.grant(matched_key(request, engine.state.api_keys))
        payload, content_type = metrics.render(None if grant is None else grant.allows)
        return Response(payload, media_type=content_type)

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        provider = start_sdk()  # tracing, when the operator set the SDK's variables
        try:
            async with engine.state.running("mcp"), inner.router.lifespan_context(inner):
                yield
        finally:
            if provider is not None:
                stop_sdk(provider, logger.warning)  # within FLUSH_S

    app = Starlette(
        routes=[Route("/healthz", healthz), Route("/metrics", prometheus), Mount("/", app=inner)],
        lifespan=lifespan,
    )
    guarded: Any = _Guard(app, engine.settings, engine.state.api_keys)
    if tracer() is not None or wanted():
        # Traced: an HTTP server span continuing the caller's traceparent, around all of
        # it (the MCP SDK's tool-call span, and ours, are its children; a _meta wins).
        from starlette.middleware.opentelemetry import OpenTelemetryMiddleware

        guarded = OpenTelemetryMiddleware(guarded)
    return guarded


class _Guard:
    """Pure ASGI middleware: the service's edge on ``/mcp`` — the API keys, a body read
    whole under ``NAUTILUS_SERVE_BODY_TIMEOUT_S`` and ``NAUTILUS_SERVE_MAX_BODY_BYTES``
    before the MCP app sees it, no standing ``GET`` stream (this server is stateless:
    it has nothing to push) — plus a request id, one ``http_request`` log line and the
    request-duration metric, as ``nautilus-ranking serve`` has them."""

    def __init__(self, app: Any, settings: NautilusSettings, keys: tuple[bytes, ...]) -> None:
        self.app, self.settings, self.keys = app, settings, keys

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        from starlette.requests import Request

        from nautilus_ranking.request.errors import ProblemError
        from nautilus_ranking.service import metrics
        from nautilus_ranking.service.limits import (
            check_api_key,
            matched_key,
            read_body,
            request_id_of,
        )
        from nautilus_ranking.service.problems import problem_response

        rid = request_id_of(scope["headers"])
        started, status = time.perf_counter(), 500
        path: str = scope["path"]

        async def sending(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = [h for h in message.get("headers", []) if h[0] != b"x-request-id"]
                message["headers"] = [*headers, (b"x-request-id", rid.encode())]
            await send(message)

        try:
            if path.rstrip("/") == MCP_PATH:
                try:
                    check_api_key(Request(scope), self.keys)
                    if self.keys:  # which key: the tool ranks by its profile
                        key = matched_key(Request(scope), self.keys)
                        scope.setdefault("state", {})[KEY_STATE] = key
                    if scope["method"] == "GET":
                        raise ProblemError(
                            405,
                            "method-not-allowed",
                            "Method not allowed",
                            "this MCP server is stateless and opens no "
                            "stream: send JSON-RPC with POST",
                            headers={"Allow": "POST, DELETE"},
                        )
                    body = await read_body(
                        Request(scope, receive),
                        self.settings.serve_max_body_bytes,
                        self.settings.serve_body_timeout_s,
                    )
                except ProblemError as exc:
                    if exc.slug == "body-timeout":
                        metrics.REJECTED.labels("body_timeout").inc()
                    await problem_response(exc, rid)(scope, receive, sending)
                    return
                receive = _replay(body, receive)
            await self.app(scope, receive, sending)
        finally:
            metrics.record_http_request(
                scope, status, started, (MCP_PATH, "/healthz", "/metrics"), request_id=rid
            )


def _replay(body: bytes, receive: Any) -> Any:
    """An ASGI ``receive`` that gives the body already read, then what the client sends
    next (its disconnect)."""
    given = False

    async def replay() -> Any:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
