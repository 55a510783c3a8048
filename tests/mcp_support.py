"""What the MCP tests share: a sources file with a source that breaks on demand, the
environment a server runs in, and the SDK client over streamable HTTP."""

from __future__ import annotations

import os
from pathlib import Path

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from nautilus.sources.factory import bundled_demo_config

DEMO = bundled_demo_config().parent
SOURCES = ["tickets", "graph", "runbooks", "postmortems", "broken"]


def sources_file(tmp: Path) -> Path:
    """The demo's four sources plus ``broken``, whose seed the tests remove once the
    server is up (a valid file at start-up; then every search of it fails)."""
    text = bundled_demo_config().read_text()
    for seed in (
        "tickets.jsonl",
        "services.jsonl",
        "dependencies.jsonl",
        "runbooks.jsonl",
        "postmortems.jsonl",
    ):
        text = text.replace(f" {seed}", f" {DEMO / seed}")
    seed = tmp / "broken.jsonl"
    seed.write_text('{"id": "b1", "title": "disk"}\n')
    text += (
        f"  - id: broken\n    type: sqlite_fts\n    path: demo/broken.db\n"
        f"    seed: {seed}\n    columns: [title]\n    timeout_s: 1\n"
    )
    path = tmp / "nautilus.yaml"
    path.write_text(text)
    return path


def environment(tmp: Path, **extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.upper().startswith("NAUTILUS_")}
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
