"""Another revision's ``nautilus`` beside the working tree's: extract it, run a module on it.

The before/after tools (``tools.same_output``, ``tools.rank_ab``, ``benchmarks.speed
--compare``) run the same module twice in child processes, once with REV's package.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def checkout(rev: str, into: Path) -> Path:
    """REV's ``nautilus`` package, extracted with ``git archive`` (no worktree, no checkout)."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", rev, "nautilus"],
        capture_output=True,
        check=True,
    ).stdout
    tar_path = into / "src.tar"
    tar_path.write_bytes(archive)
    with tarfile.open(tar_path) as tar:
        tar.extractall(into, filter="data")
    return into


def run_module(
    module: str,
    args: Sequence[str],
    nautilus_from: Path | None = None,
    env: Mapping[str, str] | None = None,
    **kwargs: Any,
) -> subprocess.CompletedProcess[Any]:
    """``python -m module args`` in a child whose ``nautilus`` is the one extracted at
    ``nautilus_from`` (the working tree's when None); the repository's ``benchmarks`` and
    ``tools`` import as usual. ``kwargs`` go to :func:`subprocess.run`."""
    child_env = dict(os.environ if env is None else env)
    first = [str(nautilus_from)] if nautilus_from is not None else []
    child_env["PYTHONPATH"] = os.pathsep.join([*first, str(ROOT)])
    # The child's first path entry is its working directory: the extracted package's.
    return subprocess.run(
        [sys.executable, "-m", module, *args], env=child_env, cwd=nautilus_from or ROOT, **kwargs
    )
