"""What a request costs beyond the ranking it exists for, in one process.

On the bundled demo (four SQLite sources, ``top_k=8``, IDF on): the p50 of
``broker.request(q)``, of ``await broker.arequest(q)`` inside a running loop and of
the fan-out alone (``fetch_sync``), each against the p50 of
``synthesizer.rank(results, ctx)`` on the very batches those requests ranked and the
p50 of the sources' own searches called directly (each source's blocking query, one
after the other in this thread: no worker, no loop), timed interleaved with them (so
the machine's load hits all alike). The broker's **overhead** is what is left:
request p50 − rank p50 − searches p50, sync and in a running loop.

    python -m benchmarks.speed.request_overhead [--calls 300] [--busy] [--tracing [--baseline main]]
        [--out docs/benchmarks.md]
    python -m benchmarks.speed.request_overhead --profiles [--calls 2000]

``--profiles`` measures what resolving a ranking profile costs instead: a request through
the request core (``answer_sync``) as today, no profile configured, against the same
request ranked by a named profile that sets the same knobs (so the ranking work is
equal), interleaved, as a ratio of p50s and of CPU time. ``--busy`` runs the same with
one busy-looping process started here (the other core taken), and stops it after.
``--tracing`` adds what tracing costs, off against ``--baseline``'s package and on
against off through serve (``trace_overhead.py``). Not a test: timings on a shared
machine are noisy; compare ratios within a run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks.sections import markers, write_section
from benchmarks.speed.demo_timing import QUERIES, busy, demo_broker, p
from benchmarks.speed.trace_overhead import report as tracing_report
from nautilus_ranking import Broker
from nautilus_ranking.log import configure_logging

BEGIN, END = markers("overhead")


CPU_MS: dict[str, float] = {}


def timed(call: Callable[[], Any], kind: str = "") -> float:
    """Milliseconds ``call()`` took; its CPU time (every thread of the process, so the
    workers' too) is added to ``CPU_MS[kind]``."""
    cpu = time.process_time()
    started = time.perf_counter()
    call()
    elapsed = (time.perf_counter() - started) * 1000
    CPU_MS[kind] = CPU_MS.get(kind, 0.0) + (time.process_time() - cpu) * 1000
    return elapsed


def searches(broker: Broker, query: str) -> None:
    """Every source's own search, called directly: its blocking query in this thread."""
    for source in broker.sources:
        # The SQLite sources' search without the worker hand-off (what a worker runs).
        source._search_in_thread(query, {"query": query}, broker.limit, False)  # type: ignore[attr-defined]


def measure(broker: Broker, calls: int) -> dict[str, list[float]]:
    synth: Any = broker.synthesizer
    batches = {q: broker.fetch_sync(q) for q in QUERIES}  # warm: databases built, caches
    for q in QUERIES:
        broker.request(q)
        searches(broker, q)
    CPU_MS.clear()
    out: dict[str, list[float]] = {
        k: []
        for k in (
            "request",
            "rank_sync",
            "fetch_sync",
            "arequest",
            "rank_async",
            "search_sync",
            "search_async",
        )
    }
    for i in range(calls):
        q = QUERIES[i % len(QUERIES)]
        out["request"].append(timed(partial(broker.request, q), "request"))
        out["rank_sync"].append(timed(partial(synth.rank, batches[q], {"query": q}), "rank"))
        out["search_sync"].append(timed(partial(searches, broker, q), "searches"))
        out["fetch_sync"].append(timed(partial(broker.fetch_sync, q), "fetch_sync"))

    async def inside_a_loop() -> None:
        for q in QUERIES:
            await broker.arequest(q)
        for i in range(calls):
            q = QUERIES[i % len(QUERIES)]
            started = time.perf_counter()
            await broker.arequest(q)
            out["arequest"].append((time.perf_counter() - started) * 1000)
            out["rank_async"].append(timed(partial(synth.rank, batches[q], {"query": q})))
            out["search_async"].append(timed(partial(searches, broker, q)))

    asyncio.run(inside_a_loop())
    return out


def measure_profiles(broker: Broker, calls: int) -> dict[str, list[float]]:
    """``answer_sync`` without profiles and with a profile named, interleaved (which goes
    first alternates), each call's milliseconds; CPU time in ``CPU_MS``."""
    from nautilus_ranking.profiles.build import build_profiles
    from nautilus_ranking.profiles.read import Entry
    from nautilus_ranking.request.answer import answer_sync
    from nautilus_ranking.request.engine import Engine
    from nautilus_ranking.request.model import QueryRequest

    today = Engine.of(broker)
    profiled = Engine.of(broker)
    entries = [Entry("ops", "ranking_top_k", 8, "-"), Entry("ops", "ranking_idf", True, "-")]
    entries += [Entry("audit", "ranking_top_k", 50, "-"), Entry("support", "ranking_cut", "", "-")]
    profiled.profiles = build_profiles(entries)
    profiled.build_profiles(profiled.settings)
    requests = {q: QueryRequest(query=q) for q in QUERIES}
    runs = {
        "today": lambda q: answer_sync(today, requests[q]),
        "profile": lambda q: answer_sync(profiled, requests[q], profile="ops"),
    }
    first = answer_sync(today, requests[QUERIES[0]]).response.data
    if answer_sync(profiled, requests[QUERIES[0]], profile="ops").response.data != first:
        raise SystemExit("the profile's answer differs from today's: not the same work")
    for q in QUERIES:  # warm
        for run in runs.values():
            run(q)
    CPU_MS.clear()
    out: dict[str, list[float]] = {"today": [], "profile": []}
    for i in range(calls):
        q = QUERIES[i % len(QUERIES)]
        order = ("today", "profile") if i % 2 == 0 else ("profile", "today")
        for kind in order:
            out[kind].append(timed(partial(runs[kind], q), kind))
    return out


def profiles_report(out: dict[str, list[float]]) -> str:
    calls = len(out["today"])
    ratio = p(out["profile"], 50) / p(out["today"], 50)
    cpu = CPU_MS["profile"] / CPU_MS["today"]
    return "\n".join(
        [
            "| request through the core | p50 ms | p99 ms |",
            "|---|---|---|",
            f"| today (no profile configured) | {p(out['today'], 50):.3f} | "
            f"{p(out['today'], 99):.3f} |",
            f"| a named profile, the same knobs | {p(out['profile'], 50):.3f} | "
            f"{p(out['profile'], 99):.3f} |",
            "",
            f"Resolving a profile: p50 ratio **{ratio:.3f}×**, CPU time ratio **{cpu:.3f}×** "
            f"({calls} calls each, interleaved; target ≤ 1.02×).",
        ]
    )


def overhead(out: dict[str, list[float]], request: str, rank: str, search: str) -> float:
    """What the broker adds: the request's p50 less the ranking's and the searches'."""
    return p(out[request], 50) - p(out[rank], 50) - p(out[search], 50)


def report(label: str, out: dict[str, list[float]], threads: tuple[int, int]) -> str:
    calls = len(out["request"])
    rank_s, rank_a = p(out["rank_sync"], 50), p(out["rank_async"], 50)
    lines = [
        f"### {label}",
        "",
        "| call | p50 ms | p99 ms | p50 ÷ rank() p50 |",
        "|---|---|---|---|",
        f"| `broker.request(q)` | {p(out['request'], 50):.2f} | {p(out['request'], 99):.2f} "
        f"| **{p(out['request'], 50) / rank_s:.2f}** |",
        f"| `broker.fetch_sync(q)` (the fan-out alone) | {p(out['fetch_sync'], 50):.2f} | "
        f"{p(out['fetch_sync'], 99):.2f} | {p(out['fetch_sync'], 50) / rank_s:.2f} |",
        f"| `rank(results, ctx)`, same batches | {rank_s:.2f} | {p(out['rank_sync'], 99):.2f} "
        "| 1.00 |",
        f"| `await broker.arequest(q)` in a running loop | {p(out['arequest'], 50):.2f} | "
        f"{p(out['arequest'], 99):.2f} | **{p(out['arequest'], 50) / rank_a:.2f}** |",
        f"| `rank(results, ctx)`, timed in that loop | {rank_a:.2f} | "
        f"{p(out['rank_async'], 99):.2f} | 1.00 |",
        f"| the sources' own searches, called directly | {p(out['search_sync'], 50):.2f} | "
        f"{p(out['search_sync'], 99):.2f} | {p(out['search_sync'], 50) / rank_s:.2f} |",
        "",
        f"**Broker overhead** (request p50 − rank p50 − searches p50): sync "
        f"**{overhead(out, 'request', 'rank_sync', 'search_sync'):.2f} ms**, in a running "
        f"loop **{overhead(out, 'arequest', 'rank_async', 'search_async'):.2f} ms** "
        "(target ≤ 0.6 ms).",
        "",
        f"CPU time per call (all threads; robust to a busy machine, unlike the latencies): "
        f"`request` {CPU_MS['request'] / calls:.2f} ms, `fetch_sync` "
        f"{CPU_MS['fetch_sync'] / calls:.2f} ms, `rank` {CPU_MS['rank'] / calls:.2f} ms, "
        f"the searches {CPU_MS['searches'] / calls:.2f} ms: request ÷ rank "
        f"**{CPU_MS['request'] / CPU_MS['rank']:.2f}**; the broker's own CPU (request − rank "
        f"− searches) **{(CPU_MS['request'] - CPU_MS['rank'] - CPU_MS['searches']) / calls:.2f}"
        " ms**.",
        "",
        f"Threads alive before / after: {threads[0]} / {threads[1]}.",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="timed calls of each kind")
    parser.add_argument(
        "--busy", action="store_true", help="also run with one busy-looping process taking a core"
    )
    parser.add_argument("--out", type=Path, help="write the section into this markdown file")
    parser.add_argument(
        "--profiles", action="store_true", help="the cost of resolving a ranking profile"
    )
    parser.add_argument(
        "--tracing",
        action="store_true",
        help="also what tracing costs: off against --baseline's package, on against off "
        "through serve (benchmarks/speed/trace_overhead.py)",
    )
    parser.add_argument("--baseline", default="main", help="the revision --tracing compares with")
    args = parser.parse_args()
    configure_logging("warning", "console")
    import nautilus_ranking

    if args.profiles:
        with (
            tempfile.TemporaryDirectory(prefix="nautilus-overhead-") as tmp,
            demo_broker(Path(tmp) / "data") as broker,
        ):
            print(profiles_report(measure_profiles(broker, args.calls)))
        return 0

    head = (
        f"`python -m benchmarks.speed.request_overhead --calls {args.calls}"
        f"{' --busy' if args.busy else ''}` on {time.strftime('%Y-%m-%d')}: "
        f"{platform.machine()}, {os.cpu_count()} cores shared with other work, Python "
        f"{platform.python_version()}, load average {os.getloadavg()[0]:.1f} at the "
        f"start; {args.calls} calls of each kind, the bundled demo (four SQLite "
        "sources), `top_k=8`, IDF on."
    )
    print(f"nautilus from {Path(nautilus_ranking.__file__).parent}\n\n{head}\n")
    sections = [BEGIN, "## Request overhead (`benchmarks/speed/request_overhead.py`)", "", head, ""]
    with tempfile.TemporaryDirectory(prefix="nautilus-overhead-") as tmp:
        broker = demo_broker(Path(tmp) / "data")
        with broker:
            for label, on in (("machine as it is", False), ("one extra busy process", True)):
                if on and not args.busy:
                    continue
                with busy(on):
                    before = threading.active_count()
                    out = measure(broker, args.calls)
                    text = report(label, out, (before, threading.active_count()))
                    print(text + "\n", flush=True)
                    sections += [text, ""]
    if args.tracing:
        text = tracing_report(args.baseline, 7, args.calls)
        print(text + "\n", flush=True)
        sections += [text, ""]
    if args.out:
        write_section(args.out, "\n".join([*sections[:-1], END]) + "\n", "overhead", before="load")
        print(f"wrote the overhead section of {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
