"""The bundled demo as the request benchmarks time it, and the timing helpers they share.

``request_overhead`` and ``trace_overhead`` time requests to the demo's broker (its four
SQLite sources, ``top_k=8``, IDF on) and ``service/load.py`` sends its queries to a
server; each takes the queries, the settings and the broker from here, so a change to
the set-up reaches them all.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from nautilus_ranking import Broker, NautilusSettings

QUERIES = (
    "orders-db disk full",
    "orders database replication lag",
    "users logged out of sessions",
    "card payments failing with timeouts at checkout",
    "checkout 502 errors",
    "redis memory eviction",
    "certificate expired on the edge proxy",
    "kafka consumer lag",
    "search index stale after deploy",
    "payments-service latency spike",
)


def demo_env(data_dir: Path) -> dict[str, str]:
    """The demo's settings: its databases under ``data_dir``, top-K 8, IDF on."""
    return {
        "NAUTILUS_DATA_DIR": str(data_dir),
        "NAUTILUS_RANKING_TOP_K": "8",
        "NAUTILUS_RANKING_IDF": "true",
    }


def demo_broker(data_dir: Path) -> Broker:
    """The bundled demo with top-K 8 and IDF on, whatever this shell's NAUTILUS_* say."""
    saved = dict(os.environ)
    for key in [k for k in os.environ if k.startswith("NAUTILUS_")]:
        del os.environ[key]
    os.environ.update(demo_env(data_dir))
    try:
        return Broker.from_config(None, NautilusSettings(_env_file=None))  # type: ignore[call-arg]
    finally:
        os.environ.clear()
        os.environ.update(saved)


def p(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


@contextlib.contextmanager
def busy(on: bool, settle_s: float = 0.5) -> Iterator[None]:
    """One busy-looping process for the block (nothing when ``on`` is false), given
    ``settle_s`` seconds to get going before the block runs."""
    if not on:
        yield
        return
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        if settle_s:
            time.sleep(settle_s)
        yield
    finally:
        burner.kill()
        burner.wait()
