"""What feedback costs a ``serve`` request, and that a full or dead sink fails none.

- **Cost.** Two real servers on loopback, one worker each, the same sources and knobs,
  one with ``NAUTILUS_FEEDBACK=true`` (citable answers, the JSONL log), one without.
  Requests alternate between them, one at a time (on, off, on, off …), ``--requests``
  each, after a warm-up; the client's p50 of each and their ratio (target ≤ 1.05).
- **Sink full and dead.** A third server with feedback on whose JSONL folder is a file
  (every write fails) and whose OpenSearch URL is a listener that never answers (each
  bulk call waits out its timeout), its buffer shrunk to 16 items so it fills at once:
  ``--requests`` requests, every non-200 answer or transport error counted (target 0),
  and the drops its ``/metrics`` counted.

    python -m benchmarks.service.feedback_cost [--requests 2000] [--out docs/benchmarks.md]

The client and the servers share the machine's cores: compare within a run.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from benchmarks.sections import markers, write_section
from benchmarks.speed.demo_timing import QUERIES
from tools.servers import Server, running

BEGIN, END = markers("feedback-cost")
SETTINGS = {"NAUTILUS_RANKING_TOP_K": "10", "NAUTILUS_LOG_LEVEL": "warning"}
#: A ``nautilus-ranking`` whose feedback buffer holds 16 items: a sink that stalls fills it.
SMALL_BUFFER = """\
import sys

from nautilus_ranking.feedback import recorder
recorder.BUFFER_ITEMS = 16
from nautilus_ranking.cli import main
sys.exit(main())
"""


@contextmanager
def silent_listener() -> Iterator[str]:
    """A loopback port that accepts connections and never answers: a dead OpenSearch."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1024)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


def timed(client: httpx.Client, server: Server, query: str) -> tuple[float, int]:
    started = time.perf_counter()
    try:
        status = client.post(server.url + "/v1/query", json={"query": query}).status_code
    except httpx.TransportError:
        status = 0
    return time.perf_counter() - started, status


def cost(tmp: Path, requests: int) -> dict[str, float]:
    """p50 and p95 (ms) of each server, requests alternating between them."""
    for name in ("on", "off"):
        (tmp / name).mkdir()
    with (
        running(tmp / "on", {**SETTINGS, "NAUTILUS_FEEDBACK": "true"}) as on,
        running(tmp / "off", SETTINGS) as off,
        httpx.Client(timeout=30) as client,
    ):
        for i in range(100):  # warm-up: imports, the databases, the caches
            timed(client, on, QUERIES[i % len(QUERIES)])
            timed(client, off, QUERIES[i % len(QUERIES)])
        times: dict[str, list[float]] = {"on": [], "off": []}
        failed = 0
        for i in range(requests):
            query = QUERIES[i % len(QUERIES)]
            order = (("on", on), ("off", off)) if i % 2 == 0 else (("off", off), ("on", on))
            for name, server in order:
                took, status = timed(client, server, query)
                times[name].append(took)
                failed += status != 200
    out = {f"p50_{k}": statistics.median(v) * 1000 for k, v in times.items()}
    out |= {f"p95_{k}": statistics.quantiles(v, n=20)[18] * 1000 for k, v in times.items()}
    out["ratio"] = out["p50_on"] / out["p50_off"]
    out["failed"] = failed
    return out


def full_and_dead(tmp: Path, requests: int) -> dict[str, object]:
    """Requests against a server whose every sink fails or stalls, its buffer tiny."""
    program = tmp / "small_buffer_nautilus.py"
    program.write_text(f"#!{sys.executable}\n" + SMALL_BUFFER)
    program.chmod(0o755)
    (tmp / "dead" / "data").mkdir(parents=True)
    (tmp / "dead" / "data" / "feedback").write_text("a file where the folder would be")
    with silent_listener() as dead_url:
        env = {
            **SETTINGS,
            "NAUTILUS_FEEDBACK": "true",
            "NAUTILUS_FEEDBACK_OPENSEARCH_URL": dead_url,
        }
        with (
            running(tmp / "dead", env, program=str(program)) as server,
            httpx.Client(timeout=30) as client,
        ):
            statuses = [
                timed(client, server, QUERIES[i % len(QUERIES)])[1] for i in range(requests)
            ]
            metrics = client.get(server.url + "/metrics").text
    dropped = {
        reason: float(value)
        for reason, value in re.findall(
            r'nautilus_feedback_dropped_total\{reason="([^"]+)"\} ([0-9.e+]+)', metrics
        )
    }
    return {"failed": sum(s != 200 for s in statuses), "requests": requests, "dropped": dropped}


def section(found: dict[str, float], dead: dict[str, object], requests: int) -> str:
    dropped = ", ".join(f"`{k}` {v:,.0f}" for k, v in sorted(dead["dropped"].items()))  # type: ignore[attr-defined]
    return f"""{BEGIN}
## What feedback costs a request (`benchmarks/service/feedback_cost.py`)

`python -m benchmarks.service.feedback_cost --requests {requests}` on
{time.strftime("%Y-%m-%d")}, {platform.machine()}, {os.cpu_count()} cores shared with other
work. Two `serve` processes (one worker each, `NAUTILUS_RANKING_TOP_K=10`, the demo),
one with `NAUTILUS_FEEDBACK=true`; {requests:,} requests each, alternating, one at a time.

| | p50 (ms) | p95 (ms) |
|---|---|---|
| feedback off | {found["p50_off"]:.2f} | {found["p95_off"]:.2f} |
| feedback on (cites, JSONL log) | {found["p50_on"]:.2f} | {found["p95_on"]:.2f} |
| on / off | {found["ratio"]:.3f} | |

Failed requests: {found["failed"]:.0f}. With every sink failing or stalled (the JSONL
folder a file, OpenSearch a listener that never answers, the buffer shrunk to 16
items): {dead["failed"]} of {dead["requests"]:,} requests failed; records dropped and
counted: {dropped}.
{END}
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--out", type=Path, default=None, help="write the section here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        found = cost(Path(tmp), args.requests)
        dead = full_and_dead(Path(tmp), args.requests)
    text = section(found, dead, args.requests)
    print(text)
    if args.out is not None:
        write_section(args.out, text, "feedback-cost")
    return 0 if found["failed"] == 0 and dead["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
