"""Peak memory of ``nautilus-ranking eval`` reading a large judgments file.

A 50 MB TREC qrels file (2.4 million short lines) once peaked at 941 MB: the reader held
the whole text, a list of its lines and a tuple per line before parsing one. It now
reads a line at a time and keeps only the relevant judgments (grade >= 1) of the
queries asked about, so the peak is the process's own plus about 100 bytes a kept
judgment. Three runs on adi served by the SQLite sources, each in a fresh parent so
``RUSAGE_CHILDREN`` is its own: the collection's own qrels (the baseline), the large
file judging adi's queries (its grades 1 and 2 kept: the worst case), and the large
file judging other queries (none kept).

    python -m benchmarks.speed.judgments_memory [--mb 50]
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.quality.ir_collections import DATASETS

NAUTILUS = str(Path(sys.executable).with_name("nautilus-ranking"))
ADI = DATASETS / "adi"

_MEASURE = (
    "import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], "
    "stdout=subprocess.DEVNULL); print(resource.getrusage(resource.RUSAGE_CHILDREN)"
    ".ru_maxrss, r.returncode, file=sys.stderr)"
)


def large_qrels(path: Path, megabytes: int, query: str) -> int:
    """adi's judgments, then short lines naming ``query`` ids until ``megabytes``."""
    rng = random.Random(0)
    size = lines = 0
    with path.open("w", encoding="utf-8") as out:
        for line in (ADI / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()[1:]:
            q, d, g = line.split("\t")
            out.write(f"{q} 0 {d} {g}\n")
        while size < megabytes << 20:
            line = f"{query.format(1 + lines % 35)} 0 doc-{rng.randrange(10**7):07d} {lines % 3}\n"
            out.write(line)
            size += len(line)
            lines += 1
    return lines


def peak_mb(env: dict[str, str], config: Path, judgments: Path) -> tuple[float, int]:
    args = [NAUTILUS, "eval", "--config", str(config), "--queries", str(ADI / "queries.jsonl")]
    run = subprocess.run(
        [sys.executable, "-c", _MEASURE, *args, "--judgments", str(judgments)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    kb, code = (int(x) for x in run.stderr.strip().splitlines()[-1].split())
    return kb / 1024, code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        env = {k: v for k, v in os.environ.items() if not k.startswith("NAUTILUS_")}
        env |= {"NAUTILUS_DATA_DIR": str(root / "data"), "NAUTILUS_EMBEDDER": "hashing"}
        made = subprocess.run(
            [sys.executable, "-m", "nautilus_ranking.evaluation.collection", str(ADI), tmp],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        config = Path(made.stdout.strip())
        files = {"adi's own qrels": ADI / "qrels" / "test.tsv"}
        for name, query in (("adi's queries", "{}"), ("other queries", "other-{}")):
            path = root / f"{name.split()[0]}.qrels"
            lines = large_qrels(path, args.mb, query)
            files[f"{args.mb} MB, {lines:,} lines, {name}"] = path
        print(f"{'judgments':<48} {'peak RSS':>10}  exit")
        for name, path in files.items():
            mb, code = peak_mb(env, config, path)
            print(f"{name:<48} {mb:>7.0f} MB  {code}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
