"""``nautilus-ranking config`` shows the log level that applies: with ``NAUTILUS_LOG_LEVEL`` unset
the commands whose output is the point log warnings and the servers info (the
settings' own default, ``info``, is what neither uses unasked)."""

from __future__ import annotations

import json
from pathlib import Path

from cli_process import run_nautilus


def config(tmp_path: Path, *args: str, **env: str) -> str:
    run = run_nautilus("config", *args, env={"NAUTILUS_DATA_DIR": str(tmp_path), **env}, timeout=60)
    assert run.returncode == 0, run.stderr
    return run.stdout


def level_line(text: str) -> str:
    return next(line for line in text.splitlines() if line.startswith("NAUTILUS_LOG_LEVEL"))


def test_config_shows_the_level_each_command_logs_at(tmp_path: Path) -> None:
    assert (
        level_line(config(tmp_path)).split(None, 1)[1]
        == "warning (serve, mcp: info; unset: by command)"
    )
    assert json.loads(config(tmp_path, "--json"))["log_level_applied"] == {
        "cli": "warning",
        "serve": "info",
    }


def test_a_level_that_is_set_is_shown_as_set(tmp_path: Path) -> None:
    assert level_line(config(tmp_path, NAUTILUS_LOG_LEVEL="debug")).split() == [
        "NAUTILUS_LOG_LEVEL",
        "debug",
    ]
    assert json.loads(config(tmp_path, "--json", NAUTILUS_LOG_LEVEL="error"))[
        "log_level_applied"
    ] == {"cli": "error", "serve": "error"}
