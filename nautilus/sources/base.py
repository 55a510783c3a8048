"""The source protocol, and the shared machinery of the embedded SQLite sources.

A source is anything with an ``id``, a ``timeout_s`` and
``async search(query, context, limit) -> list[dict]``. The broker wraps every
call in a timeout and turns any failure into an ``ErrorRecord``, so a source
may simply raise.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import structlog

logger = structlog.get_logger("nautilus.sources")

Row = dict[str, Any]


@runtime_checkable
class Source(Protocol):
    id: str
    timeout_s: float

    async def search(self, query: str, context: Mapping[str, Any], limit: int) -> list[Row]: ...

    def close(self) -> None: ...


def read_jsonl(path: Path) -> Iterator[Row]:
    """The objects of a JSON-lines file; blank lines skipped, a bad line is a clear error."""
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{number}: not valid JSON ({exc.msg})") from exc
            if not isinstance(value, dict):
                raise ValueError(f"{path}:{number}: expected a JSON object")
            yield value


class SqliteSource:
    """A source served from a SQLite file built once from a bundled seed.

    The first search builds the database (into a temporary file, renamed into
    place, so concurrent processes never see half a database) if it does not
    exist; every search then opens it read-only in a worker thread. Building
    lazily means a broken source fails its own requests, never broker start-up.
    """

    def __init__(self, source_id: str, path: Path, timeout_s: float = 5.0) -> None:
        self.id = source_id
        self.path = path
        self.timeout_s = timeout_s
        self._build_lock = threading.Lock()

    async def search(self, query: str, context: Mapping[str, Any], limit: int) -> list[Row]:
        return await asyncio.to_thread(self._search_in_thread, query, context, limit)

    def close(self) -> None:
        """Nothing to release: each search opens and closes its own connection."""

    def _search_in_thread(self, query: str, context: Mapping[str, Any], limit: int) -> list[Row]:
        self.ensure_built()
        connection = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
        connection.row_factory = sqlite3.Row
        try:
            return self.query_rows(connection, query, context, limit)
        finally:
            connection.close()

    def ensure_built(self) -> None:
        with self._build_lock:
            if self.path.exists() and not self.needs_rebuild():
                return
            self.path.parent.mkdir(parents=True, exist_ok=True)
            partial = self.path.with_name(f".{self.path.name}.{os.getpid()}.partial")
            partial.unlink(missing_ok=True)
            connection = sqlite3.connect(partial)
            try:
                self.build(connection)
                connection.commit()
            except BaseException:
                connection.close()
                partial.unlink(missing_ok=True)
                raise
            connection.close()
            os.replace(partial, self.path)
            logger.info("source_database_built", source_id=self.id, path=str(self.path))

    def needs_rebuild(self) -> bool:
        """Whether an existing database is stale (the vector source checks its model)."""
        return False

    def build(self, connection: sqlite3.Connection) -> None:
        raise NotImplementedError

    def query_rows(self, connection: sqlite3.Connection, query: str,
                   context: Mapping[str, Any], limit: int) -> list[Row]:
        raise NotImplementedError


def quote_identifier(name: str) -> str:
    """A SQL identifier from configuration, quoted; rejects anything but plain names."""
    if not name.replace("_", "").isalnum():
        raise ValueError(f"invalid column or table name {name!r}")
    return f'"{name}"'
