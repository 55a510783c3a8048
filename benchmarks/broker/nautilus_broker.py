"""What our ranking costs inside the Nautilus broker: p50 and p99 of a request with 8 in
flight, with ranking and without, with the hashing and the onnx embedder.

Ranking runs in ``merge``, on the broker's event loop: while one request is ranked, the
others in flight wait. So this measures requests as a server has them, 8 at a time on
one loop (``asyncio.gather`` of 8 ``arequest``s with distinct callers, round after
round), each request's latency from its start to its answer. The broker (nautilus-rkm
0.3.0, with attestation and its audit log on) serves the demo's four collections as
``static`` sources (78 rows; every request reaches all four); the configurations, one
broker each in one process, take turns round by round so the machine's load hits all
alike:

- ``stock``: ``Broker.from_config`` as it is;
- ``attached, knobs unset``: ``attach_ranking`` with no knob (the broker's answer);
- ``ranked, as before``: ``NAUTILUS_RANKING_TOP_K=8``, the hashing embedder, ranked by
  the whole intent (no routing words left out) and kept by count only (no byte count),
  as the attachment ranked before the ranked route existed;
- ``ranked, hashing``: the same as served today (routing words left out; the accessor
  keeps nothing, as ``python -m nautilus_ranking.upstream serve`` has it);
- ``ranked, onnx``: the same with ``NAUTILUS_EMBEDDER=onnx`` (all-MiniLM-L6-v2, int8).

Then over REST, through real servers on loopback: the broker's own ``nautilus serve``
and ``python -m nautilus_ranking.upstream serve`` (``NAUTILUS_RANKING_TOP_K=8``), each
its own process, and this process as the client, 8 requests in flight, the three
routes taking turns round by round: the stock server's ``POST /v1/request``, the ranked
server's ``POST /v1/request`` and its ``POST /v1/request/ranked``.

    python -m benchmarks.broker.nautilus_broker [--rounds 60] [--out docs/nautilus-broker.md]

``--merge-ab`` measures ``merge`` alone instead, in one thread with nothing else in
flight: the attachment ranking as before (the whole intent) and as today (routing words
left out), on the same 78 rows, alternating call by call (``--rounds`` × 10 calls each).

    python -m benchmarks.broker.nautilus_broker --merge-ab [--out docs/nautilus-broker.md]

It builds (or reuses) the Python 3.13 venv of tools/broker_venv.py with this project's
``embed`` extra and runs the measurement there. Not a test: timings on a shared machine
are noisy; read the ratios to ``stock`` measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.broker.inside import demo_rows, demo_sources, run_inside, write_config

CONCURRENCY = 8
QUERIES = [
    "ops orders-db disk full",
    "ops checkout returns 502 errors",
    "ops kafka consumer lag growing",
    "ops people get signed out",
    "ops TLS certificate expired on the gateway",
    "ops payments timeouts after deploy",
    "ops replication lag on the replica",
    "ops search results are stale",
]
CONFIGS = (
    "stock",
    "attached, knobs unset",
    "ranked, as before",
    "ranked, hashing",
    "ranked, onnx",
)
ROUTES = ("stock server, /v1/request", "ranked server, /v1/request", "ranked server, ranked")
KEY = "benchmark-key-0123456789abcdef"


def _inside(rounds: int, folder: Path) -> dict[str, Any]:
    """Run in the broker's venv: each configuration's latencies (ms)."""
    import asyncio

    from nautilus import Broker

    from nautilus_ranking import NautilusSettings
    from nautilus_ranking.embedders import embedder_from_name
    from nautilus_ranking.upstream import attach_ranking
    from nautilus_ranking.upstream.routing_words import NO_ROUTING_WORDS
    from nautilus_ranking.upstream.store import DEFAULT_KEEP, RankingStore

    config = write_config(folder, demo_sources(), api={"keys": [KEY]})
    brokers = {name: Broker.from_config(config) for name in CONFIGS}
    attach_ranking(brokers["attached, knobs unset"], NautilusSettings())
    before = attach_ranking(brokers["ranked, as before"], NautilusSettings(ranking_top_k=8))
    before.routing_words = NO_ROUTING_WORDS
    # a store counting requests only (the byte bound past anything 1,024 of these hold)
    before.store = RankingStore(DEFAULT_KEEP, 1 << 40)
    attach_ranking(brokers["ranked, hashing"], NautilusSettings(ranking_top_k=8), keep=0)
    onnx = embedder_from_name("onnx")
    attach_ranking(
        brokers["ranked, onnx"],
        NautilusSettings(ranking_top_k=8, embedder="onnx"),
        embedder=onnx,
        keep=0,
    )
    latencies: dict[str, list[float]] = {name: [] for name in CONFIGS}
    rows_out: dict[str, list[int]] = {name: [] for name in CONFIGS}
    merges: dict[str, list[float]] = {name: [] for name in CONFIGS}
    for name, broker in brokers.items():  # time merge: what holds the loop
        synthesizer = broker._synthesizer
        merge = synthesizer.merge

        def timed(results: Any, _merge: Any = merge, _name: str = name) -> Any:
            started = time.perf_counter()
            try:
                return _merge(results)
            finally:
                merges[_name].append((time.perf_counter() - started) * 1000)

        synthesizer.merge = timed

    async def one(broker: Any, i: int, n: int) -> tuple[float, int]:
        started = time.perf_counter()
        response = await broker.arequest(
            "agent-alpha",
            QUERIES[i % len(QUERIES)],
            {"purpose": "support", "session_id": f"s{n}-{i}"},
            caller={"peer": f"10.0.{n % 250}.{i}"},
        )
        rows = sum(len(r) for r in response.data.values())
        return (time.perf_counter() - started) * 1000, rows

    async def run() -> None:
        for n in range(rounds + 2):  # two rounds each to warm up, not counted
            for name in CONFIGS:
                done = await asyncio.gather(*(one(brokers[name], i, n) for i in range(CONCURRENCY)))
                if n >= 2:
                    latencies[name].extend(ms for ms, _ in done)
                    rows_out[name].extend(rows for _, rows in done)

    asyncio.run(run())
    for broker in brokers.values():
        broker.close()
    warm = 2 * CONCURRENCY
    merged = {name: values[warm:] for name, values in merges.items()}
    rest = _over_rest(rounds, config)
    return {"latencies": latencies, "rows": rows_out, "merges": merged, "rest": rest}


def _over_rest(rounds: int, config: Path) -> dict[str, list[float]]:
    """Each route's latencies (ms) through real servers on loopback (module docstring)."""
    import asyncio
    import os
    import signal
    import socket

    import httpx

    def free_port() -> int:
        with socket.socket() as one:
            one.bind(("127.0.0.1", 0))
            return int(one.getsockname()[1])

    env = {k: v for k, v in os.environ.items() if not k.startswith("NAUTILUS_")}
    bin_dir = Path(sys.executable).parent
    servers = {}
    for name, command, extra in (
        ("stock", [str(bin_dir / "nautilus")], {}),
        (
            "ranked",
            [sys.executable, "-m", "nautilus_ranking.upstream"],
            {"NAUTILUS_RANKING_TOP_K": "8", "NAUTILUS_LOG_LEVEL": "warning"},
        ),
    ):
        port = free_port()
        process = subprocess.Popen(
            [
                *command,
                *("serve", "--config", str(config), "--transport", "rest"),
                *("--bind", f"127.0.0.1:{port}", "--log-level", "warning"),
            ],
            cwd=config.parent,
            env={**env, **extra},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        servers[name] = (port, process)
    urls = {
        ROUTES[0]: f"http://127.0.0.1:{servers['stock'][0]}/v1/request",
        ROUTES[1]: f"http://127.0.0.1:{servers['ranked'][0]}/v1/request",
        ROUTES[2]: f"http://127.0.0.1:{servers['ranked'][0]}/v1/request/ranked",
    }
    latencies: dict[str, list[float]] = {name: [] for name in ROUTES}

    async def run() -> None:
        async with httpx.AsyncClient(timeout=60, headers={"X-API-Key": KEY}) as client:
            for port, _ in servers.values():
                for _ in range(300):
                    try:
                        if (await client.get(f"http://127.0.0.1:{port}/healthz")).is_success:
                            break
                    except httpx.HTTPError:
                        pass
                    await asyncio.sleep(0.2)

            async def one(url: str, i: int, n: int) -> float:
                body = {
                    "agent_id": "agent-alpha",
                    "intent": QUERIES[i % len(QUERIES)],
                    "context": {"purpose": "support", "session_id": f"r{n}-{i}"},
                }
                started = time.perf_counter()
                answer = await client.post(url, json=body)
                answer.raise_for_status()
                return (time.perf_counter() - started) * 1000

            for n in range(rounds + 2):
                for name, url in urls.items():
                    done = await asyncio.gather(*(one(url, i, n) for i in range(CONCURRENCY)))
                    if n >= 2:
                        latencies[name].extend(done)

    try:
        asyncio.run(run())
    finally:
        for _, process in servers.values():
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)
    return latencies


def _merge_ab(rounds: int) -> dict[str, Any]:
    """Run in the broker's venv: merge's time (ms), as before and as today, alternating."""
    from types import SimpleNamespace

    from nautilus_ranking import NautilusSettings, RankingSynthesizer
    from nautilus_ranking.upstream.request_scope import request_scope
    from nautilus_ranking.upstream.routing_words import RoutingWords
    from nautilus_ranking.upstream.source_kinds import SourceKind
    from nautilus_ranking.upstream.synthesizer import BrokerSynthesizer

    results = [
        SimpleNamespace(source_id=name, rows=rows, error=None) for name, rows in demo_rows().items()
    ]

    class Passthrough:
        def merge(self, given: list[Any]) -> dict[str, list[dict[str, Any]]]:
            return {r.source_id: list(r.rows) for r in given}

    ranker = RankingSynthesizer.from_settings(NautilusSettings(ranking_top_k=8))
    kinds = {r.source_id: SourceKind("static", False) for r in results}
    words = RoutingWords({"ops"}, {"ops"})  # the demo's data type
    synthesizers = {
        "as before": BrokerSynthesizer(ranker, Passthrough(), lambda: kinds),
        "as today": BrokerSynthesizer(ranker, Passthrough(), lambda: kinds, query_of=words.query),
    }
    times: dict[str, list[float]] = {name: [] for name in synthesizers}
    order = list(synthesizers)
    for i in range(rounds * 10 + 50):
        for name in order if i % 2 else order[::-1]:
            with request_scope(QUERIES[i % len(QUERIES)]):
                started = time.perf_counter()
                synthesizers[name].merge(results)
                if i >= 50:  # warm-up
                    times[name].append((time.perf_counter() - started) * 1000)
    return times


def report_ab(times: dict[str, list[float]], command: str) -> str:
    before, today = percentile(times["as before"], 50), percentile(times["as today"], 50)
    return (
        "<!-- nautilus-broker-merge:begin -->\n"
        "| merge alone (78 rows, top 8, hashing) | p50 ms | p99 ms |\n|---|---|---|\n"
        + "".join(
            f"| {name} | {percentile(v, 50):.2f} | {percentile(v, 99):.2f} |\n"
            for name, v in times.items()
        )
        + f"\nAs today / as before, p50: {today / before:.3f}× ({len(times['as today'])} calls "
        f"each, alternating). `{command}`\n<!-- nautilus-broker-merge:end -->\n"
    )


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def report(result: dict[str, Any], rounds: int, command: str) -> str:
    import platform

    lat = result["latencies"]
    base50, base99 = percentile(lat["stock"], 50), percentile(lat["stock"], 99)
    lines = [
        "<!-- nautilus-broker:begin -->",
        "| configuration | rows handed over | p50 ms | p99 ms | p50 / stock | p99 / stock "
        "| merge p50 ms |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in CONFIGS:
        p50, p99 = percentile(lat[name], 50), percentile(lat[name], 99)
        rows = sorted(set(result["rows"][name]))
        lines.append(
            f"| {name} | {'/'.join(map(str, rows))} | {p50:.1f} | {p99:.1f} | "
            f"{p50 / base50:.2f} | {p99 / base99:.2f} | "
            f"{percentile(result['merges'][name], 50):.2f} |"
        )
    merge = {name: percentile(result["merges"][name], 50) for name in CONFIGS}
    rest = result["rest"]
    rest50 = percentile(rest[ROUTES[0]], 50)
    rest99 = percentile(rest[ROUTES[0]], 99)
    lines += [
        "",
        f"{CONCURRENCY} requests in flight on one loop, {rounds} rounds each "
        f"({rounds * CONCURRENCY} requests a configuration), the five taking turns; merge: "
        "the synthesizer's time per request, during which the loop serves no other request. "
        f"Ranked as served today against as before, merge p50: "
        f"{merge['ranked, hashing'] / merge['ranked, as before']:.2f}×.",
        "",
        "| over REST (a server each, this process the client) | p50 ms | p99 ms "
        "| p50 / stock | p99 / stock |",
        "|---|---|---|---|---|",
    ]
    for name in ROUTES:
        p50, p99 = percentile(rest[name], 50), percentile(rest[name], 99)
        lines.append(
            f"| {name} | {p50:.1f} | {p99:.1f} | {p50 / rest50:.2f} | {p99 / rest99:.2f} |"
        )
    lines += [
        "",
        f"nautilus-rkm 0.3.0, Python 3.13, {platform.machine()}, {time.strftime('%Y-%m-%d')}. "
        f"`{command}`",
        "<!-- nautilus-broker:end -->",
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--out", type=Path, help="write the table into this markdown page")
    parser.add_argument("--merge-ab", action="store_true", help="merge alone, before/today")
    parser.add_argument("--inside", type=Path, help=argparse.SUPPRESS)  # in the broker's venv
    args = parser.parse_args()
    if args.inside is not None:
        found = _merge_ab(args.rounds) if args.merge_ab else _inside(args.rounds, args.inside)
        print(json.dumps(found))
        return 0
    import tempfile

    from benchmarks.sections import write_section
    from tools.broker_venv import broker_venv

    venv = broker_venv(extras=("embed",))
    with tempfile.TemporaryDirectory() as folder:
        result = run_inside(
            venv.python,
            "benchmarks.broker.nautilus_broker",
            folder,
            *("--rounds", str(args.rounds)),
            *(["--merge-ab"] if args.merge_ab else []),
        )
    if result is None:
        return 1
    command = f"python -m benchmarks.broker.nautilus_broker --rounds {args.rounds}"
    if args.merge_ab:
        section = report_ab(result, command + " --merge-ab")
    else:
        section = report(result, args.rounds, command)
    print(section)
    if args.out is not None:
        name = "nautilus-broker-merge" if args.merge_ab else "nautilus-broker"
        write_section(args.out, section, name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
