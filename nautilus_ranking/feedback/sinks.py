"""Where the feedback log's records go: JSONL files in the data directory, and
optionally an OpenSearch ``ubi_queries`` / ``ubi_events`` pair.

Each sink is written by the recorder's one thread (``recorder.py``), never a request's.

The JSONL files are the process's own (``<family>-<pid>-<start>.jsonl``), made
owner-only (0600, in a 0700 folder) as ``cursor.key`` is: they hold who asked what,
however hashed. A file is rotated once it holds an eighth of the folder's bound (at
most 64 MB); at rotation, and when the first file opens, files older than the
retention are deleted, then the oldest until the folder is within its bound. The
bound is the folder's, every process's files counted.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Protocol

from nautilus_ranking.feedback.events import EVENTS, QUERIES

#: The largest file before rotation, whatever the folder's bound.
MAX_FILE_BYTES = 64 * 1024 * 1024
_DAY_S = 86_400


class Sink(Protocol):
    """Takes batches of records; raises on failure (the recorder counts the loss)."""

    def write(self, family: str, records: list[dict[str, Any]]) -> None: ...

    def close(self) -> None: ...


def _line(record: dict[str, Any]) -> bytes:
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


class JsonlSink:
    """The process's two JSONL files under ``folder``, rotated and bounded."""

    def __init__(self, folder: Path, max_bytes: int, retention_days: int) -> None:
        self.folder = folder
        self.max_bytes = max_bytes
        self.file_bytes = min(MAX_FILE_BYTES, max(1, max_bytes // 8))
        self.retention_s = retention_days * _DAY_S
        self._open: dict[str, tuple[IO[bytes], Path]] = {}

    def write(self, family: str, records: list[dict[str, Any]]) -> None:
        handle, _ = self._file(family)
        handle.write(b"".join(_line(r) for r in records))
        handle.flush()
        if handle.tell() >= self.file_bytes:
            self._rotate(family)

    def close(self) -> None:
        for handle, _ in self._open.values():
            with contextlib.suppress(OSError):
                handle.close()
        self._open.clear()

    def _file(self, family: str) -> tuple[IO[bytes], Path]:
        if family not in self._open:
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            self._prune()
            self._open[family] = _new_file(self.folder, family)
        return self._open[family]

    def _rotate(self, family: str) -> None:
        handle, _ = self._open.pop(family)
        handle.close()
        self._prune()
        self._open[family] = _new_file(self.folder, family)

    def _prune(self) -> None:
        """Delete files past the retention, then the oldest past the folder's bound
        (never a file this process has open)."""
        mine = {path for _, path in self._open.values()}
        now = time.time()
        files = []
        for path in self.folder.glob("ubi_*.jsonl"):
            with contextlib.suppress(OSError):
                stat = path.stat()
                if path not in mine and now - stat.st_mtime > self.retention_s:
                    path.unlink()
                    continue
                files.append((stat.st_mtime, stat.st_size, path))
        total = sum(size for _, size, _ in files)
        for _, size, path in sorted(files):
            if total <= self.max_bytes:
                break
            if path in mine:
                continue
            with contextlib.suppress(OSError):
                path.unlink()
                total -= size


def _new_file(folder: Path, family: str) -> tuple[IO[bytes], Path]:
    """A new owner-only file of ``family`` for this process (never an existing one)."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    for attempt in range(100):
        path = folder / f"{family}-{os.getpid()}-{stamp}{f'-{attempt}' if attempt else ''}.jsonl"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_NOFOLLOW
        try:
            fd = os.open(path, flags, 0o600)
        except FileExistsError:
            continue
        return os.fdopen(fd, "ab"), path
    raise FileExistsError(f"{folder}: no free name for a {family} file")


class OpenSearchSink:
    """The records as documents of the ``ubi_queries`` / ``ubi_events`` indexes, over
    the bulk API; an event's ``_id`` is its ``event_id`` (a repeat overwrites itself),
    a query record's its ``query_id``."""

    def __init__(self, url: str, timeout_s: float = 5.0) -> None:
        self.url = url.rstrip("/") + "/_bulk"
        self.timeout_s = timeout_s

    def write(self, family: str, records: list[dict[str, Any]]) -> None:
        id_field = "event_id" if family == EVENTS else "query_id"
        body = b"".join(
            _line({"index": {"_index": family, "_id": r[id_field]}}) + _line(r) for r in records
        )
        request = urllib.request.Request(
            self.url, body, {"Content-Type": "application/x-ndjson"}, method="POST"
        )
        with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
            answer = json.loads(response.read())
        if answer.get("errors"):
            failed = [i for i in answer.get("items", []) if next(iter(i.values())).get("error")]
            raise OSError(f"OpenSearch refused {len(failed)} of {len(records)} {family} records")

    def close(self) -> None:
        return None


FAMILIES = (QUERIES, EVENTS)
