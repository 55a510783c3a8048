"""What tracing costs a request, off and on (what ``request_overhead --tracing`` adds).

- **Off, against before tracing existed**: the p50 and the CPU time of ``broker.request``
  on the bundled demo (``top_k=8``, IDF on), in child processes, alternately with a
  revision's package (``--baseline``, default ``main``) and the working tree's, no
  OpenTelemetry loaded (what ``nautilus-ranking query`` runs). Rounds alternate so the
  machine's load hits both alike; the ratio is after ÷ before of the medians.
- **On, against off, through serve**: a real ``nautilus-ranking serve`` application
  (uvicorn on loopback, in a thread of this process) answering the demo queries from an
  HTTP client, in blocks that alternate tracing off (no tracer provider) and on (the SDK,
  a batch span processor and an in-memory exporter: FastAPI's server span and ours).

Not a test: timings on a shared machine are noisy; compare ratios within a run.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.speed.demo_timing import QUERIES as DEMO_QUERIES
from benchmarks.speed.demo_timing import demo_broker, demo_env

#: The first eight of the demo's queries: a round of calls cycles through these.
QUERIES = DEMO_QUERIES[:8]


def child_request(calls: int, out: Path) -> None:
    """In a child: ``broker.request`` p50 and CPU per call, tracing off, as JSON."""
    from nautilus_ranking.log import configure_logging

    configure_logging("warning", "console")
    with tempfile.TemporaryDirectory(prefix="nautilus-trace-off-") as tmp:
        broker = demo_broker(Path(tmp) / "data")
        with broker:
            for q in QUERIES * 3:  # warm: databases built, caches
                broker.request(q)
            times = []
            cpu = time.process_time()
            for i in range(calls):
                started = time.perf_counter()
                broker.request(QUERIES[i % len(QUERIES)])
                times.append((time.perf_counter() - started) * 1000)
            cpu_ms = (time.process_time() - cpu) * 1000 / calls
    loaded = sorted({n.split(".")[0] for n in sys.modules if n.startswith("opentelemetry")})
    out.write_text(
        json.dumps({"p50": float(np.percentile(times, 50)), "cpu": cpu_ms, "otel": loaded}),
        "utf-8",
    )


def off_against(rev: str, rounds: int, calls: int) -> list[str]:
    from tools.revisions import checkout, run_module

    before: list[dict[str, Any]] = []
    after: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="nautilus-trace-before-") as tmp:
        src = checkout(rev, Path(tmp))
        for i in range(rounds):
            for side, runs, where in (("before", before, src), ("after", after, None)):
                out = Path(tmp) / f"{side}{i}.json"
                args = ["--child-request", str(calls), "--json", str(out)]
                run_module("benchmarks.speed.trace_overhead", args, where, check=True)
                runs.append(json.loads(out.read_text("utf-8")))
    seams_us = off_seams_us()
    p50_b = statistics.median(r["p50"] for r in before)
    p50_a = statistics.median(r["p50"] for r in after)
    cpu_b = statistics.median(r["cpu"] for r in before)
    cpu_a = statistics.median(r["cpu"] for r in after)
    best_b = min(r["p50"] for r in before)
    best_a = min(r["p50"] for r in after)
    return [
        f"**Off** (`broker.request` on the demo, {calls} calls a round, {rounds} rounds "
        f"alternating `{rev}` and the working tree): the rounds' p50, median before "
        f"{p50_b:.3f} ms, after {p50_a:.3f} ms: ×{p50_a / p50_b:.3f}; best before "
        f"{best_b:.3f} ms, after {best_a:.3f} ms: **×{best_a / best_b:.3f}** (target ≤ "
        f"1.02); CPU per call (median) before {cpu_b:.3f} ms, after {cpu_a:.3f} ms: "
        f"×{cpu_a / cpu_b:.3f}. Between two processes these move by more than tracing "
        "could (compare two runs); the calls themselves are the precise number below. "
        "OpenTelemetry modules loaded by the working tree's run: "
        f"{', '.join(after[0]['otel']) or 'none'}. The calls tracing adds to a request "
        f"when off, timed alone: {seams_us:.2f} µs a request, "
        f"{seams_us / 10 / p50_a:.3f}% of its p50.",
    ]


def off_seams_us(repeat: int = 20_000) -> float:
    """Microseconds of the calls a request makes into ``tracing`` when it is off (no
    OpenTelemetry loaded): the request span, the ranking scope, four sources, four
    stages, one loop hand-over."""
    from nautilus_ranking import tracing
    from nautilus_ranking.request.model import parse_request
    from nautilus_ranking.request.trace import trace_request

    assert "opentelemetry.trace" not in sys.modules, "measured with OpenTelemetry loaded"
    request = parse_request({"query": QUERIES[0]})
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(repeat):
            trace_request(request, None)
            tracing.ranking_begin()
            for _ in range(4):
                tracing.tracer()
                tracing.stages()
            tracing.carry()
        best = min(best, (time.perf_counter() - started) / repeat * 1e6)
    return best


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def on_against_off(calls: int, block: int) -> list[str]:
    """Through a serve app in this process: blocks of ``block`` requests, off then on."""
    import httpx
    import uvicorn
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from nautilus_ranking.settings.model import NautilusSettings

    saved = dict(os.environ)
    tmp = tempfile.mkdtemp(prefix="nautilus-trace-on-")
    os.environ.update(demo_env(Path(tmp) / "data"), NAUTILUS_LOG_LEVEL="warning")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(dir=tmp)
    from nautilus_ranking.service.app import create_app

    app = create_app(NautilusSettings(_env_file=None))  # type: ignore[call-arg]
    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    times: dict[str, list[float]] = {"off": [], "on": [], "ours": []}
    spans = 0
    telemetry: dict[str, Any] = app._telemetry  # type: ignore[attr-defined]
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            for q in QUERIES * 3:  # warm
                client.post("/v1/query", json={"query": q}).raise_for_status()
            i = 0
            while len(times["on"]) < calls:
                for mode in ("off", "on", "ours"):
                    trace._TRACER_PROVIDER = provider if mode != "off" else None
                    telemetry["tracing"] = mode != "ours"  # FastAPI's own server span
                    for _ in range(block):
                        q = QUERIES[i % len(QUERIES)]
                        i += 1
                        started = time.perf_counter()
                        client.post("/v1/query", json={"query": q}).raise_for_status()
                        times[mode].append((time.perf_counter() - started) * 1000)
                provider.force_flush()
                spans += len(exporter.get_finished_spans())
                exporter.clear()
    finally:
        trace._TRACER_PROVIDER = None
        server.should_exit = True
        thread.join(10)
        provider.shutdown()
        os.environ.clear()
        os.environ.update(saved)
    off, on, ours = (float(np.percentile(times[m], 50)) for m in ("off", "on", "ours"))
    return [
        f"**On** (a `serve` application in this process, uvicorn on loopback, `POST /v1/query` "
        f"of the demo queries, `top_k=8`, IDF on; {calls} requests each way in blocks of "
        f"{block}, the three ways in turn): p50 off {off:.3f} ms; on, FastAPI's spans and "
        f"ours, {on:.3f} ms: **×{on / off:.3f}**; on, ours alone (FastAPI's tracing turned "
        f"off), {ours:.3f} ms: **×{ours / off:.3f}** (target ≤ 1.05). p99: off "
        f"{np.percentile(times['off'], 99):.3f} ms, on {np.percentile(times['on'], 99):.3f} "
        f"ms, ours {np.percentile(times['ours'], 99):.3f} ms. {spans / (2 * calls):.1f} spans "
        "exported a traced request on average.",
    ]


def report(rev: str, rounds: int, calls: int) -> str:
    from nautilus_ranking.log import configure_logging

    configure_logging("warning", "console")
    lines = ["### Tracing (`benchmarks/speed/trace_overhead.py`)", ""]
    lines += off_against(rev, rounds, calls)
    lines += [""]
    lines += on_against_off(calls, 20)
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child-request", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--json", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--baseline", default="main")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    if args.child_request is not None:
        child_request(args.child_request, args.json)
        return 0
    print(report(args.baseline, args.rounds, args.calls))
    return 0


if __name__ == "__main__":
    sys.exit(main())
