"""Hostile requests against both servers: does ``/healthz`` still answer at once, and is
any real query refused, while three clients keep sending a request built to be costly
to read (a ``cut`` of 16,000 digits and a letter, the largest that fits in the default
16 KiB body)?

For ``nautilus-ranking serve`` (``POST /v1/query``) and ``nautilus-ranking mcp --transport
http`` (a ``search`` tool call), each over the demo's sources on loopback: first the
``/healthz`` latency alone, then with the three hostile clients running, while one more
client sends real queries. Reported: ``/healthz`` p50, p95 and max latency, the hostile
requests answered (by status) and the real queries answered and refused.

    python -m benchmarks.service.hostile_requests [--seconds 8]
                                                  [--command .venv/bin/nautilus-ranking]

``--command`` runs another checkout's command (an older commit's, to compare). Bounded
in time (``--seconds`` a phase) and on loopback only; the clients and the servers share
the machine's cores, so compare the numbers within a run.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import numpy as np

from tools.servers import running

HOSTILE_CUT = "relative:" + "1" * 16_000 + "x"
HOSTILE_CLIENTS = 3
HEALTHZ_EVERY_S = 0.05
QUERIES = ["orders-db disk full", "checkout 502", "replication lag", "kafka broker"]
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


def mcp_call(arguments: dict[str, object], n: int) -> dict[str, object]:
    return {
        "jsonrpc": "2.0",
        "id": n,
        "method": "tools/call",
        "params": {"name": "search", "arguments": arguments},
    }


@contextmanager
def server(command: str, kind: str, folder: Path) -> Iterator[str]:
    """``serve`` or ``mcp --transport http`` of ``command``, up on a free loopback port."""
    subcommand = ("serve",) if kind == "serve" else ("mcp", "--transport", "http")
    settings = {"NAUTILUS_LOG_LEVEL": "warning"}
    with running(folder, settings, subcommand=subcommand, program=command) as srv:
        yield srv.url


def loop(until: float, send: Callable[[httpx.Client, int], str], out: Counter[str]) -> None:
    with httpx.Client(timeout=60) as client:
        n = 0
        while time.monotonic() < until:
            n += 1
            try:
                out[send(client, n)] += 1
            except httpx.HTTPError as exc:
                out[type(exc).__name__] += 1


def phase(url: str, kind: str, seconds: float, hostile: bool) -> dict[str, object]:
    until = time.monotonic() + seconds
    hostile_statuses: Counter[str] = Counter()
    real_statuses: Counter[str] = Counter()

    def send_hostile(client: httpx.Client, n: int) -> str:
        if kind == "serve":
            body = {"query": "disk", "cut": HOSTILE_CUT}
            return str(client.post(url + "/v1/query", json=body).status_code)
        call = mcp_call({"query": "disk", "cut": HOSTILE_CUT}, n)
        answer = client.post(url + "/mcp", json=call, headers=MCP_HEADERS)
        error = answer.status_code == 200 and answer.json()["result"].get("isError")
        return f"{answer.status_code}{' tool error' if error else ''}"

    def send_real(client: httpx.Client, n: int) -> str:
        query = QUERIES[n % len(QUERIES)]
        if kind == "serve":
            answer = client.post(url + "/v1/query", json={"query": query, "top_k": 5})
            return "ok" if answer.status_code == 200 else f"refused {answer.status_code}"
        answer = client.post(url + "/mcp", json=mcp_call({"query": query}, n), headers=MCP_HEADERS)
        ok = answer.status_code == 200 and not answer.json()["result"].get("isError")
        return "ok" if ok else f"refused {answer.status_code} {answer.text[:80]}"

    threads = [threading.Thread(target=loop, args=(until, send_real, real_statuses))]
    if hostile:
        threads += [
            threading.Thread(target=loop, args=(until, send_hostile, hostile_statuses))
            for _ in range(HOSTILE_CLIENTS)
        ]
    for thread in threads:
        thread.start()
    latencies = []
    with httpx.Client(timeout=60) as client:
        time.sleep(0.5)  # the hostile requests in flight first
        while time.monotonic() < until:
            started = time.perf_counter()
            client.get(url + "/healthz").raise_for_status()
            latencies.append(time.perf_counter() - started)
            time.sleep(HEALTHZ_EVERY_S)
    for thread in threads:
        thread.join()
    ms = np.array(latencies) * 1000
    return {
        "healthz": (np.percentile(ms, 50), np.percentile(ms, 95), ms.max(), len(ms)),
        "hostile": dict(hostile_statuses),
        "real": dict(real_statuses),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0, help="length of each phase")
    parser.add_argument(
        "--command",
        default=str(Path(sys.executable).with_name("nautilus-ranking")),
        help="the nautilus-ranking command to serve with",
    )
    args = parser.parse_args()
    print(f"command: {args.command}; {HOSTILE_CLIENTS} hostile clients; {args.seconds:g} s/phase")
    print("server  phase        /healthz p50 / p95 / max ms (n)   hostile answers   real queries")
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ("serve", "mcp"):
            folder = Path(tmp) / kind
            folder.mkdir()
            with server(args.command, kind, folder) as url:
                for hostile in (False, True):
                    got = phase(url, kind, args.seconds, hostile)
                    p50, p95, top, n = got["healthz"]  # type: ignore[misc]
                    print(
                        f"{kind:<7} {'3 hostile' if hostile else 'quiet':<12} "
                        f"{p50:7.1f} / {p95:7.1f} / {top:7.1f} ({n:>3})   "
                        f"{got['hostile'] or '-'}   {got['real']}"
                    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
