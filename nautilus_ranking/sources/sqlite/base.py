"""The shared machinery of the embedded SQLite sources: builds from seeds, fingerprints,
locks, and the read connections kept between searches."""

from __future__ import annotations

import contextlib
import contextvars
import errno
import glob
import json
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from nautilus_ranking.errors import NautilusError
from nautilus_ranking.fanout.workers import in_worker
from nautilus_ranking.log import get_logger
from nautilus_ranking.rows import CanonicalRows
from nautilus_ranking.sources.base import Row, SourceBase, with_id
from nautilus_ranking.sources.seeds import file_digest
from nautilus_ranking.sources.sqlite.connections import ReadConnections, read_only_uri, stat_key

try:  # a cross-process lock; without fcntl (Windows) the in-process lock still holds
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

logger = get_logger("nautilus_ranking.sources")

#: Bump when the layout of a built database changes: every database is rebuilt.
BUILD_FORMAT = "2"
META_TABLE = "nautilus_meta"


class ForeignFileError(NautilusError, RuntimeError):
    """A source's ``path`` holds a file nautilus did not build: it is never replaced."""


class NoSpaceError(NautilusError, OSError):
    """A build failed for lack of disk space; it is not tried again before its back-off
    ends (a full disk must not cost every request a doomed build)."""

    def __str__(self) -> str:
        return str(self.strerror)


#: First and longest wait before a build that ran out of space is tried again.
NO_SPACE_BACKOFF_S = (30.0, 600.0)


_PATH_LOCKS: dict[str, threading.Lock] = {}
_PATH_LOCKS_GUARD = threading.Lock()


@contextlib.contextmanager
def build_lock(path: Path) -> Iterator[None]:
    """One builder per database file: a process-wide lock keyed by the resolved path,
    and an ``flock`` on a lock file beside it for other processes."""
    key = str(path.resolve())
    with _PATH_LOCKS_GUARD:
        lock = _PATH_LOCKS.setdefault(key, threading.Lock())
    with lock:
        path.parent.mkdir(parents=True, exist_ok=True)
        if fcntl is None:  # pragma: no cover
            yield
            return
        with path.with_name(f".{path.name}.lock").open("a") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


#: The source whose ``prepare`` this task (one broker call of one source) just ran.
_prepared_here: contextvars.ContextVar[object] = contextvars.ContextVar(
    "nautilus_prepared_here", default=None
)


class SqliteSource(SourceBase):
    """A source served from a SQLite file that nautilus builds from seed files.

    The database records a fingerprint of what it was built from — the seeds'
    contents, the options that shape it, the embedder model — and every search
    checks it (a ``stat`` of the seeds and the database when nothing changed):
    a changed seed is answered on the next query. A rebuild writes a temporary
    file (unique per process and thread) and renames it into place, under a
    lock per database file, so readers never see half a database and a
    database is never missing. A file nautilus did not build is never replaced.
    """

    #: Tables a database built before fingerprints existed has (recognised, rebuilt).
    legacy_tables: frozenset[str] = frozenset()
    #: The row field that is its id (answered as ``id`` too: :func:`with_id`).
    id_field: str = "id"

    def __init__(self, source_id: str, path: Path, timeout_s: float = 5.0) -> None:
        self.id = source_id
        self.path = path
        self.timeout_s = timeout_s
        self._seed_state: tuple[tuple[tuple[int, int, int] | None, ...], str] | None = None
        self._verified: tuple[tuple[int, int, int] | None, str] | None = None
        self._digest_memo: tuple[str, str] | None = None
        self._swept = False
        self._no_space: tuple[float, float, str] | None = None  # (retry at, delay, why)
        self._connections = ReadConnections(path)

    # --- what a subclass provides ---------------------------------------------------

    def seeds(self) -> list[Path]:
        """The files the database is built from."""
        return []

    def options(self) -> dict[str, Any]:
        """The options that shape the built database (a change rebuilds it)."""
        return {}

    def model(self) -> str:
        """The embedder model of stored vectors ("" when none)."""
        return ""

    def build(self, connection: sqlite3.Connection) -> None:
        raise NotImplementedError

    def query_rows(
        self, connection: sqlite3.Connection, query: str, context: Mapping[str, Any], limit: int
    ) -> list[Row]:
        raise NotImplementedError

    # --- serving --------------------------------------------------------------------

    async def prepare(self) -> None:
        """Build or refresh the database; the broker awaits this before the timed search,
        so a (re)build is never cut off by ``timeout_s`` and a changed seed is answered.
        Nothing to build (the seeds and the database as last verified): no thread hop.
        A search later in the same task trusts this check instead of repeating it."""
        if not self._unchanged():
            await in_worker(self, self.ensure_built)
        _prepared_here.set(self)

    async def search(self, query: str, context: Mapping[str, Any], limit: int) -> list[Row]:
        check = _prepared_here.get() is not self
        return await in_worker(self, self._search_in_thread, query, context, limit, check)

    def _unchanged(self) -> bool:
        """Whether :meth:`ensure_built` would find nothing to do without reading a file:
        the seeds ``stat`` as when last hashed, and the database as last verified (a few
        ``stat`` calls, cheap enough for the event loop; hashing a seed is for a worker)."""
        state, verified = self._seed_state, self._verified
        if state is None or verified is None:
            return False
        if tuple(stat_key(p) for p in self.seeds()) != state[0]:
            return False
        return verified == (stat_key(self.path), self._digest_of(state[1]))

    def _digest_of(self, seed_digest: str) -> str:
        """The fingerprint's text for these seeds, worked out once per seed digest (the
        options and the model are fixed when the source is made; two ``json.dumps`` on
        every request's check were a tenth of a small request's fan-out)."""
        kept = self._digest_memo
        if kept is None or kept[0] != seed_digest:
            kept = self._digest_memo = (
                seed_digest,
                json.dumps(self._fingerprint(seed_digest), sort_keys=True),
            )
        return kept[1]

    def close(self) -> None:
        """Close the kept connections (a later search opens what it needs)."""
        self._connections.close()

    def _search_in_thread(
        self, query: str, context: Mapping[str, Any], limit: int, check: bool = True
    ) -> list[Row]:
        if check and not self._unchanged():
            self.ensure_built()
        with self._connections.connection() as connection:
            rows = self.query_rows(connection, query, context, limit)
        if self.id_field == "id" or type(rows) is CanonicalRows:  # the vector type adds it
            return rows
        return [with_id(row, self.id_field) for row in rows]

    # --- building -------------------------------------------------------------------

    def fingerprint(self) -> dict[str, str]:
        """What the database must have been built from; seeds are hashed again only
        when their ``stat`` changes."""
        seeds = self.seeds()
        stats = tuple(stat_key(p) for p in seeds)
        if self._seed_state is None or self._seed_state[0] != stats:
            self._seed_state = (stats, file_digest(seeds))
        return self._fingerprint(self._seed_state[1])

    def _fingerprint(self, seed_digest: str) -> dict[str, str]:
        return {
            "built_by": "nautilus",
            "format": BUILD_FORMAT,
            "kind": type(self).__name__,
            "seed": seed_digest,
            "options": json.dumps(self.options(), sort_keys=True, default=str),
            "model": self.model(),
        }

    def ensure_built(self, force: bool = False) -> str | None:
        """Build or rebuild the database if it is missing or stale; the reason, or None."""
        expected = self.fingerprint()
        digest = json.dumps(expected, sort_keys=True)
        if not self._swept:  # once a process: what a builder killed earlier left behind
            self._swept = True
            self._sweep_if_idle()
        if not force:
            if self._verified == (stat_key(self.path), digest):
                return None
            stat = stat_key(self.path)  # fresh already: no lock (the folder may be read-only)
            if stat is not None and _stale_reason(self._stored(), expected) is None:
                self._verified = (stat, digest)
                return None
        if self._no_space is not None and time.monotonic() < self._no_space[0]:
            retry_at, _, why = self._no_space
            raise NoSpaceError(
                errno.ENOSPC,
                f"{why}; not tried again for another {retry_at - time.monotonic():.0f} s",
            )
        with build_lock(self.path):
            self._sweep()  # under the lock, every partial file is a dead builder's
            reason = "forced" if force else _stale_reason(self._stored(), expected)
            if reason is not None:
                logger.info(
                    "source_rebuilding", source_id=self.id, path=str(self.path), reason=reason
                )
                self._build_and_replace(expected)
                logger.info("source_database_built", source_id=self.id, path=str(self.path))
            self._verified = (stat_key(self.path), digest)
            return reason

    def rebuild(self) -> str:
        """Rebuild the database now, whatever its fingerprint
        (``nautilus-ranking sources rebuild``)."""
        return self.ensure_built(force=True) or "forced"

    def _stored(self) -> dict[str, str] | None:
        """The fingerprint stored in the database; None when there is no database.

        Raises when the file exists but nautilus did not build it.
        """
        if not self.path.exists():
            return None
        refusal = ForeignFileError(
            f"refusing to replace {self.path}: it is not a database "
            "nautilus built (move it away, or choose another 'path')"
        )
        try:
            connection = sqlite3.connect(read_only_uri(self.path), uri=True)
            try:
                tables = {
                    name
                    for (name,) in connection.execute(
                        "SELECT name FROM sqlite_master WHERE type = 'table'"
                    )
                }
                if META_TABLE in tables:
                    return dict(connection.execute(f"SELECT key, value FROM {META_TABLE}"))
            finally:
                connection.close()
        except sqlite3.Error:
            raise refusal from None
        if self.legacy_tables and self.legacy_tables <= tables:
            return {}  # built by a nautilus without fingerprints
        raise refusal

    def _partials(self) -> list[Path]:
        """This database's temporary build files (and their SQLite journals)."""
        return sorted(self.path.parent.glob(f".{glob.escape(self.path.name)}.*.partial*"))

    def _sweep(self) -> None:
        """Remove the partial files and journals of builders that died (kill -9, a crash,
        a full disk): only the holder of the build lock ever has one open."""
        for stale in self._partials():
            with contextlib.suppress(OSError):
                size = stale.stat().st_size
                stale.unlink()
                logger.info(
                    "source_partial_removed", source_id=self.id, path=str(stale), bytes=size
                )

    def _sweep_if_idle(self) -> None:
        """:meth:`_sweep` when partial files exist and no builder holds the lock now
        (never waits for one; a folder nautilus cannot write is left alone)."""
        if not self._partials():
            return
        with contextlib.suppress(OSError):
            lock_path = self.path.with_name(f".{self.path.name}.lock")
            with lock_path.open("a") as handle:
                if fcntl is not None:
                    try:
                        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        return  # a build is running; it sweeps under the lock
                try:
                    self._sweep()
                finally:
                    if fcntl is not None:
                        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    def _build_and_replace(self, fingerprint: dict[str, str]) -> None:
        partial = self.path.with_name(
            f".{self.path.name}.{os.getpid()}."
            f"{threading.get_ident()}.{uuid.uuid4().hex[:8]}.partial"
        )
        try:
            connection = sqlite3.connect(partial)
            try:
                self.build(connection)
                connection.execute(f"CREATE TABLE {META_TABLE} (key TEXT PRIMARY KEY, value TEXT)")
                connection.executemany(
                    f"INSERT INTO {META_TABLE} VALUES (?, ?)", sorted(fingerprint.items())
                )
                connection.commit()
            finally:
                connection.close()
            os.replace(partial, self.path)
        except BaseException as exc:
            for leftover in (
                partial,
                *(
                    partial.with_name(partial.name + suffix)
                    for suffix in ("-journal", "-wal", "-shm")
                ),
            ):
                with contextlib.suppress(OSError):
                    leftover.unlink()
            if _is_no_space(exc):
                raise self._back_off(exc) from None
            raise
        if self._no_space is not None:
            logger.info("source_build_recovered", source_id=self.id, path=str(self.path))
            self._no_space = None

    def _back_off(self, exc: BaseException) -> NoSpaceError:
        """Remember a build that ran out of space; warn once per episode, not per request."""
        first, longest = NO_SPACE_BACKOFF_S
        delay = first if self._no_space is None else min(self._no_space[1] * 2, longest)
        why = f"no space left on the device to build {self.path} ({type(exc).__name__}: {exc})"
        if self._no_space is None:
            logger.warning(
                "source_build_no_space",
                source_id=self.id,
                path=str(self.path),
                error=str(exc),
                retry_in_s=delay,
            )
        self._no_space = (time.monotonic() + delay, delay, why)
        return NoSpaceError(errno.ENOSPC, f"{why}; not tried again for {delay:.0f} s")


def _is_no_space(exc: BaseException) -> bool:
    """A write failed because the disk (or the quota) is full."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    return (
        isinstance(exc, sqlite3.Error)
        and getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL
    )


def _stale_reason(stored: dict[str, str] | None, expected: dict[str, str]) -> str | None:
    if stored is None:
        return "no database yet"
    if not stored:
        return "built by an older nautilus"
    for key, why in (
        ("format", "nautilus' database layout changed"),
        ("kind", "the source type changed"),
        ("seed", "the seed changed"),
        ("options", "the source's options changed"),
        ("model", "the embedder model changed"),
    ):
        if stored.get(key) != expected[key]:
            return why
    return None


class SeededSqliteSource(SqliteSource):
    """A SQLite source built from one seed file (the table, full-text and vector types)."""

    def __init__(self, source_id: str, path: Path, seed: Path, timeout_s: float = 5.0) -> None:
        super().__init__(source_id, path, timeout_s)
        self.seed = seed

    def seeds(self) -> list[Path]:
        return [self.seed]
