"""The ``nautilus-ranking`` command as a real subprocess, for tests of the process itself
(its exit code, its streams, what it leaves on disk): one way to start it, so every such
test gives the command the same plain environment. ``inprocess.py`` runs the command
inside the test's process instead, for tests of what it prints."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from plain_environment import plain_environment

#: The installed script beside this interpreter (PYTHONPATH still picks the checkout).
NAUTILUS = str(Path(sys.executable).with_name("nautilus-ranking"))


def cli_environment(env: Mapping[str, str | None] | None = None) -> dict[str, str]:
    """What the command starts with: the suite's environment without its ``NAUTILUS_*``
    (:func:`plain_environment`, which pins the embedder) or a metrics folder, with the
    test's own data folder (tests/conftest.py sets ``NAUTILUS_DATA_DIR``), then ``env``,
    which wins; a ``None`` in ``env`` removes that variable (the pinned embedder, for a
    test of it unset)."""
    base = plain_environment()
    base.pop("PROMETHEUS_MULTIPROC_DIR", None)  # a serve's metrics folder is its own
    if "NAUTILUS_DATA_DIR" in os.environ:
        base["NAUTILUS_DATA_DIR"] = os.environ["NAUTILUS_DATA_DIR"]
    for name, value in (env or {}).items():
        if value is None:
            base.pop(name, None)
        else:
            base[name] = value
    return base


def run_nautilus(
    *args: str,
    env: Mapping[str, str | None] | None = None,
    cwd: Path | str | None = None,
    input: str | None = None,
    timeout: float = 120,
    check: bool = False,
    program: str = NAUTILUS,
) -> subprocess.CompletedProcess[str]:
    """``nautilus-ranking ARGS`` run to its end in :func:`cli_environment` (``env``
    added), with its output captured as text; ``check`` raises on a non-zero exit.
    ``program`` is the command as a user would type it (a relative path, a bare name)."""
    return subprocess.run(
        [program, *args],
        env=cli_environment(env),
        cwd=cwd,
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=check,
    )
