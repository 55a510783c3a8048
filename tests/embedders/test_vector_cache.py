"""The vectors on disk: they survive a restart, two processes writing at once lose
nothing, a file that is not the cache is set aside and rebuilt, the byte bound holds."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from structlog.testing import capture_logs

from nautilus_ranking.embedders.vector_cache import VectorCache, namespace

DIM = 8
SPACE = namespace("model", "rewrite-1", "ort-1.0")


def vector(i: int) -> np.ndarray:
    return np.full(DIM, float(i), dtype=np.float32)


def key(i: int) -> bytes:
    return i.to_bytes(16, "big")


def test_vectors_survive_a_restart_and_stay_in_their_space(tmp_path: Path) -> None:
    path = tmp_path / "vectors.sqlite3"
    first = VectorCache(path, 1 << 20, DIM)
    first.put(SPACE, {key(i): vector(i) for i in range(5)})
    first.close()
    again = VectorCache(path, 1 << 20, DIM)
    found = again.get(SPACE, [key(i) for i in range(7)])
    assert sorted(found) == [key(i) for i in range(5)]
    np.testing.assert_array_equal(found[key(3)], vector(3))
    assert again.get(namespace("model", "rewrite-2", "ort-1.0"), [key(3)]) == {}


WRITER = """
import sys
import numpy as np
from pathlib import Path
from nautilus_ranking.embedders.vector_cache import VectorCache, namespace
cache = VectorCache(Path(sys.argv[1]), 1 << 26, 8)
space = namespace("model", "rewrite-1", "ort-1.0")
start = int(sys.argv[2])
for i in range(start, start + 300, 3):
    batch = range(i, i + 3)
    cache.put(space, {j.to_bytes(16, "big"): np.full(8, j, dtype=np.float32) for j in batch})
print(cache.skipped_writes)
"""


def test_two_processes_writing_at_once_lose_only_the_writes_they_count(tmp_path: Path) -> None:
    """A write waits a moment for the other's lock, then is skipped and counted: every
    vector not skipped is there, each one whole."""
    path = tmp_path / "vectors.sqlite3"
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), str(start)], stdout=subprocess.PIPE
        )
        for start in (0, 300)
    ]
    skipped = [int(w.communicate(timeout=120)[0]) for w in writers]
    assert [w.returncode for w in writers] == [0, 0]
    found = VectorCache(path, 1 << 26, DIM).get(SPACE, [key(i) for i in range(600)])
    assert len(found) == 600 - 3 * sum(skipped)
    assert all(float(found[key(i)][0]) == i for i in range(600) if key(i) in found)


def test_a_file_that_is_not_the_cache_is_set_aside_and_rebuilt(tmp_path: Path) -> None:
    path = tmp_path / "vectors.sqlite3"
    good = VectorCache(path, 1 << 20, DIM)
    good.put(SPACE, {key(1): vector(1)})
    good.close()
    path.write_bytes(path.read_bytes()[:100])  # truncated
    with capture_logs() as logs:
        cache = VectorCache(path, 1 << 20, DIM)
        assert cache.get(SPACE, [key(1)]) == {}  # never a wrong vector
        cache.put(SPACE, {key(2): vector(2)})
        assert list(cache.get(SPACE, [key(2)])) == [key(2)]
    assert [e["event"] for e in logs] == ["vector_cache_rebuilt"]
    assert len(list(tmp_path.glob("vectors.sqlite3.bad-*"))) == 1


def test_a_foreign_sqlite_file_is_set_aside(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "vectors.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT)")
        conn.execute("INSERT INTO meta VALUES ('format', 'someone-else')")
    with capture_logs() as logs:
        cache = VectorCache(path, 1 << 20, DIM)
        cache.put(SPACE, {key(1): vector(1)})
    assert [e["event"] for e in logs] == ["vector_cache_rebuilt"]
    assert list(cache.get(SPACE, [key(1)])) == [key(1)]


def test_the_byte_bound_holds(tmp_path: Path) -> None:
    path = tmp_path / "vectors.sqlite3"
    dim = 384
    bound = 2 << 20  # 2 MiB: about 1,200 vectors of 384 floats
    cache = VectorCache(path, bound, dim)
    for batch in range(40):  # 4,000 vectors: ~6 MiB written
        cache.put(SPACE, {key(batch * 100 + i): np.ones(dim, np.float32) for i in range(100)})
    cache.close()
    size = sum(
        Path(str(path) + s).stat().st_size for s in ("", "-wal") if Path(str(path) + s).exists()
    )
    assert size <= bound, size
    latest = VectorCache(path, bound, dim).get(SPACE, [key(3999), key(0)])
    assert list(latest) == [key(3999)]  # the oldest went first


FORKED = """
import os, sys
import numpy as np
from pathlib import Path
from nautilus_ranking.embedders.vector_cache import VectorCache, namespace
space = namespace("model", "rewrite-1", "ort-1.0")
cache = VectorCache(Path(sys.argv[1]), 1 << 20, 8)
cache.put(space, {bytes(16): np.ones(8, dtype=np.float32)})  # the parent's connection open
inherited = cache._conn
pid = os.fork()
if pid == 0:
    cache.put(space, {bytes(15) + b"1": np.ones(8, dtype=np.float32)})
    os._exit(0 if cache._conn is not inherited else 3)
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status), len(cache.get(space, [bytes(16), bytes(15) + b"1"])))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_opens_its_own_connection(tmp_path: Path) -> None:
    """SQLite forbids using a connection in a child forked after it was opened (its file
    locks belong to the parent): a worker forked by a preloading server opens its own,
    and its writes reach the parent."""
    out = subprocess.run(
        [sys.executable, "-c", FORKED, str(tmp_path / "vectors.sqlite3")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.split() == ["0", "2"]
