"""What the sentence model costs a server: ``serve`` on the demo ranking by words
(``NAUTILUS_EMBEDDER=hashing``) beside ``serve`` with the embedder unset (the model, when
the ``embed`` extra is installed), in one run.

- both servers answer every demo query once first (the model's vectors then sit in
  its caches), then the same queries in interleaved rounds, the order within a pair
  alternating: p50 and p95 latency of each, and the ratio;
- peak memory (``VmHWM``) of each server's processes, its workers included, after
  the rounds: what a container's memory limit must hold.

    python -m benchmarks.service.embedder_serve [--rounds 20] [--workers 1] [--busy]

``--busy`` keeps one process busy-looping on a core, as on a loaded server.
"""

from __future__ import annotations

import argparse
import contextlib
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

from benchmarks.speed.demo_timing import QUERIES, busy
from tools.servers import Server, running, wait_ready

SETTINGS = {"NAUTILUS_RANKING_TOP_K": "8", "NAUTILUS_RANKING_IDF": "true"}


def peak_mib(pid: int) -> float:
    """The summed peak resident set of ``pid`` and its children, in MiB."""
    import psutil

    root = psutil.Process(pid)
    total = 0
    for process in [root, *root.children(recursive=True)]:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{process.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1])
    return total / 1024


def ask(client: httpx.Client, server: Server, query: str) -> float:
    started = time.perf_counter()
    response = client.post(server.url + "/v1/query", json={"query": query}, timeout=60)
    elapsed = time.perf_counter() - started
    response.raise_for_status()
    return elapsed


def embedder_of(client: httpx.Client, server: Server) -> str:
    config = client.get(server.url + "/v1/config", timeout=10).json()
    return str(config["settings"]["NAUTILUS_EMBEDDER"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--busy", action="store_true")
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        stack.enter_context(busy(args.busy))
        words_dir, model_dir = tmp / "words", tmp / "model"
        words_dir.mkdir()
        model_dir.mkdir()
        words = stack.enter_context(
            running(words_dir, {**SETTINGS, "NAUTILUS_EMBEDDER": "hashing"}, args.workers)
        )
        model = stack.enter_context(running(model_dir, SETTINGS, args.workers))
        for server in (words, model):
            assert wait_ready(server, timeout=120).status_code == 200, server.logs()
        client = stack.enter_context(httpx.Client())
        names = {"hashing": embedder_of(client, words), "unset": embedder_of(client, model)}
        for server in (words, model):
            for query in QUERIES:
                ask(client, server, query)
        times: dict[str, list[float]] = {"hashing": [], "unset": []}
        for round_ in range(args.rounds):
            for i, query in enumerate(QUERIES):
                pair = [("hashing", words), ("unset", model)]
                for label, server in pair if (round_ + i) % 2 == 0 else pair[::-1]:
                    times[label].append(ask(client, server, query))
        peaks = {"hashing": peak_mib(words.process.pid), "unset": peak_mib(model.process.pid)}
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    vnni = "avx512_vnni" in flags or "avx_vnni" in flags
    print(
        f"# serve on the demo, {args.workers} worker(s), {args.rounds} rounds x {len(QUERIES)} "
        f"queries, warm caches{', one core busy' if args.busy else ''}; "
        f"{platform.processor() or platform.machine()}, VNNI: {'yes' if vnni else 'no'}"
    )
    print("| embedder | resolved | p50 ms | p95 ms | peak MiB |")
    print("|---|---|---|---|---|")
    for label in ("hashing", "unset"):
        ordered = sorted(times[label])
        p50 = statistics.median(ordered) * 1000
        p95 = ordered[int(0.95 * (len(ordered) - 1))] * 1000
        print(f"| {label} | {names[label]} | {p50:.1f} | {p95:.1f} | {peaks[label]:.0f} |")
    ratio = statistics.median(times["unset"]) / statistics.median(times["hashing"])
    print(f"p50 ratio, unset / hashing: {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
