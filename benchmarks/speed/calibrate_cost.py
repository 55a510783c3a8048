"""What ``nautilus-ranking calibrate`` costs on a 10,000-row corpus, run as an operator runs it.

The corpus: every document of the four shared collections (6,146), then copies of them
under new ids up to ``--rows``, spread over three sources as the quality benchmark's
partitioned layout (SQLite FTS5, a table, stored vectors; a third each). The command
runs as a real process (``--config`` the sources file, the 510 shipped off-topic
queries; with ``--judged``, Cranfield's 225 judged queries too), twice: the first run
builds the databases, the second finds them built. Reported: the wall time, the time
the fit file says it spent fetching and ranking, and the peak memory of the process.

    python -m benchmarks.speed.calibrate_cost [--rows N] [--embedder hashing|onnx]
        [--judged] [--datasets DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.quality.ir_collections import DATASETS, each_collection

SOURCES = """limit: 30
sources:
  - id: fts
    type: sqlite_fts
    path: cost/fts.db
    seed: fts.jsonl
    columns: [title, text]
    timeout_s: 60
  - id: sql
    type: sqlite_table
    path: cost/sql.db
    seed: sql.jsonl
    table: docs
    search_columns: [title, text]
    timeout_s: 60
  - id: vector
    type: sqlite_vector
    path: cost/vector.db
    seed: vector.jsonl
    text_fields: [title, text]
    dim: 1024
    timeout_s: 600
"""


def write_corpus(folder: Path, datasets: Path, rows: int) -> Path:
    """The sources file over ``rows`` documents (copies past the collections' own)."""
    docs = [d for c in each_collection(datasets) for d in c.docs]
    corpus = [
        {**docs[i % len(docs)], "id": f"{i // len(docs)}-{docs[i % len(docs)]['id']}"}
        for i in range(rows)
    ]
    for at, name in enumerate(("fts", "sql", "vector")):
        part = corpus[at::3]
        text = "".join(json.dumps(d) + "\n" for d in part)
        (folder / f"{name}.jsonl").write_text(text, encoding="utf-8")
    (folder / "sources.yaml").write_text(SOURCES, encoding="utf-8")
    return folder / "sources.yaml"


def run_once(config: Path, folder: Path, embedder: str, judged: Path | None) -> dict[str, float]:
    """One ``calibrate`` process: its wall time and what the fit file says it spent."""
    out = folder / "fit.json"
    args = [sys.executable, "-m", "nautilus_ranking.cli", "calibrate", "--out", str(out)]
    args += ["--config", str(config)]
    if judged is not None:
        args += ["--queries", str(judged / "queries.jsonl"), "--judgments", str(judged)]
    env = {
        **os.environ,
        "NAUTILUS_EMBEDDER": embedder,
        "NAUTILUS_RANKING_TOP_K": "10",
        "NAUTILUS_DATA_DIR": str(folder / "data"),
    }
    started = time.perf_counter()
    subprocess.run(args, env=env, check=True, capture_output=True, text=True)
    wall = time.perf_counter() - started
    prov = json.loads(out.read_text(encoding="utf-8"))["provenance"]
    return {
        "wall_s": wall,
        "fetch_s": prov["fetch_seconds"],
        "rank_s": prov["rank_seconds"],
        "queries": prov["null_queries"] + prov["judged_queries"] + prov["queries_skipped"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--embedder", default="hashing", choices=("hashing", "onnx"))
    parser.add_argument("--judged", action="store_true", help="with Cranfield's judged queries")
    parser.add_argument("--datasets", type=Path, default=DATASETS)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        config = write_corpus(folder, args.datasets, args.rows)
        judged = args.datasets / "cranfield" if args.judged else None
        cold = run_once(config, folder, args.embedder, judged)
        warm = run_once(config, folder, args.embedder, judged)
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"calibrate, {args.rows:,} rows over 3 sources, {args.embedder}:")
    print("| run | queries | wall (s) | fetching (s) | ranking (s) |")
    print("|---|---|---|---|---|")
    for name, run in (("first (builds the databases)", cold), ("second", warm)):
        print(
            f"| {name} | {run['queries']:.0f} | {run['wall_s']:.1f} | {run['fetch_s']:.1f} | "
            f"{run['rank_s']:.1f} |"
        )
    print(f"peak memory of a calibrate process: {peak_mb:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
