"""``cli_process.run_nautilus``: the one way a test runs the command to its end as a
subprocess, so every such run starts from the same plain environment."""

from __future__ import annotations

import json
import os

import pytest
from cli_process import run_nautilus


def test_the_command_sees_only_what_the_test_gives_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NAUTILUS_RANKING_TOP_K", "7")  # the test's own: not the child's
    shown = run_nautilus("config", "--json", env={"NAUTILUS_SOURCE_BOOSTS": "graph:high"})
    assert shown.returncode == 0, shown.stderr
    settings = json.loads(shown.stdout)["settings"]
    assert settings["NAUTILUS_RANKING_TOP_K"] is None
    assert settings["NAUTILUS_SOURCE_BOOSTS"] == {"graph": "high"}
    assert settings["NAUTILUS_EMBEDDER"] == "hashing"  # pinned, as the suite ranks
    assert settings["NAUTILUS_DATA_DIR"] == os.environ["NAUTILUS_DATA_DIR"]  # the test's
    unpinned = run_nautilus("config", "--json", env={"NAUTILUS_EMBEDDER": None})
    assert json.loads(unpinned.stdout)["settings"]["NAUTILUS_EMBEDDER"] != "hashing"
