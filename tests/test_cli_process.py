"""``cli_process.run_nautilus``: the one way a test runs the command to its end as a
subprocess, so every such run starts from the same plain environment."""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import pytest
from cli_process import run_nautilus

TESTS = Path(__file__).parent
#: Runs that need what the helper does not give, each with why.
OWN_RUNS = {
    # the child's address space is capped (preexec_fn) to catch an unbounded read
    ("sources/test_seed_files.py", "run"),
    # a fresh HOME without ORT_DISABLE_TELEMETRY, shared with strace'd serve processes
    ("embedders/test_offline_runtime.py", "query"),
}


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


def _own_runs(path: Path) -> list[str]:
    """Where ``path`` runs the script with ``subprocess.run([NAUTILUS, ...])``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef):
            continue
        for call in ast.walk(function):
            if (
                isinstance(call, ast.Call)
                and ast.unparse(call.func) == "subprocess.run"
                and call.args
                and isinstance(call.args[0], ast.List)
                and call.args[0].elts
                and ast.unparse(call.args[0].elts[0]) == "NAUTILUS"
            ):
                found.append(function.name)
    return found


def test_every_run_of_the_command_to_its_end_goes_through_the_helper() -> None:
    own = {
        (path.relative_to(TESTS).as_posix(), name)
        for path in TESTS.rglob("*.py")
        for name in _own_runs(path)
    }
    assert own == OWN_RUNS
    script = 'with_name("nautilus-ranking")'  # the script's path, spelled out
    spelled = [
        path.relative_to(TESTS).as_posix()
        for path in TESTS.rglob("*.py")
        if script in path.read_text(encoding="utf-8") and path != Path(__file__)
    ]
    # upstream/inside/ runs in the broker's venv, without this folder's helpers
    assert sorted(spelled) == ["cli_process.py", "upstream/inside/test_pgvector_loaded.py"]
