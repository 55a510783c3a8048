"""The attachment's memory inside the Nautilus broker: RSS over 10,000 requests whose
rows are fresh objects each time (as a database adapter's are).

The accessor (``AttachedRanking.ranking(request_id)``) keeps recent rankings, each
holding every row its sources returned. It is bounded in requests (the last 1,024)
and in bytes of compact JSON (``NAUTILUS_UPSTREAM_RANKINGS_MAX_BYTES``); this checks
that the process's resident memory then stays within the start plus the bound plus
50 MB, and what it adds to the stock broker's stays flat over the last 5,000 requests
(the stock broker's own memory grows by about 2 MB a thousand requests, attached or
not: it is run beside, the same requests, for reference). One broker (nautilus-rkm
0.3.0, audit and attestation on, one session) over one ``static`` source of 20 rows of
about 0.6 kB whose adapter hands back a deep copy each request
(``json.loads(json.dumps(rows))``), ranked with ``NAUTILUS_RANKING_TOP_K=10``,
requests awaited one after another.

    python -m benchmarks.broker.nautilus_broker_memory [--requests 10000] [--max-mb 4]

It builds (or reuses) the Python 3.13 venv of tools/broker_venv.py and runs there.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.broker.inside import inside_command, last_json, static_source, write_config

ROWS = 20


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _inside(requests: int, max_mb: int, folder: Path, stock: bool = False) -> dict[str, Any]:
    import asyncio
    import gc

    from nautilus import Broker
    from nautilus.adapters.static import StaticAdapter

    from nautilus_ranking import NautilusSettings
    from nautilus_ranking.upstream import attach_ranking

    words = "disk full replica lag kafka consumer checkout latency certificate expiry".split()
    rows = [
        {
            "id": f"R-{i:03d}",
            "title": f"{words[i % len(words)]} incident {i}",
            "body": " ".join(words[(i + j) % len(words)] + str(j) for j in range(60)),
        }
        for i in range(ROWS)
    ]
    config = write_config(folder, [static_source("incidents", rows)])
    execute = StaticAdapter.execute

    async def fresh(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = await execute(self, *args, **kwargs)
        return result.model_copy(update={"rows": json.loads(json.dumps(result.rows))})

    StaticAdapter.execute = fresh  # type: ignore[method-assign]
    broker = Broker.from_config(config)
    settings = NautilusSettings(ranking_top_k=10, upstream_rankings_max_bytes=max_mb * 1024 * 1024)
    attached = None if stock else attach_ranking(broker, settings)
    samples: list[tuple[int, float]] = []

    async def run() -> None:
        for i in range(requests + 1):
            await broker.arequest(
                "agent-alpha",
                "ops disk full on the replica",
                {"purpose": "support", "session_id": "memory"},
                caller={"peer": "10.0.0.1"},
            )
            if i % 500 == 0:
                gc.collect()
                samples.append((i, rss_mb()))

    started = time.perf_counter()
    asyncio.run(run())
    seconds = time.perf_counter() - started
    kept = (len(attached.store), attached.store.bytes) if attached is not None else (0, 0)
    broker.close()
    return {"samples": samples, "seconds": seconds, "kept": kept, "max_mb": max_mb}


def report(result: dict[str, Any], command: str) -> str:
    ranked, stock = result["ranked"], result["stock"]
    by_i = dict(stock["samples"])
    rows = [(i, mb, by_i[i]) for i, mb in ranked["samples"] if i in by_i]
    start = rows[1]  # after the first 500: imports, caches, the store filling
    last = rows[-1]
    half = next(r for r in rows if r[0] >= last[0] // 2)
    peak = max(mb - start[1] for _, mb, _ in rows)
    count, size = ranked["kept"]
    lines = [
        "<!-- nautilus-broker-memory:begin -->",
        "| after request | ranked RSS MB | stock RSS MB | ranked − stock MB |",
        "|---|---|---|---|",
        *(
            f"| {i:,} | {mb:.1f} | {base:.1f} | {mb - base:.1f} |"
            for i, mb, base in rows
            if i and i % 1000 == 0
        ),
        "",
        f"Ranked: start (after 500 requests) {start[1]:.1f} MB, at most start + {peak:.1f} MB "
        f"(allowed: the bound, {ranked['max_mb']} MB, + 50 MB). Over the last half, ranked "
        f"{half[1]:.1f} → {last[1]:.1f} MB and the stock broker alike "
        f"{half[2]:.1f} → {last[2]:.1f} MB: ranked − stock {half[1] - half[2]:.1f} → "
        f"{last[1] - last[2]:.1f} MB. Kept at the end: {count} rankings, "
        f"{size / 1048576:.1f} MB of compact JSON. {last[0]:,} requests, "
        f"{ranked['seconds']:.0f} s ranked and {stock['seconds']:.0f} s stock, run side by "
        f"side. `{command}`",
        "<!-- nautilus-broker-memory:end -->",
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--max-mb", type=int, default=4, help="the accessor's bound, MiB")
    parser.add_argument("--out", type=Path, help="write the table into this markdown page")
    parser.add_argument("--inside", type=Path, help=argparse.SUPPRESS)  # in the broker's venv
    args = parser.parse_args()
    if args.inside is not None:
        stock = bool(os.environ.get("MEMORY_STOCK"))
        print(json.dumps(_inside(args.requests, args.max_mb, args.inside, stock)))
        return 0
    import tempfile

    from benchmarks.sections import write_section
    from tools.broker_venv import broker_venv

    venv = broker_venv()
    # the audit log and the attestation sink fsync each entry: on tmpfs where there is one
    shm = Path("/dev/shm")
    result: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(dir=shm if shm.is_dir() else None) as folder:
        running = {}
        for name in ("ranked", "stock"):
            where = Path(folder) / name
            where.mkdir()
            env = {k: v for k, v in os.environ.items() if not k.startswith("NAUTILUS_")}
            env["NAUTILUS_LOG_LEVEL"] = "warning"
            if name == "stock":
                env["MEMORY_STOCK"] = "1"
            running[name] = subprocess.Popen(
                inside_command(
                    venv.python,
                    "benchmarks.broker.nautilus_broker_memory",
                    *("--inside", where, "--requests", str(args.requests)),
                    *("--max-mb", str(args.max_mb)),
                ),
                cwd=where,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        for name, process in running.items():
            out, err = process.communicate()
            if process.returncode != 0:
                print(err[-4000:], file=sys.stderr)
                return 1
            result[name] = last_json(out)
    command = (
        f"python -m benchmarks.broker.nautilus_broker_memory --requests {args.requests} "
        f"--max-mb {args.max_mb}"
    )
    section = report(result, command)
    print(section)
    if args.out is not None:
        write_section(args.out, section, "nautilus-broker-memory")
    return 0


if __name__ == "__main__":
    sys.exit(main())
