"""What the model's vector cache on disk costs a CLI run: its open, and a query while
another process holds the file's write lock.

- **open**: a cache file at the default bound (256 MB, ~120,000 vectors of 384 floats,
  built first), then a fresh cache object's first read of one vector, as every CLI
  run pays it; the median of ``--rounds``.
- **locked**: ``nautilus-ranking query`` of a query no run embedded before (the demo,
  the default embedder), its wall time with and without another process holding the
  write lock of ``vectors.sqlite3`` (``BEGIN IMMEDIATE``); medians.

    python benchmarks/speed/vector_cache.py [--vectors 120000] [--rounds 5] [--work-dir DIR]

Self-contained (it imports only ``nautilus_ranking``), so the code before a change
can be measured with the same file: run it with ``PYTHONPATH`` set to the other tree.
Not a test: compare within a run.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from nautilus_ranking.embedders.vector_cache import FILE_NAME, VectorCache, namespace

DIM = 384
BOUND = 256_000_000
SPACE = namespace("benchmark")
HOLD = (
    "import sqlite3, sys\n"
    "conn = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
    "conn.execute('BEGIN IMMEDIATE')\n"
    "print('held', flush=True)\n"
    "sys.stdin.readline()\n"
)


def key(i: int) -> bytes:
    return i.to_bytes(16, "big")


def open_times(folder: Path, vectors: int, rounds: int) -> list[float]:
    """Seconds from a fresh cache object to its first vector read, ``rounds`` times."""
    path = folder / FILE_NAME
    cache = VectorCache(path, BOUND, DIM)
    rng = np.random.default_rng(0)
    for start in range(0, vectors, 10_000):
        batch = range(start, min(start + 10_000, vectors))
        cache.put(SPACE, {key(i): rng.random(DIM, dtype=np.float32) for i in batch})
    cache.close()
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        fresh = VectorCache(path, BOUND, DIM)
        assert len(fresh.get(SPACE, [key(0)])) == 1
        times.append(time.perf_counter() - started)
        fresh.close()
    return times


def query_time(data: Path, query: str) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NAUTILUS_")}
    env["NAUTILUS_DATA_DIR"] = str(data)
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "nautilus_ranking", "query", query, "--top-k", "3"],
        env=env,
        stdout=subprocess.DEVNULL,
        check=True,
    )
    return time.perf_counter() - started


def locked_times(data: Path, rounds: int) -> tuple[list[float], list[float]]:
    """A new query's wall time, free and with the write lock held by another process."""
    query_time(data, "warm the demo's databases and the cache")
    free, held = [], []
    for i in range(rounds):
        free.append(query_time(data, f"disk full on host {i} free"))
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLD, str(data / FILE_NAME)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        held.append(query_time(data, f"disk full on host {i} held"))
        holder.communicate("\n", timeout=30)
    return free, held


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vectors", type=int, default=120_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--work-dir", type=Path, default=None)
    args = parser.parse_args()
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="nautilus-vector-cache-"))
    (work / "open").mkdir(parents=True, exist_ok=True)
    import nautilus_ranking

    print(f"code: {Path(nautilus_ranking.__file__).parent}; sqlite {sqlite3.sqlite_version}")
    opens = open_times(work / "open", args.vectors, args.rounds)
    size = (work / "open" / FILE_NAME).stat().st_size
    print(
        f"open ({args.vectors} vectors, {size / 1e6:.0f} MB): median "
        f"{statistics.median(opens) * 1000:.1f} ms (min {min(opens) * 1000:.1f})"
    )
    free, held = locked_times(work / "query", args.rounds)
    print(
        f"query, new text: free {statistics.median(free):.2f} s, "
        f"write lock held {statistics.median(held):.2f} s "
        f"({statistics.median(held) / statistics.median(free):.2f}x)"
    )


if __name__ == "__main__":
    main()
