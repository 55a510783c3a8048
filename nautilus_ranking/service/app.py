"""The FastAPI application: one broker per worker, built in the lifespan from settings.

Routes: ``POST /v1/query``, ``GET /v1/config``, ``/healthz``, ``/readyz``,
``/metrics``. Every response carries ``X-Request-ID``; every request logs one
``http_request`` line; every error is problem+json with the request id, never a
stack trace (the log has the detail).
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse, PlainTextResponse, Response

from nautilus_ranking import __version__
from nautilus_ranking.errors import Problem, cut, masked
from nautilus_ranking.log import configure_logging, get_logger
from nautilus_ranking.profiles.build import configured
from nautilus_ranking.request.errors import ProblemError, invalid
from nautilus_ranking.request.feedback import FeedbackReport, report_feedback
from nautilus_ranking.request.model import QueryRequest, parse_request
from nautilus_ranking.request.profile_choice import PROFILE_FIELD, allowed, take_profile
from nautilus_ranking.service import metrics
from nautilus_ranking.service.limits import (
    check_api_key,
    key_matches,
    matched_key,
    parse_json_body,
    read_body,
    while_connected,
)
from nautilus_ranking.service.problems import problem_response, strict_json
from nautilus_ranking.service.request_context import RequestContext
from nautilus_ranking.service.state import ServerState
from nautilus_ranking.settings.model import NautilusSettings
from nautilus_ranking.startup.keys_file import load_api_keys
from nautilus_ranking.tracing.carry import continued
from nautilus_ranking.tracing.sdk import start_sdk, stop_sdk

logger = get_logger("nautilus_ranking.service")


def create_app(settings: NautilusSettings | None = None) -> FastAPI:
    """The application (``uvicorn --factory nautilus_ranking.service.app:create_app``)."""
    settings = settings if settings is not None else NautilusSettings()
    configure_logging(settings.log_level, settings.log_format)
    api_keys = load_api_keys(settings.serve_api_keys_file)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # This worker's tracing, when the operator set the SDK's variables (OTEL_*)
        provider = start_sdk()
        try:
            state = ServerState.build(settings)
            app.state.service = state
            async with state.running("serve"):
                yield
        finally:
            if provider is not None:  # the last spans exported before the worker exits
                stop_sdk(provider, logger.warning)  # within FLUSH_S

    # No /docs or /redoc: FastAPI's pages load their scripts from a CDN, so offline (or
    # behind a strict egress policy) they are blank; any OpenAPI viewer reads the schema.
    # With API keys the schema needs one too: an unauthenticated caller learns only what
    # the probes say.
    app = FastAPI(
        title="nautilus-ranking",
        version=__version__,
        lifespan=lifespan,
        description="The ranking layer for retrieval brokers, over HTTP.",
        openapi_url=None if api_keys else "/openapi.json",
        docs_url=None,
        redoc_url=None,
    )
    _add_routes(app, configured(settings))
    if settings.feedback:  # off: no route, and the schema is as without feedback
        _add_feedback_route(app)
    if api_keys:

        @app.get("/openapi.json", include_in_schema=False)
        async def openapi(request: Request) -> Response:
            check_api_key(request, _state(request).api_keys)
            return JSONResponse(app.openapi())

    _add_error_handlers(app)
    if settings.serve_cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.serve_cors_origins,
            allow_methods=["GET", "POST"],
            allow_headers=["Content-Type", "Authorization", "X-API-Key", "X-Request-ID"],
            expose_headers=["X-Request-ID", "Retry-After"],
        )
    app.add_middleware(RequestContext)
    return app


def _state(request: Request) -> ServerState:
    state: ServerState = request.app.state.service
    return state


def _request_id(request: Request) -> str:
    rid: str = request.scope.get("state", {}).get("request_id") or uuid.uuid4().hex
    return rid


_QUERY_SCHEMA = QueryRequest.model_json_schema()
_PROBLEM = {"content": {"application/problem+json": {"schema": {"type": "object"}}}}


def _query_schema(profiled: bool) -> dict[str, Any]:
    """The request body's schema: the request model's, with ``profile`` where profiles
    are configured (and only there)."""
    if not profiled:
        return _QUERY_SCHEMA
    properties = {**_QUERY_SCHEMA["properties"], "profile": PROFILE_FIELD}
    return {**_QUERY_SCHEMA, "properties": properties}


def _add_routes(app: FastAPI, profiled: bool = False) -> None:
    """Every route, in the order the OpenAPI schema lists them."""
    if profiled:
        _add_profiles_route(app)
    _add_query_route(app, profiled)
    _add_config_route(app)
    _add_probe_routes(app)


def _add_profiles_route(app: FastAPI) -> None:
    """``GET /v1/profiles``: only where profiles are configured."""

    @app.get("/v1/profiles", summary="The ranking profiles your key allows")
    async def profiles(request: Request) -> dict[str, Any]:
        state = _state(request)
        check_api_key(request, state.api_keys)
        grant = state.grant(matched_key(request, state.api_keys))
        return allowed(state.engine.profiles, grant)


def _add_query_route(app: FastAPI, profiled: bool) -> None:
    """``POST /v1/query``: its body's schema has ``profile`` only where profiles are
    configured."""

    @app.post(
        "/v1/query",
        summary="Rank every source's rows for a query",
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": _query_schema(profiled)}},
            }
        },
        responses={
            401: _PROBLEM,
            403: _PROBLEM,
            409: _PROBLEM,
            413: _PROBLEM,
            422: _PROBLEM,
            503: _PROBLEM,
            504: _PROBLEM,
        },
    )
    async def query(request: Request) -> Response:
        """The BrokerResponse as JSON — the same object as ``nautilus-ranking query --json``.

        A JSON body is accepted whatever its Content-Type (``curl -d`` works).
        """
        state = _state(request)
        check_api_key(request, state.api_keys)
        # The body first, under its own deadline: a slow client never holds a slot.
        body = await read_body(
            request, state.settings.serve_max_body_bytes, state.settings.serve_body_timeout_s
        )
        payload, profile = take_profile(parse_json_body(body), bool(state.engine.profiles))
        with continued(request.headers):  # the caller's trace, whatever FastAPI does
            result = await while_connected(  # a caller who leaves gives its slot back
                request,
                state.answer(
                    parse_request(payload),
                    _request_id(request),
                    profile=profile,
                    key=matched_key(request, state.api_keys),
                ),
            )
        return Response(strict_json(result.to_json()), media_type="application/json")


def _add_feedback_route(app: FastAPI) -> None:
    """``POST /v1/feedback``: what a caller did with an answer's rows, by their cites."""

    @app.post(
        "/v1/feedback",
        summary="Report what was done with an answer's rows, by their cites",
        status_code=202,
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": FeedbackReport.model_json_schema()}},
            }
        },
        responses={401: _PROBLEM, 403: _PROBLEM, 404: _PROBLEM, 410: _PROBLEM, 422: _PROBLEM},
    )
    async def feedback(request: Request) -> Response:
        """The events' ids; the report is queued for the feedback log (docs/feedback.md)."""
        state = _state(request)
        check_api_key(request, state.api_keys)
        body = await read_body(
            request, state.settings.serve_max_body_bytes, state.settings.serve_body_timeout_s
        )
        payload, profile = take_profile(parse_json_body(body), bool(state.engine.profiles))
        key = matched_key(request, state.api_keys)
        answer = report_feedback(state.settings, payload, key, None if key else profile)
        return Response(strict_json(answer), status_code=202, media_type="application/json")


def _add_config_route(app: FastAPI) -> None:
    """``GET /v1/config``: a key's view skips the problems of profiles it may not name."""

    @app.get("/v1/config", summary="Effective settings and skipped problems")
    async def config(request: Request) -> dict[str, Any]:
        state = _state(request)
        check_api_key(request, state.api_keys)
        grant = state.grant(matched_key(request, state.api_keys))
        return {
            "settings": {k: masked(k, v) for k, v in state.settings.effective().items()},
            "ranking_enabled": state.settings.ranking_enabled,
            "synthesizer": type(state.engine.broker.synthesizer).__name__,
            "sources": state.engine.source_ids,
            "skipped": [
                {
                    "variable": p.variable,
                    "value": p.shown_value,
                    "reason": p.reason,
                    "valid": p.valid,
                }
                for p in state.engine.problems
                if p.profile is None or grant is None or grant.allows(p.profile)
            ],
        }


def _add_probe_routes(app: FastAPI) -> None:
    """``/healthz``, ``/readyz`` and ``/metrics``: what probes and scrapers read, open to
    them without a key (a key sees more)."""

    @app.get("/healthz", summary="The process is alive (touches no dependency)")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get(
        "/readyz",
        summary="The model is loaded and every source answered a probe recently",
        responses={503: _PROBLEM},
    )
    async def readyz(request: Request) -> Response:
        """With API keys configured, only a caller with a key sees the sources and why
        they fail (driver errors name hosts); a probe gets the status alone."""
        state = _state(request)
        detailed = not state.api_keys or key_matches(request, state.api_keys)
        if state.readiness.loading is not None:  # the first request would pay the load
            raise ProblemError(
                503,
                "not-ready",
                "Not ready",
                f"loading {state.readiness.loading}",
                headers={"Retry-After": "2"},
            )
        failing = state.readiness.failing()
        if failing:
            detail = (
                "sources not answering: " + ", ".join(sorted(failing))
                if detailed
                else f"{len(failing)} source(s) not answering"
            )
            raise ProblemError(
                503,
                "not-ready",
                "Not ready",
                detail,
                extra={"failing": failing} if detailed else {},
                headers={"Retry-After": "5"},
            )
        body: dict[str, Any] = {"status": "ready"}
        if detailed:
            body["sources"] = sorted(state.readiness.health)
        return Response(json.dumps(body).encode(), media_type="application/json")

    @app.get(
        "/metrics", summary="Prometheus metrics (all workers)", response_class=PlainTextResponse
    )
    async def prometheus(request: Request) -> Response:
        """Open to probes; a profile's series only to a key that may name it."""
        state = _state(request)
        grant = state.grant(matched_key(request, state.api_keys))
        payload, content_type = metrics.render(None if grant is None else grant.allows)
        return Response(payload, media_type=content_type)


def _add_error_handlers(app: FastAPI) -> None:
    async def on_problem(request: Request, exc: Exception) -> Response:
        if not isinstance(exc, ProblemError):  # registered for ProblemError only
            raise exc
        if exc.status == 503 and exc.slug == "overloaded":
            metrics.REJECTED.labels("overloaded").inc()
        elif exc.slug == "body-timeout":  # the live view of stalled clients
            metrics.REJECTED.labels("body_timeout").inc()
        return problem_response(exc, _request_id(request))

    async def on_http(request: Request, exc: Exception) -> Response:
        if not isinstance(exc, StarletteHTTPException):
            raise exc
        error = ProblemError(
            exc.status_code,
            f"http-{exc.status_code}",
            str(exc.detail) if exc.detail else "Error",
            f"{request.method} {request.url.path}: {exc.detail}",
            headers=dict(exc.headers or {}),
        )
        return problem_response(error, _request_id(request))

    async def on_validation(request: Request, exc: Exception) -> Response:
        if not isinstance(exc, RequestValidationError):
            raise exc
        problems = [
            Problem(
                ".".join(str(p) for p in e["loc"]),
                cut(e.get("input")),
                str(e["msg"]).lower(),
                "see /openapi.json",
            )
            for e in exc.errors()
        ]
        return problem_response(invalid(problems), _request_id(request))

    app.add_exception_handler(ProblemError, on_problem)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(RequestValidationError, on_validation)
