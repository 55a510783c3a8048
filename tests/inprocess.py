"""The ``nautilus-ranking`` command run inside the test's own process, for tests about what
a command prints rather than about its process: a subprocess spends a second or more
importing, and an eval sweep loading the onnx model again, on every run. What the run
sees is what a subprocess would: only the NAUTILUS_* variables given, the folder as its
working directory (its ``.env``), stdout and stderr that are not terminals."""

from __future__ import annotations

import io
import logging
import os
import subprocess
from collections.abc import Mapping, Sequence
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
import structlog
from plain_environment import PINNED

from nautilus_ranking.cli import main


def run_cli(
    args: Sequence[str], cwd: Path, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``nautilus-ranking ARGS`` in ``cwd`` with ``env``'s variables: its exit code and
    output, as ``subprocess.run(..., capture_output=True, text=True)`` gives them."""
    logger = logging.getLogger("nautilus_ranking")
    saved_logger = (list(logger.handlers), logger.level, logger.propagate)
    saved_structlog = structlog.get_config()
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        for name in list(os.environ):
            if name.upper().startswith("NAUTILUS_"):
                patch.delenv(name)
        for name, value in {**PINNED, **(env or {})}.items():  # the suite's embedder, too
            patch.setenv(name, value)
        patch.chdir(cwd)
        try:
            with redirect_stdout(out), redirect_stderr(err):
                code = main(list(args))
        finally:  # main() pointed the logs at ``err``: back to the test's set-up
            logger.handlers[:], logger.level, logger.propagate = saved_logger
            structlog.configure(**saved_structlog)
    return subprocess.CompletedProcess(
        ["nautilus-ranking", *args], code, out.getvalue(), err.getvalue()
    )
