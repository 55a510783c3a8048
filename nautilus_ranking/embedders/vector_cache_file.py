"""The vector cache's files: opened only once they are known to be the cache's.

- **Owner-only**: the folder is made 0700, the SQLite file (and so its ``-wal`` and
  ``-shm``, which SQLite makes with the file's mode) 0600, as ``cursor.key`` is; a file
  an earlier version left 0644 is made 0600.
- **Keyed by a secret**: ``vectors.key`` beside the file (32 random bytes, owner-only,
  made once and linked into place so processes starting together agree on it). The
  cache stores a keyed hash of the text, so whoever reads the file alone cannot test
  whether a given text was embedded.
- **Checked before written**: a symbolic link is not followed, a file that is not an
  SQLite file or has another format is set aside (renamed ``*.bad-<time>-<pid>``, the
  one copy kept: older copies are removed) before anything is written into it; a file
  this process may not write is opened read-only.
- **No full-file check at open**: ``PRAGMA quick_check`` reads the whole file (130-175
  ms at the default size, in every CLI run); it runs at the open after an error that
  was not a lock, a full disk or a read-only file.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
import urllib.parse
from pathlib import Path

from nautilus_ranking.errors import NautilusError
from nautilus_ranking.key_files import link_new_key

#: The file under ``NAUTILUS_DATA_DIR``.
FILE_NAME = "vectors.sqlite3"
#: The secret the stored keys are hashed with, beside the file.
KEY_FILE = "vectors.key"
#: This cache's format: a file with another (or none) is set aside and rebuilt.
FORMAT = "nautilus-vectors-2"
#: Earlier formats of this cache (keyed by plain text hashes): removed and rebuilt.
EARLIER_FORMATS = frozenset({"nautilus-vectors-1"})
#: The file and the two SQLite keeps beside it in WAL mode.
PARTS = ("", "-wal", "-shm")
#: How long a statement waits for another process's lock before it gives up (the
#: request never waits on the cache longer: a write then is skipped and counted).
LOCK_WAIT_S = 0.05
_SQLITE_HEADER = b"SQLite format 3\x00"
_KEY_BYTES = 32


class ForeignCacheFileError(NautilusError):
    """The file at the cache's path is not this cache's (set it aside)."""


class EarlierCacheFormatError(NautilusError):
    """The file is this cache's, from an earlier version (remove it)."""


def part(path: Path, suffix: str) -> Path:
    return Path(str(path) + suffix)


def open_cache(path: Path, check: bool) -> tuple[sqlite3.Connection, bool]:
    """A connection to the cache at ``path`` (made if absent) and whether it is read-only.
    Raises :class:`ForeignCacheFileError`, :class:`EarlierCacheFormatError` or ``sqlite3.Error``."""
    for suffix in PARTS:
        if part(path, suffix).is_symlink():
            raise ForeignCacheFileError(
                f"{part(path, suffix).name} is a symbolic link (not followed)"
            )
    created = _create_empty(path)
    owner_only(path)
    if not created and path.stat().st_size and not _is_sqlite(path):
        raise ForeignCacheFileError("not an SQLite file")
    read_only = not os.access(path, os.W_OK)
    uri = f"file:{urllib.parse.quote(str(path))}?mode={'ro' if read_only else 'rw'}"
    conn = sqlite3.connect(
        uri, uri=True, timeout=LOCK_WAIT_S, isolation_level=None, check_same_thread=False
    )
    try:
        found = _format(conn)
        if found is None and not read_only:
            _create_schema(conn)
            found = FORMAT
        if found in EARLIER_FORMATS:
            raise EarlierCacheFormatError(found)
        if found != FORMAT:
            raise ForeignCacheFileError(f"format {found!r}, not {FORMAT}")
        conn.execute("PRAGMA synchronous=NORMAL")
        if check:
            (result,) = conn.execute("PRAGMA quick_check").fetchone()
            if result != "ok":
                raise ForeignCacheFileError(f"quick_check: {result}")
    except BaseException:
        conn.close()
        raise
    return conn, read_only


def _create_empty(path: Path) -> bool:
    """Make the file, owner-only, if there is none (never through a link)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        return False
    os.close(fd)
    return True


def owner_only(path: Path) -> None:
    """Make the parts of the cache that exist owner-only (an earlier version's 0644)."""
    for suffix in PARTS:
        with contextlib.suppress(OSError):
            if part(path, suffix).stat().st_mode & 0o077:
                part(path, suffix).chmod(0o600)


def _is_sqlite(path: Path) -> bool:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as file:
        return file.read(len(_SQLITE_HEADER)) == _SQLITE_HEADER


def _format(conn: sqlite3.Connection) -> str | None:
    """The format the file says it has; None for an empty file (no table at all)."""
    tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master")}
    if not tables:
        return None
    if "meta" not in tables:
        return "(no meta table)"
    row = conn.execute("SELECT value FROM meta WHERE name = 'format'").fetchone()
    return str(row[0]) if row else "(none)"


def _create_schema(conn: sqlite3.Connection) -> None:
    # before the first table: freed pages can be given back; pages of 8 KiB hold
    # five 384-float vectors (of 4 KiB, two: a fifth of the file wasted)
    conn.execute("PRAGMA page_size=8192")
    conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
    conn.execute("PRAGMA journal_mode=WAL")
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
        if conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        raise


def set_aside(path: Path) -> Path:
    """Rename the file (it is someone's data, perhaps) out of the way, and remove the
    copies set aside before it: one is kept, never a pile."""
    aside = path.with_name(f"{path.name}.bad-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}")
    for suffix in PARTS:
        if os.path.lexists(part(path, suffix)):
            part(path, suffix).replace(part(aside, suffix))
    for older in path.parent.glob(f"{path.name}.bad-*"):
        if not older.name.startswith(aside.name):
            with contextlib.suppress(OSError):
                older.unlink()  # a link is removed, never what it points to
    return aside


def remove(path: Path) -> None:
    """Remove the cache's files (an earlier version's: nobody else's data)."""
    for suffix in PARTS:
        with contextlib.suppress(FileNotFoundError):
            part(path, suffix).unlink()


def secret(folder: Path) -> bytes:
    """The key in ``folder``'s key file, made first when there is none
    (:func:`~nautilus_ranking.key_files.link_new_key`)."""
    path = folder / KEY_FILE
    try:
        return _read_key(path)
    except FileNotFoundError:
        pass
    link_new_key(path, _KEY_BYTES)
    return _read_key(path)


def _read_key(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as file:
        text = file.read(4 * _KEY_BYTES).strip()
    try:
        key = bytes.fromhex(text.decode("ascii"))
    except ValueError:
        key = b""
    if len(key) != _KEY_BYTES:  # truncated or not ours: never a weak key
        raise OSError(f"{path}: not a key nautilus made ({len(text)} bytes)")
    return key
