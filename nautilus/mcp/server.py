"""The MCP server: the tools of ``tools.py`` over stdio or streamable HTTP.

stdio is what a desktop agent starts (Claude Desktop, an IDE): stdout carries the
protocol, so every log line goes to stderr. Streamable HTTP is for hosted agents:
one process at ``/mcp`` (stateless, JSON answers), behind the service's API keys
(``NAUTILUS_SERVE_API_KEYS_FILE``: ``Authorization: Bearer KEY`` or ``X-API-Key``,
a problem+json 401 otherwise), with ``/healthz`` and ``/metrics`` beside it.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import time
from collections.abc import AsyncIterator
from types import FrameType
from typing import TYPE_CHECKING, Any

from nautilus.config import NautilusSettings
from nautilus.log import get_logger

if TYPE_CHECKING:
    from nautilus.mcp.tools import Tools

logger = get_logger("nautilus.mcp")

#: ``--port``'s default: beside ``nautilus serve``'s 8000, so both can run on one host.
DEFAULT_PORT = 8001
MCP_PATH = "/mcp"


def run_mcp(transport: str = "stdio", host: str | None = None, port: int | None = None) -> int:
    """Serve until stdin closes (stdio) or SIGINT/SIGTERM (http); the exit code."""
    try:
        import anyio
        import mcp.server  # noqa: F401  (the SDK itself, before the broker is built)
        import uvicorn

        from nautilus.mcp.tools import Tools
        from nautilus.service.server import listen_problem
        from nautilus.service.state import ServerState
    except ImportError as exc:
        raise ImportError("nautilus mcp needs the 'mcp' extra: "
                          f"pip install 'nautilus-ranking[mcp]' ({exc})") from exc
    settings = NautilusSettings()  # strict mode raises ConfigError here
    engine = Tools(ServerState.build(settings))  # as nautilus serve checks everything
    if transport == "stdio":
        anyio.run(_serve_stdio, engine)
        return 0
    host = host or settings.serve_host
    port = port if port is not None else DEFAULT_PORT
    problem = listen_problem(host, port)
    if problem is not None:  # before anything starts, as nautilus serve checks it
        print(f"nautilus: {problem}", file=sys.stderr)
        return 1
    logger.info("mcp_starting", transport="http", host=host, port=port, path=MCP_PATH,
                api_keys=len(engine.state.api_keys))
    # uvicorn drains on SIGTERM, then raises the signal again with the handler it found:
    # ours makes that a clean exit 0 (as nautilus serve does).
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        uvicorn.run(http_app(engine, host), host=host, port=port, access_log=False,
                    log_level="warning", server_header=False,
                    timeout_graceful_shutdown=int(settings.serve_request_timeout_s) + 5)
    except _Terminated:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
    return 0


class _Terminated(Exception):
    """SIGTERM, re-raised by uvicorn once its graceful shutdown is done."""


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise _Terminated


def _server(engine: Tools) -> Any:
    import mcp_types as types
    from mcp.server import Server

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=engine.tools())

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        result: types.CallToolResult = await engine.call(params.name, params.arguments)
        return result

    return Server("nautilus", version="0.1.0", title="nautilus",
                  instructions=("search ranks the rows of every source for a query; "
                                "list_sources names the sources that boosts and sources "
                                "accept."),
                  on_list_tools=list_tools, on_call_tool=call_tool)


async def _serve_stdio(engine: Tools) -> None:
    from mcp.server.stdio import stdio_server

    server = _server(engine)
    async with engine.state.running("mcp"), stdio_server() as (read, write):
        logger.info("mcp_starting", transport="stdio")
        await server.run(read, write, server.create_initialization_options())


def http_app(engine: Tools, host: str) -> Any:
    """The ASGI app: ``/mcp`` behind the API keys, ``/healthz``, ``/metrics``."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Mount, Route

    from nautilus.service import metrics

    inner = _server(engine).streamable_http_app(
        streamable_http_path=MCP_PATH, stateless_http=True, json_response=True, host=host,
        max_request_body_size=engine.settings.serve_max_body_bytes)

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def prometheus(request: Request) -> Response:
        payload, content_type = metrics.render()
        return Response(payload, media_type=content_type)

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        async with engine.state.running("mcp"), inner.router.lifespan_context(inner):
            yield

    app = Starlette(routes=[Route("/healthz", healthz), Route("/metrics", prometheus),
                            Mount("/", app=inner)], lifespan=lifespan)
    return _Guard(app, engine.state.api_keys)


class _Guard:
    """Pure ASGI middleware: the API keys on ``/mcp``, a request id, one ``http_request``
    log line and the request-duration metric, as ``nautilus serve`` has them."""

    def __init__(self, app: Any, keys: tuple[bytes, ...]) -> None:
        self.app, self.keys = app, keys

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        from starlette.requests import Request

        from nautilus.request.errors import ProblemError
        from nautilus.service import metrics
        from nautilus.service.limits import check_api_key, request_id_of
        from nautilus.service.problems import problem_response

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
                except ProblemError as exc:
                    await problem_response(exc, rid)(scope, receive, sending)
                    return
            await self.app(scope, receive, sending)
        finally:
            elapsed = time.perf_counter() - started
            route = path if path in (MCP_PATH, "/healthz", "/metrics") else "other"
            metrics.REQUEST_DURATION.labels(route, str(status)).observe(elapsed)
            logger.info("http_request", method=scope["method"], path=path[:200],
                        status=status, duration_ms=round(elapsed * 1000, 2), request_id=rid)
