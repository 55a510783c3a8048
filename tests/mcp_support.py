"""What the MCP tests share: the sources they serve (``fakes.sources_file``), the
environment a server runs in, and the SDK client over streamable HTTP."""

from __future__ import annotations

from pathlib import Path

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from plain_environment import plain_environment

SOURCES = ["tickets", "graph", "runbooks", "postmortems", "broken"]


def environment(tmp: Path, **extra: str) -> dict[str, str]:
    base = plain_environment()
    base.pop("PROMETHEUS_MULTIPROC_DIR", None)
    return {
        **base,
        "NAUTILUS_DATA_DIR": str(tmp / "data"),
        "NAUTILUS_LOG_FORMAT": "json",
        "NAUTILUS_CONFIG": str(tmp / "nautilus.yaml"),
        "NAUTILUS_RANKING_TOP_K": "5",
        "NAUTILUS_SERVE_PROBE_INTERVAL_S": "0.5",
        **extra,
    }


def connect(url: str, key: str | None) -> tuple[httpx2.AsyncClient, Client]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"} if key else {})
    return http, Client(streamable_http_client(url + "/mcp", http_client=http))
