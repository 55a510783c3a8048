"""Load benchmark for ``nautilus-ranking serve``: closed-loop clients from this process
against real servers on loopback, bounded in count and time.

- concurrency 1 / 8 / 32 / 128 against one worker, 8 / 32 against two: p50, p95,
  p99 latency, requests/s, errors (a non-200 answer or a transport error);
- the service's own overhead: its p50 at concurrency 1 against in-process
  ``await Broker.arequest`` on the same queries, in the same run;
- one source made slower than its timeout: the request latency must stay near that
  timeout (the other sources keep their own latency);
- with ``--baseline BIN`` (the ``nautilus-ranking`` command of another checkout, e.g. an older
  commit's ``.venv/bin/nautilus-ranking``): concurrency 1 and 8 against that server too, in
  the same run, and the ratio of requests/s;
- with ``--busy``: everything with one busy-looping process taking a core;
- the server's CPU time per request at each level: the user + system time of the
  server's processes over the level (``/proc/<pid>/stat``, the worker processes
  included) ÷ the requests answered — what a request costs the server whatever else
  the machine is doing.

    python -m benchmarks.service.load [--out docs/benchmarks.md] [--requests 400] [--seconds 15]
                                      [--baseline ../old/.venv/bin/nautilus-ranking] [--busy]

The client and the servers share the machine's cores: on two cores the numbers
measure the pair, and they are noisy when other work runs. Compare within a run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np

from benchmarks.sections import markers, write_section
from benchmarks.speed.demo_timing import QUERIES, busy
from nautilus_ranking import Broker, NautilusSettings
from nautilus_ranking.log import configure_logging
from tools import servers
from tools.servers import Server, running, wait_ready

ROOT = Path(__file__).resolve().parents[2]

BEGIN, END = markers("load")
LOAD_AT_START = os.getloadavg()[0]
SETTINGS = {
    "NAUTILUS_RANKING_TOP_K": "10",
    "NAUTILUS_RANKING_IDF": "true",
    "NAUTILUS_LOG_LEVEL": "info",
}


@dataclass
class Run:
    label: str
    workers: int
    concurrency: int
    latencies_ms: list[float]
    statuses: Counter[str]
    seconds: float
    cpu_s: float = float("nan")  # the server's CPU time over the level (warm-up excluded)

    @property
    def cpu_ms_per_request(self) -> float:
        return 1000 * self.cpu_s / len(self.latencies_ms) if self.latencies_ms else float("nan")

    def percentile(self, q: float) -> float:
        return float(np.percentile(self.latencies_ms, q)) if self.latencies_ms else float("nan")

    @property
    def errors(self) -> int:
        return sum(n for status, n in self.statuses.items() if status != "200")

    def error_text(self) -> str:
        if not self.errors:
            return "0"
        detail = ", ".join(f"{s}×{n}" for s, n in sorted(self.statuses.items()) if s != "200")
        return f"{self.errors} ({detail})"

    def row(self) -> str:
        count = len(self.latencies_ms)
        return (
            f"| {self.label} | {self.workers} | {self.concurrency} | {count} | "
            f"{self.percentile(50):.1f} | {self.percentile(95):.1f} | "
            f"{self.percentile(99):.1f} | {count / self.seconds:.0f} | "
            f"{self.cpu_ms_per_request:.2f} | {self.error_text()} |"
        )


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and its live descendants (``/proc``)."""
    tick = os.sysconf("SC_CLK_TCK")
    total, todo, seen = 0.0, [pid], set()
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        try:
            stat = Path(f"/proc/{current}/stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) "
            total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
            for task in Path(f"/proc/{current}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue  # gone meanwhile
    return total


async def closed_loop(
    url: str, concurrency: int, requests: int, seconds: float, pid: int | None = None
) -> tuple[list[float], Counter[str], float, float]:
    """``concurrency`` clients, each sending its next query when the last one is answered,
    until ``requests`` were sent or ``seconds`` passed."""
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    latencies: list[float] = []
    statuses: Counter[str] = Counter()
    issued = 0
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:
        for query in QUERIES:  # warm-up: connections, databases, caches
            await client.post("/v1/query", json={"query": query})
        deadline = time.monotonic() + seconds
        cpu_before = process_cpu_s(pid) if pid is not None else float("nan")

        async def client_loop() -> None:
            nonlocal issued
            while issued < requests and time.monotonic() < deadline:
                body = {"query": QUERIES[issued % len(QUERIES)]}
                issued += 1
                started = time.perf_counter()
                try:
                    status = str((await client.post("/v1/query", json=body)).status_code)
                except httpx.HTTPError as exc:
                    status = type(exc).__name__
                latencies.append((time.perf_counter() - started) * 1000)
                statuses[status] += 1

        started = time.perf_counter()
        await asyncio.gather(*(client_loop() for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
        cpu = process_cpu_s(pid) - cpu_before if pid is not None else float("nan")
    return latencies, statuses, elapsed, cpu


def load(
    server: Server, label: str, workers: int, concurrency: int, requests: int, seconds: float
) -> Run:
    latencies, statuses, elapsed, cpu = asyncio.run(
        closed_loop(server.url, concurrency, requests, seconds, server.process.pid)
    )
    run = Run(label, workers, concurrency, latencies, statuses, elapsed, cpu)
    print(run.row(), file=sys.stderr, flush=True)
    return run


def in_process_p50(data_dir: Path, requests: int) -> float:
    """p50 of ``await Broker.arequest`` with the service's settings, no HTTP."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NAUTILUS_")}
    env.update(SETTINGS, NAUTILUS_DATA_DIR=str(data_dir))
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        broker = Broker.from_config(None, NautilusSettings(_env_file=None))  # type: ignore[call-arg]
    finally:
        os.environ.clear()
        os.environ.update(saved)

    async def measure() -> list[float]:
        for query in QUERIES:
            await broker.arequest(query)
        out = []
        for i in range(requests):
            started = time.perf_counter()
            await broker.arequest(QUERIES[i % len(QUERIES)])
            out.append((time.perf_counter() - started) * 1000)
        return out

    with broker:
        return float(np.percentile(asyncio.run(measure()), 50))


def source_latency(server: Server) -> dict[str, tuple[float, float]]:
    """Per source: (mean ms, count) from the /metrics histograms."""
    text = httpx.get(server.url + "/metrics", timeout=10).text

    def values(kind: str) -> dict[str, float]:
        pattern = rf'^nautilus_source_duration_seconds_{kind}{{source="([^"]+)"}} (\S+)$'
        return {m.group(1): float(m.group(2)) for m in re.finditer(pattern, text, re.M)}

    sums, counts = values("sum"), values("count")
    return {s: (1000 * sums[s] / counts[s] if counts[s] else 0.0, counts[s]) for s in counts}


def timeouts(server: Server) -> int:
    text = httpx.get(server.url + "/metrics", timeout=10).text
    return int(
        sum(
            float(m.group(1))
            for m in re.finditer(
                r'^nautilus_source_errors_total{[^}]*error_type="timeout"[^}]*} (\S+)$', text, re.M
            )
        )
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write the section into this markdown file")
    parser.add_argument("--requests", type=int, default=400, help="at most, per level")
    parser.add_argument("--seconds", type=float, default=15.0, help="at most, per level")
    parser.add_argument(
        "--slow-delay",
        type=float,
        default=5.0,
        help="seconds the slow source takes (its timeout_s is 2)",
    )
    parser.add_argument(
        "--baseline",
        help="the nautilus-ranking command of another checkout: "
        "concurrency 1 and 8 against it too, in the same run",
    )
    parser.add_argument(
        "--busy", action="store_true", help="run with one busy-looping process taking a core"
    )
    parser.add_argument(
        "--cpu-only",
        action="store_true",
        help="only the server's CPU per request: one worker, concurrency 8 "
        "(for tuning; prints, writes nothing; with --baseline, of that "
        "command's server instead)",
    )
    args = parser.parse_args()
    configure_logging("warning", "console")
    if args.cpu_only:
        if args.baseline:
            servers.NAUTILUS = args.baseline
        with (
            tempfile.TemporaryDirectory(prefix="nautilus-load-") as tmp_name,
            busy(args.busy, settle_s=0),
            running(Path(tmp_name), SETTINGS, workers=1) as server,
        ):
            wait_ready(server)
            run = load(server, "demo", 1, 8, args.requests, args.seconds)
        print(
            f"server CPU per request at concurrency 8, one worker: "
            f"{run.cpu_ms_per_request:.2f} ms ({len(run.latencies_ms)} requests, "
            f"{rate(run):.0f} req/s, p50 {run.percentile(50):.1f} ms)"
        )
        return 0
    runs: list[Run] = []
    with (
        tempfile.TemporaryDirectory(prefix="nautilus-load-") as tmp_name,
        busy(args.busy, settle_s=0),
    ):
        tmp = Path(tmp_name)
        older: list[Run] = []
        if args.baseline:
            own, servers.NAUTILUS = servers.NAUTILUS, args.baseline
            (tmp / "baseline").mkdir()
            try:
                with running(tmp / "baseline", SETTINGS, workers=1) as server:
                    wait_ready(server)
                    for concurrency in (1, 8):
                        older.append(
                            load(
                                server,
                                "demo (baseline)",
                                1,
                                concurrency,
                                args.requests,
                                args.seconds,
                            )
                        )
            finally:
                servers.NAUTILUS = own
        with running(tmp, SETTINGS, workers=1) as server:
            wait_ready(server)
            for concurrency in (1, 8, 32, 128):
                runs.append(load(server, "demo", 1, concurrency, args.requests, args.seconds))
                if concurrency == 1:
                    inside = server_side(server)
            limit = httpx.get(server.url + "/v1/config", timeout=10).json()["settings"][
                "NAUTILUS_SERVE_MAX_CONCURRENCY"
            ]
        baseline = in_process_p50(tmp / "data", args.requests)
        with running(tmp, SETTINGS, workers=2) as server:
            wait_ready(server)
            for concurrency in (8, 32):
                runs.append(load(server, "demo", 2, concurrency, args.requests, args.seconds))
        slow_env: Mapping[str, str] = {**SETTINGS, "NAUTILUS_SERVE_REQUEST_TIMEOUT_S": "10"}
        with running(
            tmp,
            slow_env,
            workers=1,
            launcher=["--slow", "runbooks", "--delay", str(args.slow_delay)],
        ) as server:
            slow = load(server, "runbooks slow", 1, 8, min(args.requests, 40), args.seconds * 2)
            per_source = source_latency(server)
            timed_out = timeouts(server)
    service_p50 = runs[0].percentile(50)
    section = report(
        runs,
        limit,
        baseline,
        service_p50,
        inside,
        slow,
        per_source,
        timed_out,
        args.slow_delay,
        older,
        args.baseline,
        args.busy,
    )
    print(section)
    if args.out:
        write_section(args.out, section, "load")
        print(f"wrote the load section of {args.out}", file=sys.stderr)
    return 0


def server_side(server: Server) -> tuple[float, float]:
    """p50 of the server's own timings so far: whole request (access log) and the broker
    call inside it (``request_served``) — the service's overhead without the client."""
    events = [json.loads(line) for line in server.logs().splitlines() if line.startswith("{")]
    handled = [
        e["duration_ms"]
        for e in events
        if e["event"] == "http_request" and e["path"] == "/v1/query"
    ]
    brokered = [e["duration_ms"] for e in events if e["event"] == "request_served"]
    return float(np.percentile(handled, 50)), float(np.percentile(brokered, 50))


def report(
    runs: list[Run],
    limit: int,
    baseline: float,
    service_p50: float,
    inside: tuple[float, float],
    slow: Run,
    per_source: Mapping[str, tuple[float, float]],
    timed_out: int,
    delay: float,
    older: list[Run],
    older_bin: str | None,
    burner: bool,
) -> str:
    compared = []
    if older:
        now = {r.concurrency: r for r in runs if r.workers == 1}
        compared = [
            "",
            f"**Against a baseline server** (`{older_bin}`, same settings, same run): "
            + "; ".join(
                f"concurrency {o.concurrency}: p50 {o.percentile(50):.1f} → "
                f"{now[o.concurrency].percentile(50):.1f} ms, {rate(o):.0f} → "
                f"{rate(now[o.concurrency]):.0f} req/s "
                f"(**×{rate(now[o.concurrency]) / rate(o):.2f}**)"
                for o in older
            )
            + ".",
        ]
    lines = [
        BEGIN,
        "## Service load (`benchmarks/service/load.py`)",
        "",
        f"Generated by `python -m benchmarks.service.load --out docs/benchmarks.md` on "
        f"{time.strftime('%Y-%m-%d')}. Machine: {platform.machine()}, {os.cpu_count()} cores "
        f"(shared by the client and the server), Python {platform.python_version()}; "
        f"load average {LOAD_AT_START:.1f} when the run started (other work on the machine "
        "slows every number here, the overhead most: each request wakes two processes)"
        + ("; with one extra busy-looping process taking a core." if burner else "."),
        "`nautilus-ranking serve` on loopback with the demo's four sources, "
        "`NAUTILUS_RANKING_TOP_K=10`, `NAUTILUS_RANKING_IDF=true`; closed-loop httpx clients "
        "in a separate process, ten queries in turn, each level bounded to "
        f"{max(len(r.latencies_ms) for r in runs)} requests or its time budget. Latency is "
        "the client's (HTTP included). Errors are non-200 answers; the concurrency limit is "
        f"{limit} queries per worker (`NAUTILUS_SERVE_MAX_CONCURRENCY`), past which a worker "
        "answers 503 at once instead of queueing.",
        "",
        "| sources | workers | concurrency | requests | p50 ms | p95 ms | p99 ms | req/s "
        "| server CPU ms/request | errors |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *(r.row() for r in runs),
        "",
        f"**Server CPU per request** at concurrency 8, one worker: "
        f"**{next(r for r in runs if r.workers == 1 and r.concurrency == 8).cpu_ms_per_request:.2f}"
        " ms** (target ≤ 3 ms): the server processes' user + system time over the level ÷ "
        "the requests answered. Steadier than the latencies when the client and other work "
        "share the cores, not immune: contention adds CPU (more hand-offs, colder caches).",
        "",
        f"**Service overhead**: p50 at concurrency 1 is {service_p50:.2f} ms over HTTP against "
        f"{baseline:.2f} ms for in-process `await Broker.arequest` on the same queries "
        f"(same settings, same run): **{service_p50 - baseline:+.2f} ms**, "
        f"**×{service_p50 / baseline:.2f}** "
        "(target ≤ 2 ms; it includes the client's own HTTP work and every wake-up of two "
        "processes). Inside the server, the same requests took "
        f"{inside[0]:.2f} ms p50 end to end against {inside[1]:.0f} ms p50 for the broker call "
        f"within them: **{inside[0] - inside[1]:+.2f} ms** of handler, JSON, metrics and "
        "access log (the broker's own timer rounds to whole ms).",
        *compared,
        "",
        f"**One slow source**: `runbooks` made to take {delay:g} s, past its `timeout_s` of 2 s "
        f"(8 clients, {len(slow.latencies_ms)} requests; {timed_out} runbooks timeouts, warm-up "
        "included): request "
        f"p50 {slow.percentile(50):.0f} ms, p99 {slow.percentile(99):.0f} ms, errors "
        f"{slow.error_text()} — a request waits for the slow source's timeout, never longer, "
        "and the other sources answer as usual:",
        "",
        "| source | mean search latency ms | searches |",
        "|---|---|---|",
        *(f"| {s} | {ms:.1f} | {int(n)} |" for s, (ms, n) in sorted(per_source.items())),
        END,
    ]
    return "\n".join(lines) + "\n"


def rate(run: Run) -> float:
    return len(run.latencies_ms) / run.seconds


if __name__ == "__main__":
    sys.exit(main())
