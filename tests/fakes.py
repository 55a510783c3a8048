"""What many tests hand the broker: a source whose behaviour the test chooses, and seed rows
written as the SQLite sources read them."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any


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
