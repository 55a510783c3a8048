"""What many tests hand the broker: a source whose behaviour the test chooses, and seed rows
written as the SQLite sources read them."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nautilus_ranking.sources.factory import bundled_demo_config


class FakeSource:
    """A source whose behaviour a test chooses: rows, an exception, a hang or garbage."""

    def __init__(
        self,
        source_id: str,
        result: Any = None,
        *,
        raises: Exception | None = None,
        hang: bool = False,
        timeout_s: float = 5.0,
    ) -> None:
        self.id = source_id
        self.timeout_s = timeout_s
        self.result = result if result is not None else []
        self.raises = raises
        self.hang = hang

    async def search(self, query: str, context: Mapping[str, Any], limit: int) -> Any:
        if self.raises:
            raise self.raises
        if self.hang:
            await asyncio.Event().wait()
        return self.result

    def close(self) -> None:
        pass


DOCS = [
    {"id": "d1", "title": "Disk full on orders-db", "body": "WAL files filled the disk"},
    {"id": "d2", "title": "Replica lag", "body": "replication lag of 20 minutes near peak"},
    {"id": "d3", "title": "100% CPU on search", "body": "a wildcard query pinned the CPU"},
    {"id": "d4", "title": "Certificate expired", "body": "cert-manager failed to renew"},
]


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


#: The bundled demo's folder (its seeds).
DEMO = bundled_demo_config().parent


def sources_file(tmp: Path, title: str = "disk", timeout_s: float | None = 1) -> Path:
    """The demo's four sources plus ``broken`` (one row titled ``title``), whose seed a
    test removes once the server is up (a valid file at start-up; then every search of
    it fails)."""
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
    seed.write_text(json.dumps({"id": "b1", "title": title}) + "\n")
    text += (
        f"  - id: broken\n    type: sqlite_fts\n    path: demo/broken.db\n"
        f"    seed: {seed}\n    columns: [title]\n"
    )
    if timeout_s is not None:
        text += f"    timeout_s: {timeout_s:g}\n"
    path = tmp / "nautilus.yaml"
    path.write_text(text)
    return path
