"""The vector cache never stands in a request's way and never trusts its file: another
process's lock, a full disk, a read-only, foreign, linked, damaged, deleted or
tampered file each cost a skipped write or a rebuilt cache, never a wait, an error or
a wrong vector; the file stays near its bound and tells nothing without its key."""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from namespaces import UNSHARE, private_mounts
from structlog.testing import capture_logs

from nautilus_ranking.embedders.vector_cache import VectorCache, namespace

DIM = 8
SPACE = namespace("model", "rewrite-1", "ort-1.0")
REPO = Path(__file__).resolve().parents[2]


def vector(i: int, dim: int = DIM) -> np.ndarray:
    return np.full(dim, float(i), dtype=np.float32)


def key(i: int) -> bytes:
    return i.to_bytes(16, "big")


def stored(path: Path, n: int, dim: int = DIM) -> VectorCache:
    cache = VectorCache(path, 1 << 26, dim)
    cache.put(SPACE, {key(i): vector(i, dim) for i in range(n)})
    return cache


def size_on_disk(path: Path) -> int:
    return sum(
        Path(str(path) + s).stat().st_size for s in ("", "-wal") if Path(str(path) + s).exists()
    )


HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("held", flush=True)
sys.stdin.readline()
"""


@pytest.fixture
def lock_held(tmp_path: Path) -> Iterator[Path]:
    """A cache of 100 vectors, last used long ago, whose write lock another process holds."""
    path = tmp_path / "vectors.sqlite3"
    stored(path, 100).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE vectors SET used = 0")  # every read refreshes them
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    yield path
    holder.communicate("\n", timeout=30)
    assert holder.returncode == 0


def test_another_process_holding_the_lock_costs_a_skipped_write_not_a_wait(
    lock_held: Path,
) -> None:
    cache = VectorCache(lock_held, 1 << 26, DIM)
    with capture_logs() as logs:
        found = cache.get(SPACE, [key(i) for i in range(100)])
        assert len(found) == 100  # the refresh of last-used times was skipped, not the read
        cache.put(SPACE, {key(500): vector(500)})
    assert cache.skipped_writes == 2  # the refresh and the write
    assert [e["event"] for e in logs] == ["vector_cache_busy"]
    assert not list(lock_held.parent.glob("*.bad-*"))
    assert cache._conn is not None
    (wait_ms,) = cache._conn.execute("PRAGMA busy_timeout").fetchone()
    assert wait_ms <= 100  # well inside the embedding deadline (1500 ms by default)


def test_a_full_file_skips_the_write_warns_once_and_keeps_the_file(tmp_path: Path) -> None:
    path = tmp_path / "vectors.sqlite3"
    cache = stored(path, 5, 384)
    assert cache._conn is not None
    (pages,) = cache._conn.execute("PRAGMA page_count").fetchone()
    cache._conn.execute(f"PRAGMA max_page_count = {pages}")  # SQLite's own SQLITE_FULL
    with capture_logs() as logs:
        for batch in range(3):
            cache.put(SPACE, {key(100 * batch + i): vector(i, 384) for i in range(100, 150)})
    assert [e["event"] for e in logs] == ["vector_cache_full"]
    assert cache.skipped_writes == 3
    assert not list(tmp_path.glob("*.bad-*"))
    assert len(cache.get(SPACE, [key(i) for i in range(5)])) == 5


FILL_A_SMALL_DISK = """
import json, sys
from pathlib import Path
import numpy as np
from structlog.testing import capture_logs
from nautilus_ranking.embedders.vector_cache import VectorCache, namespace
folder = Path(sys.argv[1])
space = namespace("model")
cache = VectorCache(folder / "vectors.sqlite3", 1 << 30, 384)
with capture_logs() as logs:
    for batch in range(8):  # 8 x 100 vectors of 1.5 KiB: more than the 512 KiB disk
        cache.put(space, {(batch * 100 + i).to_bytes(16, "big"): np.ones(384, np.float32)
                          for i in range(100)})
first = cache.get(space, [i.to_bytes(16, "big") for i in range(100)])
print(json.dumps({"events": [e["event"] for e in logs], "skipped": cache.skipped_writes,
                  "first": len(first), "files": sorted(p.name for p in folder.iterdir())}))
"""


@pytest.mark.skipif(not private_mounts(), reason="needs root and unshare(1) for a small disk")
def test_a_full_disk_skips_the_write_and_warns_once(tmp_path: Path) -> None:
    """On a real 512 KiB file system (a tmpfs in a mount namespace of its own)."""
    folder = tmp_path / "small"
    folder.mkdir()
    script = 'mount -t tmpfs -o size=512k tmpfs "$1" && exec "$2" -c "$3" "$1"'
    assert UNSHARE is not None
    done = subprocess.run(
        [
            UNSHARE,
            "--mount",
            "sh",
            "-c",
            script,
            "sh",
            str(folder),
            sys.executable,
            FILL_A_SMALL_DISK,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["events"] == ["vector_cache_full"]
    assert result["skipped"] >= 1
    assert result["first"] == 100  # what was stored stays served
    assert not [name for name in result["files"] if ".bad-" in name]


def test_one_copy_set_aside_is_kept_older_ones_are_removed(tmp_path: Path) -> None:
    path = tmp_path / "vectors.sqlite3"
    older = tmp_path / "vectors.sqlite3.bad-20200101T000000"
    older.write_bytes(b"set aside by an earlier run")
    path.write_bytes(b"not a database at all, not even SQLite")
    with capture_logs() as logs:
        VectorCache(path, 1 << 20, DIM).put(SPACE, {key(1): vector(1)})
    assert [e["event"] for e in logs] == ["vector_cache_rebuilt"]
    (kept,) = tmp_path.glob("vectors.sqlite3.bad-*")
    assert kept.read_bytes() == b"not a database at all, not even SQLite"


def test_one_big_batch_leaves_the_file_near_its_bound(tmp_path: Path) -> None:
    path = tmp_path / "vectors.sqlite3"
    bound = 1_000_000
    cache = VectorCache(path, bound, 384)
    cache.put(SPACE, {key(i): vector(i, 384) for i in range(20_000)})  # ~38 MB written
    assert size_on_disk(path) <= bound, size_on_disk(path)
    assert list(cache.get(SPACE, [key(19_999), key(0)])) == [key(19_999)]


def test_files_and_folders_are_owner_only(tmp_path: Path) -> None:
    umask = os.umask(0o022)
    try:
        folder = tmp_path / "data"
        path = folder / "vectors.sqlite3"
        cache = stored(path, 3)
        modes = {p.name: p.stat().st_mode & 0o777 for p in [folder, *folder.iterdir()]}
        assert modes == {
            "data": 0o700,
            "vectors.sqlite3": 0o600,
            "vectors.sqlite3-wal": 0o600,
            "vectors.sqlite3-shm": 0o600,
            "vectors.key": 0o600,
        }
        cache.close()
        path.chmod(0o644)  # as an earlier version left it
        assert len(VectorCache(path, 1 << 20, DIM).get(SPACE, [key(1)])) == 1
        assert path.stat().st_mode & 0o777 == 0o600
    finally:
        os.umask(umask)


def test_the_file_alone_does_not_tell_which_texts_were_embedded(tmp_path: Path) -> None:
    text_key = hashlib.blake2b(b"password reset for ceo@example.com", digest_size=16).digest()
    keys = []
    for name in ("one", "two"):
        path = tmp_path / name / "vectors.sqlite3"
        VectorCache(path, 1 << 20, DIM).put(SPACE, {text_key: vector(1)})
        with sqlite3.connect(path) as conn:
            (stored_key,) = conn.execute("SELECT key FROM vectors").fetchone()
        keys.append(stored_key)
    assert SPACE + text_key not in keys and text_key not in keys
    assert keys[0] != keys[1]  # each data directory's own secret


def foreign_file(path: Path) -> bytes:
    """Another application's SQLite file (rollback journal, a table of its own)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT)")
        conn.execute("INSERT INTO meta VALUES ('format', 'someone-else')")
    conn.close()
    return path.read_bytes()


def test_a_foreign_file_is_set_aside_unwritten(tmp_path: Path) -> None:
    path = tmp_path / "vectors.sqlite3"
    original = foreign_file(path)
    with capture_logs() as logs:
        cache = VectorCache(path, 1 << 20, DIM)
        cache.put(SPACE, {key(1): vector(1)})
    assert [e["event"] for e in logs] == ["vector_cache_rebuilt"]
    (aside,) = tmp_path.glob("vectors.sqlite3.bad-*")
    assert aside.read_bytes() == original  # no WAL switched on, no table added
    assert list(cache.get(SPACE, [key(1)])) == [key(1)]


def test_a_link_is_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere" / "app.db"
    original = foreign_file(target)
    path = tmp_path / "data" / "vectors.sqlite3"
    path.parent.mkdir()
    path.symlink_to(target)
    with capture_logs() as logs:
        cache = VectorCache(path, 1 << 20, DIM)
        cache.put(SPACE, {key(1): vector(1)})
    assert [e["event"] for e in logs] == ["vector_cache_rebuilt"]
    assert target.read_bytes() == original
    assert sorted(p.name for p in target.parent.iterdir()) == ["app.db"]
    assert not path.is_symlink() and list(cache.get(SPACE, [key(1)])) == [key(1)]


READ_ONLY = """
import json, sys
from pathlib import Path
import numpy as np
from structlog.testing import capture_logs
from nautilus_ranking.embedders.vector_cache import VectorCache, namespace
space = namespace("model", "rewrite-1", "ort-1.0")
cache = VectorCache(Path(sys.argv[1]), 1 << 20, 8)
with capture_logs() as logs:
    found = cache.get(space, [i.to_bytes(16, "big") for i in range(3)])
    cache.put(space, {(9).to_bytes(16, "big"): np.ones(8, np.float32)})
print(json.dumps({"found": len(found), "skipped": cache.skipped_writes,
                  "events": [e["event"] for e in logs]}))
"""


def test_a_read_only_file_is_read_and_not_set_aside() -> None:
    """Run as a user the file is read-only for (root writes any file: as root, the test
    runs the cache as ``nobody``, who owns the folder)."""
    root = os.geteuid() == 0
    folder = Path(tempfile.mkdtemp(prefix="nautilus-read-only-"))
    try:
        path = folder / "vectors.sqlite3"
        stored(path, 3).close()
        command = [sys.executable, "-c", READ_ONLY, str(path)]
        if root:
            nobody = pwd.getpwnam("nobody")
            for item in [folder, *folder.iterdir()]:
                os.chown(item, nobody.pw_uid, nobody.pw_gid)
            command = [
                "setpriv",
                f"--reuid={nobody.pw_uid}",
                f"--regid={nobody.pw_gid}",
                "--clear-groups",
                *command,
            ]
        path.chmod(0o400)
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            cwd=folder,
        )
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout.splitlines()[-1])
        assert result == {"found": 3, "skipped": 1, "events": ["vector_cache_read_only"]}
        assert not list(folder.glob("*.bad-*"))
    finally:
        shutil.rmtree(folder)


def test_a_stored_nan_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "vectors.sqlite3"
    stored(path, 3).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE vectors SET vector = ?", (np.full(DIM, np.nan, np.float32).tobytes(),))
    assert VectorCache(path, 1 << 20, DIM).get(SPACE, [key(i) for i in range(3)]) == {}


def test_a_damaged_page_is_found_by_the_read_that_meets_it_not_at_every_open(
    tmp_path: Path,
) -> None:
    """The open reads no more of the file than it needs (no whole-file check): a
    damaged page costs nothing until a read meets it; then the file is set aside."""
    path = tmp_path / "vectors.sqlite3"
    stored(path, 100, 384).close()
    with sqlite3.connect(path) as conn:
        (last_leaf,) = conn.execute(
            "SELECT max(pageno) FROM dbstat WHERE name = 'vectors' AND pagetype = 'leaf'"
        ).fetchone()
        (page_size,) = conn.execute("PRAGMA page_size").fetchone()
    conn.close()
    with path.open("r+b") as file:  # the page of the last rows inserted
        file.seek((last_leaf - 1) * page_size)
        file.write(b"\xff" * 64)
    cache = VectorCache(path, 1 << 26, 384)
    with capture_logs() as logs:
        assert list(cache.get(SPACE, [key(0)])) == [key(0)]
        assert logs == []
        assert cache.get(SPACE, [key(99)]) == {}
    assert [e["event"] for e in logs] == ["vector_cache_rebuilt"]


def test_a_deleted_file_is_noticed_and_made_again(tmp_path: Path) -> None:
    path = tmp_path / "vectors.sqlite3"
    cache = stored(path, 1)
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink()
    cache.put(SPACE, {key(2): vector(2)})
    assert list(VectorCache(path, 1 << 20, DIM).get(SPACE, [key(1), key(2)])) == [key(2)]
