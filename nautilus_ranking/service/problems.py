"""Errors as RFC 9457 problem details (``application/problem+json``).

Every error body carries ``type``, ``title``, ``status``, ``detail`` and the
``request_id``; a validation problem adds the ``field``, the bad ``value`` and the
``valid`` choices (and ``errors``, one entry per problem), so a client or an API
gateway can show the operator what to fix. Nothing else — never a stack trace.
Every body, problem or answer, is strict JSON (:func:`strict_json`).
"""

from __future__ import annotations

import json
import math
from typing import Any

from starlette.responses import Response

from nautilus_ranking.request.errors import ProblemError

MEDIA_TYPE = "application/problem+json"
_TYPE_BASE = "urn:nautilus:problem:"


def problem_response(error: ProblemError, request_id: str) -> Response:
    body = {
        "type": _TYPE_BASE + error.slug,
        "title": error.title,
        "status": error.status,
        "detail": error.detail,
        **error.extra,
        "request_id": request_id,
    }
    return Response(
        strict_json(body), status_code=error.status, media_type=MEDIA_TYPE, headers=error.headers
    )


def strict_json(value: Any) -> bytes:
    """A response body any strict JSON parser reads: a NaN or an infinity (a seed may
    hold one) is ``null``, never the bare ``NaN``/``Infinity`` Python would write."""
    try:
        return json.dumps(value, default=str, allow_nan=False).encode()
    except ValueError:
        return json.dumps(_finite(value), default=str, allow_nan=False).encode()


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value
