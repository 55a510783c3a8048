"""How reading ranking profiles grows with their number: ``nautilus-ranking config`` with
N and 8N profiles, written in ``NAUTILUS_PROFILES_FILE`` and as environment variables.

Each profile's knobs were parsed by building a settings object, which read the whole
environment and ``.env`` again: a constant 1.4 ms a profile from a file, and, with the
profiles in the environment, work growing as the square of their number (4,000 took
77 s). They now go through the settings' parsers alone. Near-linear reading shows as a
ratio near 8 between the two sizes; the runs alternate sizes, best of ``--repeats``.

    python -m benchmarks.service.profiles_scaling [--profiles 2125] [--repeats 3]
                                                   [--command .venv/bin/nautilus-ranking]

``--command`` runs another checkout's command (an older commit's, to compare).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NAUTILUS = str(Path(sys.executable).with_name("nautilus-ranking"))


def profiles_file(path: Path, count: int) -> int:
    """``count`` profiles, each a top K and an agent (about 60 bytes a profile)."""
    text = "".join(
        f"p{i:05d}:\n  ranking_top_k: {1 + i % 20}\n  agents: [a{i}]\n" for i in range(count)
    )
    path.write_text(text, encoding="utf-8")
    return len(text.encode())


def seconds(command: str, env: dict[str, str], cwd: Path) -> float:
    started = time.perf_counter()
    run = subprocess.run(
        [command, "config"], env=env, cwd=cwd, capture_output=True, text=True, timeout=3600
    )
    took = time.perf_counter() - started
    if run.returncode != 0:
        raise SystemExit(f"nautilus-ranking config exited {run.returncode}: {run.stderr[-400:]}")
    return took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", type=int, default=2125, help="N (8N is the other size)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", choices=("file", "environment"), default=None)
    parser.add_argument("--command", default=NAUTILUS)
    args = parser.parse_args()
    base = {k: v for k, v in os.environ.items() if not k.startswith("NAUTILUS_")}
    sizes = (args.profiles, 8 * args.profiles)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        base |= {"NAUTILUS_DATA_DIR": str(root / "data"), "NAUTILUS_EMBEDDER": "hashing"}
        envs: dict[tuple[str, int], dict[str, str]] = {}
        for count in sizes:
            path = root / f"profiles-{count}.yaml"
            size = profiles_file(path, count)
            print(f"{count:,} profiles: a {size / 1024:,.0f} KiB file")
            envs[("file", count)] = {**base, "NAUTILUS_PROFILES_FILE": str(path)}
            envs[("environment", count)] = base | {
                f"NAUTILUS_PROFILES__P{i:05d}__RANKING_TOP_K": str(1 + i % 20) for i in range(count)
            }
        seconds(args.command, base, root)  # warm the demo's databases and the imports
        best: dict[tuple[str, int], float] = {}
        for _ in range(args.repeats):
            for key, env in envs.items():
                if args.only in (None, key[0]):
                    took = seconds(args.command, env, root)
                    best[key] = min(best.get(key, took), took)
        print(
            f"\n{'written in':<12} {'N':>7} {'8N':>7} {'8N / N':>7}   (seconds, best of "
            f"{args.repeats}; nothing-but-start: {seconds(args.command, base, root):.2f} s)"
        )
        for where in ("file", "environment"):
            if (where, sizes[0]) in best:
                small, large = best[(where, sizes[0])], best[(where, sizes[1])]
                print(f"{where:<12} {small:>7.2f} {large:>7.2f} {large / small:>7.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
