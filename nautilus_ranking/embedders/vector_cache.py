"""Text vectors that outlive the process: one SQLite file under the data directory.

The model costs milliseconds a text and its load half a second, and a CLI run starts
cold every time: with the vectors of texts seen before on disk, a query on data seen
before embeds only what is new, and a query seen before loads nothing of the model.

- **Keyed** by the model's id, the graph rewrite's version, the runtime's version and
  the text's hash (:func:`namespace`): a vector is never served to another model, graph
  or onnxruntime than the one that made it.
- **Several processes at once** (a CLI run beside a ``serve``): SQLite in WAL mode,
  each write one transaction (atomic; readers never see half of one), a busy timeout
  for the file lock.
- **Bounded in bytes** (``NAUTILUS_EMBEDDER_DISK_CACHE_MB``): the stored vectors and
  keys are held under the bound by evicting the least recently used, and freed pages
  are returned to the file system (incremental vacuum), so the file stays near it.
- **Never a wrong vector, never a failed request**: a file that is not this cache's
  (corrupt, truncated, foreign, another format) is set aside (renamed ``*.bad-<time>``)
  and rebuilt, with one warning; a cache that cannot be used at all (an unwritable
  folder) is one warning, and embedding goes on without it. A stored vector of the
  wrong size is ignored.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from nautilus_ranking.log import get_logger

logger = get_logger("nautilus_ranking.embedders.vector_cache")

#: The file under ``NAUTILUS_DATA_DIR``.
FILE_NAME = "vectors.sqlite3"
#: This cache's format: a file with another (or none) is set aside and rebuilt.
FORMAT = "nautilus-vectors-1"
#: Bytes a stored vector is counted for beyond its key and floats: SQLite's row, its
#: key's index, a page's unused end and pages not yet given back (a rowid table: in a
#: WITHOUT ROWID one a row this long overflows into pages of its own, 8 KiB a vector),
#: so that the bound holds for the file, not only for the vectors
#: (tests/embedders/test_vector_cache.py).
ROW_OVERHEAD = 400  # measured: a file of 1,200 such vectors, 1,888 bytes each
#: A hit refreshes its row's recency at most this often (seconds): reading a cached
#: batch costs no write for a while after.
TOUCH_EVERY_S = 3600
#: How long a writer waits for another process's lock before it gives up this write.
BUSY_TIMEOUT_S = 10.0
#: Evict down to this share of the bound, so a full cache does not evict at every write.
EVICT_TO = 0.9


def namespace(*parts: str) -> bytes:
    """What keys a vector besides its text: the model, the graph, the runtime."""
    return hashlib.blake2b("\0".join(parts).encode(), digest_size=16).digest()


class VectorCache:
    """Vectors by ``(namespace, text key)`` in one SQLite file, bounded in bytes."""

    def __init__(self, path: Path, max_bytes: int, dim: int) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.dim = dim
        self._entry_bytes = 16 + dim * 4 + ROW_OVERHEAD
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._broken = False  # unusable: said once, then embedding goes on without it
        self._pid = os.getpid()  # the process that opened the connection

    # -- the file ----------------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection | None:
        if self._conn is not None and self._pid != os.getpid():
            # forked since it was opened: SQLite's locks are the parent's, so the child
            # must not use (nor close) the parent's connection; it opens its own
            self._conn = None
        if self._conn is not None or self._broken:
            return self._conn
        self._pid = os.getpid()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            try:
                self._conn = self._open()
            except sqlite3.DatabaseError as exc:
                self._set_aside(str(exc))
                self._conn = self._open()
        except (OSError, sqlite3.Error) as exc:
            self._broken = True
            logger.warning(
                "vector_cache_unavailable",
                path=str(self.path),
                reason=str(exc),
                action="embedding without the cache on disk",
            )
        return self._conn

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
        )
        try:
            # before the first table: freed pages can be given back; pages of 8 KiB hold
            # five 384-float vectors (of 4 KiB, two: a fifth of the file wasted)
            conn.execute("PRAGMA page_size=8192")
            conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT)")
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS vectors (key BLOB PRIMARY KEY, "
                    "vector BLOB NOT NULL, used INTEGER NOT NULL)"
                )
                conn.execute("CREATE INDEX IF NOT EXISTS vectors_used ON vectors (used)")
                conn.execute("INSERT OR IGNORE INTO meta VALUES ('format', ?)", (FORMAT,))
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            row = conn.execute("SELECT value FROM meta WHERE name = 'format'").fetchone()
            if row is None or row[0] != FORMAT:
                raise sqlite3.DatabaseError(f"format {row[0] if row else None!r}, not {FORMAT}")
            check = conn.execute("PRAGMA quick_check").fetchone()
            if check is None or check[0] != "ok":
                raise sqlite3.DatabaseError(f"quick_check: {check[0] if check else None}")
        except BaseException:
            conn.close()
            raise
        return conn

    def _set_aside(self, reason: str) -> None:
        """Move a file that is not this cache out of the way (it is someone's data,
        perhaps: never deleted), with the one warning."""
        aside = self.path.with_name(f"{self.path.name}.bad-{time.strftime('%Y%m%dT%H%M%S')}")
        for suffix in ("", "-wal", "-shm"):
            part = Path(str(self.path) + suffix)
            if part.exists():
                part.replace(Path(str(aside) + suffix))
        logger.warning(
            "vector_cache_rebuilt",
            path=str(self.path),
            reason=reason,
            set_aside=str(aside),
        )

    def _failed(self, exc: sqlite3.Error) -> None:
        """A read or write failed: a locked file skips this once; a file that went bad
        is set aside and rebuilt at the next use."""
        if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
            logger.warning("vector_cache_busy", path=str(self.path), reason=str(exc))
            return
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        try:
            self._set_aside(str(exc))
        except OSError as error:
            self._broken = True
            logger.warning("vector_cache_unavailable", path=str(self.path), reason=str(error))

    # -- vectors -----------------------------------------------------------------------

    def get(self, space: bytes, keys: Sequence[bytes]) -> dict[bytes, npt.NDArray[np.float32]]:
        """The stored vectors of these text keys (absent: not stored)."""
        if not keys:
            return {}
        with self._lock:
            conn = self._connection()
            if conn is None:
                return {}
            full = {space + key: key for key in keys}
            found: dict[bytes, npt.NDArray[np.float32]] = {}
            stale: list[bytes] = []
            now = int(time.time())
            try:
                names = list(full)
                for start in range(0, len(names), 500):
                    chunk = names[start : start + 500]
                    marks = ",".join("?" * len(chunk))
                    for key, blob, used in conn.execute(
                        f"SELECT key, vector, used FROM vectors WHERE key IN ({marks})", chunk
                    ):
                        if len(blob) != self.dim * 4:
                            continue  # not a vector of this size: embedded again
                        found[full[key]] = np.frombuffer(blob, dtype=np.float32)
                        if now - used > TOUCH_EVERY_S:
                            stale.append(key)
                if stale:
                    conn.executemany(
                        "UPDATE vectors SET used = ? WHERE key = ?", [(now, k) for k in stale]
                    )
            except sqlite3.Error as exc:
                self._failed(exc)
                return {}
            return found

    def put(self, space: bytes, vectors: dict[bytes, npt.NDArray[np.float32]]) -> None:
        """Store these vectors (one transaction), then hold the file under its bound."""
        if not vectors or self.max_bytes <= 0:
            return
        with self._lock:
            conn = self._connection()
            if conn is None:
                return
            now = int(time.time())
            rows = [
                (space + key, np.ascontiguousarray(v, dtype=np.float32).tobytes(), now)
                for key, v in vectors.items()
            ]
            keep = int(self.max_bytes * EVICT_TO) // self._entry_bytes
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    conn.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)", rows)
                    (count,) = conn.execute("SELECT count(*) FROM vectors").fetchone()
                    evict = count * self._entry_bytes > self.max_bytes
                    if evict:
                        conn.execute(
                            "DELETE FROM vectors WHERE key IN (SELECT key FROM vectors "
                            "ORDER BY used, key LIMIT ?)",
                            (count - keep,),
                        )
                    conn.execute("COMMIT")
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                if evict:
                    conn.execute("PRAGMA incremental_vacuum").fetchall()  # a page a step
                    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error as exc:
                self._failed(exc)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
