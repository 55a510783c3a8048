"""Fixtures for the checks inside the broker's venv: a broker config written in a
temporary folder, the token's claims, a clean ``NAUTILUS_*`` environment."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

AGENT = "agent-alpha"
CONTEXT = {"purpose": "support"}

#: Runbooks and tickets, both of data type ``ops`` (the broker routes an intent naming it).
RUNBOOKS = [
    {"id": "RB-01", "title": "PostgreSQL disk almost full", "body": "free space on the volume"},
    {"id": "RB-02", "title": "Kafka consumer lag", "body": "scale the consumer group"},
    {"id": "RB-03", "title": "Restoring orders-db from backup", "body": "point in time recovery"},
    {"id": "RB-04", "title": "TLS certificate expiry", "body": "renew the certificate"},
    {"id": "RB-05", "title": "Checkout latency", "body": "look at the payment provider"},
]
TICKETS = [
    {"id": "INC-1", "title": "checkout latency spike", "body": "p99 above two seconds"},
    {"id": "INC-2", "title": "orders-db disk 91% full on primary", "body": "disk full alert"},
    {"id": "INC-3", "title": "kafka broker restarted", "body": "consumer lag grew"},
    {"id": "INC-4", "title": "login page slow", "body": "sessions expire early"},
]


def static_source(sid: str, rows: list[dict[str, Any]], data_type: str = "ops") -> dict[str, Any]:
    return {
        "id": sid,
        "type": "static",
        "classification": "unclassified",
        "data_types": [data_type],
        "allowed_purposes": ["support"],
        "rows": rows,
    }


def write_config(folder: Path, sources: list[dict[str, Any]]) -> Path:
    config = {
        "sources": sources,
        "agents": {
            AGENT: {"id": AGENT, "clearance": "confidential", "allowed_purposes": ["support"]}
        },
        "attestation": {"enabled": True},
        "audit": {"path": "./audit.jsonl"},
    }
    path = folder / "nautilus.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def claims(token: str) -> dict[str, Any]:
    """The attestation token's claims (its signature is the broker's business)."""
    payload = token.split(".")[1]
    payload += "=" * (-len(payload) % 4)
    decoded: dict[str, Any] = json.loads(base64.urlsafe_b64decode(payload))
    return decoded


def ids(rows: list[dict[str, Any]]) -> list[Any]:
    return [row.get("id") for row in rows]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    for name in list(os.environ):
        if name.upper().startswith("NAUTILUS_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NAUTILUS_DATA_DIR", str(tmp_path / "data"))
    yield


@pytest.fixture
def ops_config(tmp_path: Path) -> Path:
    return write_config(
        tmp_path, [static_source("runbooks", RUNBOOKS), static_source("tickets", TICKETS)]
    )
