"""Peak memory of ``nautilus-ranking config --strict`` reading a YAML alias bomb whose
strings each hold a ``${VAR:-default}``.

YAML aliases share one string, but expanding ``${VAR:-default}`` makes a fresh copy per
alias: 3^8 = 6,561 aliased copies of one default, within the values' bound, once took
368 MB (a 12 KB file) and 2.1 GB (a 100 KB file). The reader's bound
(:data:`nautilus_ranking.sources.yaml_file.MAX_EXPANDED_CHARS`) counts the characters
expansion produces, so the run is refused at the bound, its peak memory near a plain
run's (64 MB against 61 MB, at 12 and 90 KB defaults alike). The chain is tried as the
profiles file (a profile's ``agents``) and as the sources file (a source's
``columns``), beside a plain run (the demo's sources, no profiles).

    python -m benchmarks.service.alias_bomb [--default-kb 12] [--levels 8]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

NAUTILUS = str(Path(sys.executable).with_name("nautilus-ranking"))


def chain(default_kb: int, levels: int) -> str:
    """A flow list whose last anchor expands to 3**levels copies of one ``${VAR:-…}``."""
    items = [f'&a0 "${{NAUTILUS_BOMB_UNSET:-{"x" * (default_kb * 1024)}}}"']
    items += [f"&a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}]" for i in range(1, levels + 1)]
    return "[" + ", ".join(items) + "]"


def bombs(default_kb: int, levels: int) -> dict[str, str]:
    """The chain where each file's reader expands it: a profile's ``agents``, a source's
    ``columns``."""
    values = chain(default_kb, levels)
    return {
        "profiles": f"support:\n  agents: {values}\n",
        "sources": f"sources:\n  - {{id: s, type: sqlite_fts, path: s.db, columns: {values}}}\n",
    }


#: Runs the command and prints its peak RSS (KB) last: a fresh parent per measurement,
#: since RUSAGE_CHILDREN keeps the largest child of all so far.
_MEASURE = (
    "import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]); "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, r.returncode, "
    "file=sys.stderr)"
)


def peak_mb(env: dict[str, str], cwd: Path) -> tuple[float, int, str]:
    """The run's peak resident memory (MB), its exit code and its first problem line."""
    run = subprocess.run(
        [sys.executable, "-c", _MEASURE, NAUTILUS, "config", "--strict"],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = run.stderr.strip().splitlines()
    kb, code = (int(x) for x in lines[-1].split())
    said = next((line for line in lines[:-1] if "bomb" in line), "")
    return kb / 1024, code, said[:160]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--default-kb", type=int, default=12)
    parser.add_argument("--levels", type=int, default=8)
    args = parser.parse_args()
    base = {k: v for k, v in os.environ.items() if not k.startswith("NAUTILUS_")}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        files = {}
        for kind, text in bombs(args.default_kb, args.levels).items():
            files[kind] = root / "bomb.yaml" if kind == "profiles" else root / "bomb-s.yaml"
            files[kind].write_text(text)
        size = files["profiles"].stat().st_size / 1024
        print(f"attack file: {size:.0f} KB, {3**args.levels} copies of the default")
        for name, extra in (
            ("plain", {}),
            ("profiles file", {"NAUTILUS_PROFILES_FILE": str(files["profiles"])}),
            ("sources file", {"NAUTILUS_CONFIG": str(files["sources"])}),
        ):
            mb, code, last = peak_mb(
                {**base, "NAUTILUS_DATA_DIR": str(root / "data"), **extra}, root
            )
            print(f"{name:14} peak {mb:8.0f} MB  exit {code}  {last}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
