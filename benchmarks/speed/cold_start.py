"""How long a user waits before nautilus does anything: whole processes, started cold.

- ``nautilus-ranking --version`` and a demo ``nautilus-ranking query "orders-db disk full"``, each
  against ``python -c "import numpy"`` (the floor of any command that ranks), run in
  turn (A B A B …) so the machine's load hits both alike: the best wall time of each
  and the ratio of the bests (targets: ``--version`` ≤ 1.5×, ``query`` ≤ 3×), with each
  one's CPU time (user + system, robust to a busy machine);
- ``nautilus-ranking mcp`` over stdio driven by the real MCP SDK client, as an agent starts it:
  the time from spawning the process to the handshake's answer (``initialize`` /
  ``server/discover``; target ≤ 0.5 s), to the tools' listing and to a first search.

    python -m benchmarks.speed.cold_start [--runs 5] [--work-dir DIR] [--out docs/benchmarks.md]

The demo's databases are built once before timing (a first query builds them; that is
not a start-up cost). Not a test: compare within a run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.sections import markers, write_section

BEGIN, END = markers("cold-start")
QUERY = "orders-db disk full"
BIN = Path(sys.executable).parent


@dataclass
class Timings:
    label: str
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)

    def best(self) -> float:
        return min(self.wall)

    def best_cpu(self) -> float:
        return min(self.cpu)


def run_once(argv: Sequence[str], env: dict[str, str], into: Timings) -> None:
    """One cold process: its wall time and its CPU time (user + system)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        argv,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        timeout=120,
        check=False,
    )
    into.wall.append(time.perf_counter() - started)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    into.cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    if done.returncode != 0:
        raise RuntimeError(f"{argv} failed: {done.stderr.decode()[-500:]}")


def paired(
    command: Sequence[str], label: str, env: dict[str, str], runs: int
) -> tuple[Timings, Timings]:
    """``command`` and the numpy import in turn, after one warm-up of each."""
    numpy = [str(BIN / "python"), "-c", "import numpy"]
    ours, floor = Timings(label), Timings("python -c 'import numpy'")
    run_once(command, env, Timings("warm-up"))
    run_once(numpy, env, Timings("warm-up"))
    for _ in range(runs):
        run_once(command, env, ours)
        run_once(numpy, env, floor)
    return ours, floor


async def mcp_session(env: dict[str, str], cwd: Path) -> tuple[float, float, float]:
    """Seconds from spawn to the handshake's answer, the tools' listing, a first search."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=str(BIN / "nautilus-ranking"), args=["mcp"], env=env, cwd=cwd
    )
    with (cwd / "mcp-stderr.log").open("a") as errlog:
        started = time.perf_counter()
        async with Client(stdio_client(params, errlog=errlog)) as client:
            handshake = time.perf_counter() - started
            await client.list_tools()
            listed = time.perf_counter() - started
            await client.call_tool("search", {"query": QUERY, "top_k": 3})
            searched = time.perf_counter() - started
    return handshake, listed, searched


def measure_mcp(env: dict[str, str], cwd: Path, runs: int) -> list[tuple[float, float, float]]:
    asyncio.run(mcp_session(env, cwd))  # warm-up
    return [asyncio.run(mcp_session(env, cwd)) for _ in range(runs)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="timed runs of each command")
    parser.add_argument(
        "--work-dir",
        type=Path,
        help="NAUTILUS_DATA_DIR for the demo's databases (default: a temporary folder)",
    )
    parser.add_argument("--out", type=Path, help="write the section into this markdown file")
    parser.add_argument("--no-mcp", action="store_true", help="skip the MCP measurement")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="nautilus-cold-") as tmp_name:
        tmp = Path(tmp_name)
        data = args.work_dir or tmp / "data"
        env = {k: v for k, v in os.environ.items() if not k.startswith("NAUTILUS_")}
        env["NAUTILUS_DATA_DIR"] = str(data)
        load = os.getloadavg()[0]
        nautilus = str(BIN / "nautilus-ranking")
        subprocess.run(
            [nautilus, "query", QUERY], env=env, check=True, timeout=300, stdout=subprocess.DEVNULL
        )  # the demo's databases, built once
        rows = [
            paired([nautilus, "--version"], "`nautilus-ranking --version`", env, args.runs),
            paired(
                [nautilus, "query", QUERY], f"`nautilus-ranking query {QUERY!r}`", env, args.runs
            ),
        ]
        sessions = [] if args.no_mcp else measure_mcp(env, tmp, args.runs)
    section = report(rows, sessions, args.runs, load)
    print(section)
    if args.out:
        write_section(args.out, section, "cold-start")
        print(f"wrote the cold-start section of {args.out}", file=sys.stderr)
    return 0


def report(
    rows: list[tuple[Timings, Timings]],
    sessions: list[tuple[float, float, float]],
    runs: int,
    load: float,
) -> str:
    targets = {"`nautilus-ranking --version`": 1.5}
    lines = [
        BEGIN,
        "## Cold start (`benchmarks/speed/cold_start.py`)",
        "",
        f"`python -m benchmarks.speed.cold_start --runs {runs}` on {time.strftime('%Y-%m-%d')}: "
        f"{platform.machine()}, {os.cpu_count()} cores shared with other work, Python "
        f"{platform.python_version()}, load average {load:.1f} at the start. Whole "
        "processes, each command in turn with `python -c 'import numpy'`; best of "
        f"{runs} (the demo's databases built before timing).",
        "",
        "| command | best wall s | best CPU s | `import numpy` best wall s | ratio of the "
        "bests | target |",
        "|---|---|---|---|---|---|",
    ]
    for ours, floor in rows:
        target = targets.get(ours.label, 3.0)
        lines.append(
            f"| {ours.label} | {ours.best():.3f} | {ours.best_cpu():.3f} | "
            f"{floor.best():.3f} | **{ours.best() / floor.best():.2f}×** | "
            f"≤ {target:g}× |"
        )
    if sessions:
        best = [min(s[i] for s in sessions) for i in range(3)]
        lines += [
            "",
            f"`nautilus-ranking mcp` over stdio, spawned by the MCP SDK client (best of {runs}): "
            f"handshake answered **{best[0]:.3f} s** after spawn (target ≤ 0.5 s); the "
            f"tools listed at {best[1]:.3f} s and a first search answered at "
            f"{best[2]:.3f} s (the SDK imported and the broker built meanwhile).",
        ]
    lines.append(END)
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
