"""Another revision's package beside the working tree's: extract it, run a module on it.

The before/after tools (``tools.same_output``, ``tools.rank_ab``, ``benchmarks.speed.speed
--compare``) run the same module twice in child processes, once with REV's package.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def checkout(rev: str, into: Path) -> Path:
    """REV's package, extracted with ``git archive`` (no worktree, no checkout), as
    ``nautilus_ranking``: a revision from before the package was renamed from ``nautilus``
    has its folder and its own imports renamed, so the same module runs on either side."""
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-tree", "--name-only", rev],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    package = "nautilus_ranking" if "nautilus_ranking" in listed else "nautilus"
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", rev, package],
        capture_output=True,
        check=True,
    ).stdout
    tar_path = into / "src.tar"
    tar_path.write_bytes(archive)
    with tarfile.open(tar_path) as tar:
        tar.extractall(into, filter="data")
    if package == "nautilus":
        _rename_old_package(into / "nautilus", into / "nautilus_ranking")
    return into


#: An import of the package under its old name, in an old revision's own code.
_OLD_IMPORT = re.compile(r"\b(from|import) nautilus\b(?![-_])|(?<![\w/.~-])nautilus\.(?=[A-Za-z_])")


def _rename_old_package(old: Path, new: Path) -> None:
    """Move an old revision's ``nautilus`` to ``nautilus_ranking`` and point its imports there."""
    old.rename(new)
    for path in new.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        renamed = _OLD_IMPORT.sub(
            lambda m: f"{m.group(1)} nautilus_ranking" if m.group(1) else "nautilus_ranking.", text
        )
        if renamed != text:
            path.write_text(renamed, encoding="utf-8")


def run_module(
    module: str,
    args: Sequence[str],
    nautilus_from: Path | None = None,
    env: Mapping[str, str] | None = None,
    **kwargs: Any,
) -> subprocess.CompletedProcess[Any]:
    """``python -m module args`` in a child whose ``nautilus_ranking`` is the one extracted at
    ``nautilus_from`` (the working tree's when None); the repository's ``benchmarks`` and
    ``tools`` import as usual. ``kwargs`` go to :func:`subprocess.run`."""
    child_env = dict(os.environ if env is None else env)
    first = [str(nautilus_from)] if nautilus_from is not None else []
    child_env["PYTHONPATH"] = os.pathsep.join([*first, str(ROOT)])
    # The child's first path entry is its working directory: the extracted package's.
    return subprocess.run(
        [sys.executable, "-m", module, *args], env=child_env, cwd=nautilus_from or ROOT, **kwargs
    )
