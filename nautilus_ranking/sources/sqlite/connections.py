"""Read-only connections to a built SQLite database, kept between searches and dropped when
a rebuild replaces the file."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote


def stat_key(path: Path) -> tuple[int, int, int] | None:
    """A file's (inode, mtime, size): what changes when a build replaces it; None: no file."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return (stat.st_ino, stat.st_mtime_ns, stat.st_size)


def read_only_uri(path: Path) -> str:
    """A SQLite URI that opens ``path`` read-only, whatever characters the path has."""
    return f"file:{quote(str(path))}?mode=ro"


#: Idle read-only connections a SQLite source keeps for its next searches.
IDLE_CONNECTIONS = 4


class ReadConnections:
    """Read-only connections to one database file, kept between searches.

    Opening a connection and reading its schema cost more than a small query, so a
    connection is reused — one search at a time, from whichever worker thread — for
    the version of the file it was opened on: a rebuild replaces the file, its ``stat``
    changes, and connections to the old one are closed instead of reused. A search
    that failed closes its connection. At most :data:`IDLE_CONNECTIONS` are kept.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._idle: list[tuple[tuple[int, int, int] | None, sqlite3.Connection]] = []

    @contextlib.contextmanager
    def connection(self) -> Iterator[sqlite3.Connection]:
        stamp = stat_key(self.path)  # taken before opening: a race only closes early
        reused, stale = None, []
        with self._lock:
            while self._idle and reused is None:
                kept_stamp, kept = self._idle.pop()
                if kept_stamp == stamp:
                    reused = kept
                else:
                    stale.append(kept)
        for old in stale:
            old.close()
        connection = reused
        if connection is None:
            connection = sqlite3.connect(
                read_only_uri(self.path), uri=True, check_same_thread=False
            )
            connection.row_factory = sqlite3.Row
        try:
            yield connection
        except BaseException:
            connection.close()
            raise
        with self._lock:
            if len(self._idle) < IDLE_CONNECTIONS:
                self._idle.append((stamp, connection))
                return
        connection.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for _, connection in idle:
            connection.close()
