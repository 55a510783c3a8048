"""Does the synchronous path return at a source's deadline?

A 300,000-row ``sqlite_table`` whose keyword filter scans the whole table (the query
matches nothing), with ``timeout_s: 0.2``. Measured: the time the SQLite scan alone
takes, ``Broker.request()`` wall time, ``arequest()`` wall time, and a whole
``nautilus-ranking query`` process (start-up included, so compare it with the same command on
a small table). Before the fix ``request()`` and the CLI waited for the scan.

    python -m benchmarks.speed.sync_timeout [--rows 300000] [--timeout 0.2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from nautilus_ranking import Broker, NautilusSettings
from nautilus_ranking.log import configure_logging

QUERY = "zzzunmatched qqqnothing"


def write_config(root: Path, rows: int, timeout: float, name: str) -> Path:
    seed = root / f"{name}.jsonl"
    with seed.open("w") as handle:
        for i in range(rows):
            handle.write(
                json.dumps(
                    {
                        "id": i,
                        "title": f"ticket {i} about disk and cpu load",
                        "description": "the service was slow " * 30,
                    }
                )
                + "\n"
            )
    config = root / f"{name}.yaml"
    config.write_text(
        f"sources:\n  - id: big\n    type: sqlite_table\n    path: {name}.db\n"
        f"    seed: {seed.name}\n    table: t\n"
        f"    search_columns: [title, description]\n    timeout_s: {timeout}\n"
    )
    return config


def best(runs: int, call: object) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        call()  # type: ignore[operator]
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--timeout", type=float, default=0.2)
    args = parser.parse_args()
    configure_logging("error", "console")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ["NAUTILUS_DATA_DIR"] = str(root / "data")
        settings = NautilusSettings()
        big = write_config(root, args.rows, args.timeout, "big")
        small = write_config(root, 100, args.timeout, "small")
        slow = Broker.from_config(big, settings.model_copy(update={"config": None}))
        slow.sources[0].timeout_s = 600  # type: ignore[misc]  # build, and time the scan alone
        scan = best(3, lambda: slow.request(QUERY))
        broker = Broker.from_config(big, settings.model_copy(update={"config": None}))
        sync = best(5, lambda: broker.request(QUERY))
        errors = broker.request(QUERY).sources_errored

        async def timed_arequest() -> tuple[float, str]:
            started = time.perf_counter()
            response = await broker.arequest(QUERY)
            return time.perf_counter() - started, response.sources_errored[0].error_type

        time.sleep(1)  # the abandoned scans finish: a source with 4 still stuck is refused
        asynchronous, async_error = min(asyncio.run(timed_arequest()) for _ in range(5))
        env = {**os.environ, "NAUTILUS_LOG_LEVEL": "ERROR"}

        def cli(config: Path) -> None:  # exits 1 when every source failed: not checked
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "nautilus_ranking.cli",
                    "query",
                    QUERY,
                    "--config",
                    str(config),
                    "--json",
                ],
                env=env,
                check=False,
                capture_output=True,
            )

        Broker.from_config(small, settings).request(QUERY)  # build the small table
        cli_big, cli_small = best(3, lambda: cli(big)), best(3, lambda: cli(small))
        print(f"{args.rows:,} rows, timeout_s {args.timeout}: SQLite scan alone {scan:.3f} s")
        print(f"  Broker.request()   {sync:.3f} s  ({[e.error_type for e in errors]})")
        print(f"  Broker.arequest()  {asynchronous:.3f} s  (timed inside the loop; {async_error})")
        print(
            f"  nautilus-ranking query     {cli_big:.3f} s"
            f"  (same command on 100 rows: {cli_small:.3f} s)"
        )


if __name__ == "__main__":
    main()
