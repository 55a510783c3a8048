"""Text vectors that outlive the process: one SQLite file under the data directory.

The model costs milliseconds a text and its load half a second, and a CLI run starts
cold every time: with the vectors of texts seen before on disk, a query on data seen
before embeds only what is new, and a query seen before loads nothing of the model.

- **Keyed** by the model's id, the pinned graph's digest, the runtime's version and
  the text's hash (:func:`namespace`), hashed with a secret kept beside the file
  (:mod:`.vector_cache_file`): a vector is never served to another model, graph or
  onnxruntime than the one that made it, and the file alone does not tell which texts
  were embedded. Owner-only, as ``cursor.key``.
- **Never in the request's way**: SQLite in WAL mode (readers never wait on a writer);
  a write (or a read's refresh of last-used times) waits at most
  :data:`~.vector_cache_file.LOCK_WAIT_S` for another process's lock, then is skipped
  and counted (:attr:`VectorCache.skipped_writes`). A read keeps what it read.
- **Bounded in bytes** (``NAUTILUS_EMBEDDER_DISK_CACHE_MB``): the stored vectors and
  keys are held under the bound by evicting the least recently used, and every freed
  page is returned to the file system (incremental vacuum), so the file comes back
  near it.
- **Never a wrong vector, never a failed request**: a file that is not this cache's
  (corrupt, foreign, a link) is set aside and rebuilt, with one warning; a full disk
  or a read-only file skips writes, with one warning, and keeps the file; a cache
  that cannot be used at all is one warning, and embedding goes on without it. A
  stored vector of the wrong size or with a NaN is refused. A file deleted or
  replaced under a running process is noticed at the next use and reopened.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from nautilus_ranking.embedders.vector_cache_file import (
    FILE_NAME,
    FORMAT,
    EarlierCacheFormatError,
    ForeignCacheFileError,
    open_cache,
    remove,
    secret,
    set_aside,
)
from nautilus_ranking.log import get_logger

__all__ = ["FILE_NAME", "FORMAT", "VectorCache", "namespace"]

logger = get_logger("nautilus_ranking.embedders.vector_cache")

#: Bytes a stored vector is counted for beyond its key and floats: SQLite's row, its
#: key's index, a page's unused end and pages not yet given back (a rowid table: in a
#: WITHOUT ROWID one a row this long overflows into pages of its own, 8 KiB a vector),
#: so that the bound holds for the file, not only for the vectors
#: (tests/embedders/test_vector_cache.py).
ROW_OVERHEAD = 400  # measured: a file of 1,200 such vectors, 1,888 bytes each
#: A hit refreshes its row's recency at most this often (seconds): reading a cached
#: batch costs no write for a while after.
TOUCH_EVERY_S = 3600
#: Evict down to this share of the bound, so a full cache does not evict at every write.
EVICT_TO = 0.9
#: SQLite's primary result codes, by what the cache does about them.
_SKIP_WRITE = {5: "busy", 6: "busy", 13: "full", 8: "read_only"}  # BUSY, LOCKED, FULL, READONLY
_CORRUPT = {11, 26}  # CORRUPT, NOTADB

T = TypeVar("T")


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
        self._secret = b""
        self._identity: tuple[int, int] | None = None  # the file's (device, inode)
        self._read_only = False
        self._check = False  # run quick_check at the next open (after an error)
        self._broken = False  # unusable: said once, then embedding goes on without it
        self._said: set[str] = set()
        self._pid = os.getpid()  # the process that opened the connection
        #: writes (and refreshes of last-used times) skipped: a lock held past the
        #: wait, a full disk, a read-only file
        self.skipped_writes = 0

    # -- the file ----------------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection | None:
        if self._conn is not None and self._pid != os.getpid():
            # forked since it was opened: SQLite's locks are the parent's, so the child
            # must not use (nor close) the parent's connection; it opens its own
            self._conn = None
        if self._conn is not None and not self._same_file():
            self._close()
            logger.info("vector_cache_reopened", path=str(self.path), reason="file replaced")
        if self._conn is not None or self._broken:
            return self._conn
        self._pid = os.getpid()
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            self._secret = secret(self.path.parent)
            self._conn, self._read_only = self._open()
            stat = os.stat(self.path)
            self._identity = (stat.st_dev, stat.st_ino)
        except sqlite3.Error as exc:
            self._failed(exc, writing=False)
        except OSError as exc:
            self._broken = True
            logger.warning(
                "vector_cache_unavailable",
                path=str(self.path),
                reason=str(exc),
                action="embedding without the cache on disk",
            )
        return self._conn

    def _open(self) -> tuple[sqlite3.Connection, bool]:
        check, self._check = self._check, False
        try:
            opened = open_cache(self.path, check)
        except EarlierCacheFormatError:
            remove(self.path)  # this cache's, keyed by plain hashes: not kept
            opened = open_cache(self.path, False)
        except ForeignCacheFileError as exc:
            self._rebuilt(str(exc))
            opened = open_cache(self.path, False)
        except sqlite3.DatabaseError as exc:
            if _code(exc) not in _CORRUPT:
                raise
            self._rebuilt(str(exc))
            opened = open_cache(self.path, False)
        if opened[1]:
            self._say_once("read_only", "the file is read-only")
        return opened

    def _rebuilt(self, reason: str) -> None:
        """Set the file aside (never written into), with the one warning."""
        aside = set_aside(self.path)
        logger.warning(
            "vector_cache_rebuilt", path=str(self.path), reason=reason, set_aside=str(aside)
        )

    def _same_file(self) -> bool:
        """Whether the path still names the file opened (not deleted, not replaced)."""
        try:
            stat = os.stat(self.path)
        except OSError:
            return False
        return (stat.st_dev, stat.st_ino) == self._identity

    def _close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(sqlite3.Error):
                self._conn.close()
            self._conn = None

    def _say_once(self, kind: str, reason: str) -> None:
        if kind in self._said:
            return
        self._said.add(kind)
        logger.warning(
            f"vector_cache_{kind}",
            path=str(self.path),
            reason=reason,
            action="writes skipped and counted; stored vectors still served",
        )

    def _failed(self, exc: sqlite3.Error, writing: bool) -> None:
        """A statement failed: a lock held too long, a full disk or a read-only file
        skips it (counted, one warning each); a corrupt file is set aside and rebuilt;
        anything else closes the file, to be checked whole at the next use."""
        code = _code(exc)
        if code in _SKIP_WRITE:
            self.skipped_writes += writing
            self._read_only = self._read_only or _SKIP_WRITE[code] == "read_only"
            self._say_once(_SKIP_WRITE[code], str(exc))
            return
        self._close()
        if code in _CORRUPT:
            try:
                self._rebuilt(str(exc))
            except OSError as error:
                self._broken = True
                logger.warning("vector_cache_unavailable", path=str(self.path), reason=str(error))
            return
        self._check = True
        logger.warning("vector_cache_failed", path=str(self.path), reason=str(exc))

    def _write(self, conn: sqlite3.Connection, work: Callable[[sqlite3.Connection], T]) -> T | None:
        """``work`` in one transaction; None when it was skipped (see :meth:`_failed`)."""
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                done = work(conn)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:  # SQLite rolls back itself on a full disk
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            self._failed(exc, writing=True)
            return None
        return done

    def _stored_key(self, space: bytes, key: bytes) -> bytes:
        return hashlib.blake2b(space + key, key=self._secret, digest_size=16).digest()

    # -- vectors -----------------------------------------------------------------------

    def get(self, space: bytes, keys: Sequence[bytes]) -> dict[bytes, npt.NDArray[np.float32]]:
        """The stored vectors of these text keys (absent: not stored)."""
        if not keys:
            return {}
        with self._lock:
            conn = self._connection()
            if conn is None:
                return {}
            stored = {self._stored_key(space, key): key for key in keys}
            found: dict[bytes, npt.NDArray[np.float32]] = {}
            stale: list[bytes] = []
            now = int(time.time())
            try:
                names = list(stored)
                for start in range(0, len(names), 500):
                    chunk = names[start : start + 500]
                    marks = ",".join("?" * len(chunk))
                    for key, blob, used in conn.execute(
                        f"SELECT key, vector, used FROM vectors WHERE key IN ({marks})", chunk
                    ):
                        vector = self._vector(blob)
                        if vector is not None:
                            found[stored[key]] = vector
                            if now - used > TOUCH_EVERY_S:
                                stale.append(key)
            except sqlite3.Error as exc:
                self._failed(exc, writing=False)
                return {}
            if stale and not self._read_only:  # skipped or not, what was read is kept
                self._write(
                    conn,
                    lambda c: c.executemany(
                        "UPDATE vectors SET used = ? WHERE key = ?", [(now, k) for k in stale]
                    ),
                )
            return found

    def _vector(self, blob: bytes) -> npt.NDArray[np.float32] | None:
        """A stored vector, or None for one of another size or with a NaN (embedded again)."""
        if len(blob) != self.dim * 4:
            return None
        vector = np.frombuffer(blob, dtype=np.float32)
        if not np.isfinite(vector).all():
            self._say_once("bad_vector", "a stored vector is not finite: refused")
            return None
        return vector

    def put(self, space: bytes, vectors: dict[bytes, npt.NDArray[np.float32]]) -> None:
        """Store these vectors (one transaction), then hold the file under its bound."""
        if not vectors or self.max_bytes <= 0:
            return
        with self._lock:
            conn = self._connection()
            if conn is None or self._read_only:
                self.skipped_writes += not self._broken  # busy at the open, or read-only
                return
            now = int(time.time())
            rows = [
                (
                    self._stored_key(space, key),
                    np.ascontiguousarray(v, dtype=np.float32).tobytes(),
                    now,
                )
                for key, v in vectors.items()
            ]
            if self._write(conn, lambda c: self._insert(c, rows)):
                try:  # every freed page back (an execute() would free one a step)
                    conn.executescript(
                        "PRAGMA incremental_vacuum; PRAGMA wal_checkpoint(TRUNCATE);"
                    )
                except sqlite3.Error as exc:
                    self._failed(exc, writing=True)

    def _insert(self, conn: sqlite3.Connection, rows: list[tuple[bytes, bytes, int]]) -> bool:
        """Insert the rows; evict the least recently used past the bound (True if any)."""
        conn.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)", rows)
        (count,) = conn.execute("SELECT count(*) FROM vectors").fetchone()
        if count * self._entry_bytes <= self.max_bytes:
            return False
        keep = int(self.max_bytes * EVICT_TO) // self._entry_bytes
        conn.execute(
            # oldest first, in the order written: whole pages are freed, not holes
            "DELETE FROM vectors WHERE rowid IN (SELECT rowid FROM vectors "
            "ORDER BY used, rowid LIMIT ?)",
            (count - keep,),
        )
        return True

    def close(self) -> None:
        with self._lock:
            self._close()


def _code(exc: sqlite3.Error) -> int:
    """SQLite's primary result code of the error (0 when it carries none)."""
    return int(getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF
