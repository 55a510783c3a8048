"""What a new user meets first on the command line: ``--version``, ``--help``, what a
query prints around its results, strict mode's report, an empty sources file, and the
command the demo suggests next. Real subprocesses."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_process import NAUTILUS, run_nautilus

import nautilus_ranking


def test_version_is_the_installed_distributions() -> None:
    result = run_nautilus("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"nautilus-ranking {nautilus_ranking.__version__}"
    # One distribution (an editable install's metadata may also be found in the source
    # tree, which is on the tests' path: the same name and version, not another one).
    ours = {
        (d.metadata["Name"], d.version)
        for d in importlib.metadata.distributions()
        if any(e.value == "nautilus_ranking.cli:main" for e in d.entry_points)
    }
    assert ours == {("nautilus-ranking", nautilus_ranking.__version__)}


def test_help_is_plain_text_and_names_every_command() -> None:
    result = run_nautilus("--help")
    assert result.returncode == 0
    assert "``" not in result.stdout and ":class:" not in result.stdout
    description = result.stdout.split("positional arguments")[0]
    for command in ("config", "query", "sources", "load", "serve", "demo", "eval"):
        assert command in description, command
    assert "--version" in result.stdout
    assert "--config" in run_nautilus("serve", "--help").stdout


def test_every_option_of_every_command_says_what_it_does() -> None:
    for command in ("config", "query", "sources", "load", "serve", "mcp", "demo", "eval"):
        text = run_nautilus(command, "--help").stdout.split("options:", 1)[1]
        entries = [line.strip() for line in text.splitlines() if line.startswith("  -")]
        silent = [entry for entry in entries if len(entry.split("  ")) < 2]
        # an option whose text starts on the next line is said there
        lines = text.splitlines()
        silent = [
            e
            for e in silent
            if not any(
                line.strip() == e
                and i + 1 < len(lines)
                and lines[i + 1].startswith(" " * 10)
                and not lines[i + 1].strip().startswith("-")
                for i, line in enumerate(lines)
            )
        ]
        assert silent == [], (command, silent)


def test_a_query_prints_results_and_no_log_lines_by_default() -> None:
    result = run_nautilus("query", "orders-db disk full", "--top-k", "3")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""  # databases built, request served: no info lines around it
    assert result.stdout.startswith("query: orders-db disk full")
    loud = run_nautilus(
        "query",
        "orders-db disk full",
        env={"NAUTILUS_LOG_LEVEL": "info", "NAUTILUS_LOG_FORMAT": "json"},
    )
    assert "request_served" in loud.stderr  # asked for: there
    warned = run_nautilus("query", "x", env={"NAUTILUS_RANKING_IDF": "perhaps"})
    assert "config_value_skipped" in warned.stderr  # warnings still reach the operator


def test_strict_mode_prints_each_problem_once_and_no_settings_table() -> None:
    bad = {"NAUTILUS_RANKING_IDF": "perhaps", "NAUTILUS_SOURCE_BOOSTS": "graph:hgih"}
    gate = run_nautilus("config", "--strict", env=bad)
    assert gate.returncode == 1
    assert gate.stdout == ""  # no table before the error
    output = gate.stdout + gate.stderr
    assert output.count("'perhaps'") == 1 and output.count("'graph:hgih'") == 1
    startup = run_nautilus("query", "x", env={**bad, "NAUTILUS_CONFIG_STRICT": "true"})
    assert startup.returncode == 1 and startup.stdout == ""
    assert startup.stderr.count("'perhaps'") == 1 and startup.stderr.count("'graph:hgih'") == 1
    good = run_nautilus("config", "--strict", env={"NAUTILUS_SOURCE_BOOSTS": "graph:high"})
    assert good.returncode == 0 and "NAUTILUS_SOURCE_BOOSTS" in good.stdout


def test_a_sources_file_with_no_sources_fails_strict_and_a_query(tmp_path: Path) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("sources: []\n", encoding="utf-8")
    gate = run_nautilus("config", "--strict", "--config", str(empty))
    assert gate.returncode == 1
    assert f"{empty}: lists no sources" in gate.stderr
    as_json = json.loads(run_nautilus("config", "--json", "--config", str(empty)).stdout)
    assert as_json["sources_file"]["ok"] is False
    query = run_nautilus("query", "anything", "--config", str(empty))
    assert query.returncode == 1 and query.stdout == ""
    assert "the sources file lists no sources" in query.stderr
    assert "docs/sources.md" in query.stderr


def test_the_demo_suggests_a_command_that_runs_from_here() -> None:
    """``make demo`` runs ``.venv/bin/nautilus-ranking`` without activating the virtualenv: the
    command it suggests next must be runnable as printed, from the same folder."""
    env = {"PATH": "/usr/bin:/bin"}  # the virtualenv is not on PATH, as after `make demo`
    checkout = Path(NAUTILUS).parents[2]  # where `make demo` runs .venv/bin/nautilus-ranking from
    relative = os.path.relpath(NAUTILUS, checkout)
    result = run_nautilus("demo", "--top-k", "2", env=env, cwd=checkout, program=relative)
    assert result.returncode == 0, result.stderr
    suggested = result.stdout.strip().splitlines()[-1]
    assert suggested.startswith(f"Try: {relative} query "), suggested
    on_path = run_nautilus(
        "demo",
        "--top-k",
        "2",
        env={"PATH": f"{Path(NAUTILUS).parent}:/usr/bin:/bin"},
        program="nautilus-ranking",
    )
    assert on_path.stdout.strip().splitlines()[-1].startswith("Try: nautilus-ranking query ")


def _makefile(checkout: Path) -> str:
    path = checkout / "Makefile"
    return path.read_text(encoding="utf-8") if path.is_file() else ""


def test_make_demo_ends_with_commands_that_run_as_printed() -> None:
    """The README's first command, with the virtualenv not on PATH: every command it
    suggests must work when pasted into the same shell."""
    checkout = Path(NAUTILUS).parents[2]
    # the stamp the Makefile names now: an older one left beside it would pass `make -q`
    # while `make demo` rebuilt the .venv with whatever python3 PATH finds
    named = re.search(r"^STAMP\s*:=\s*\$\(VENV\)/(\S+)", _makefile(checkout), re.M)
    stamp = checkout / ".venv" / named.group(1) if named else None
    stamp = stamp if stamp is not None and stamp.is_file() else None
    if (
        shutil.which("make") is None
        or not (checkout / "Makefile").is_file()
        or stamp is None
        or Path(sys.executable).parents[1] != checkout / ".venv"
    ):
        pytest.skip("not running from the checkout's make-built .venv")
    if (
        subprocess.run(
            ["make", "-q", str(stamp.relative_to(checkout))], cwd=checkout, capture_output=True
        ).returncode
        != 0
    ):
        pytest.skip("the .venv is out of date: make demo would reinstall it")
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/root"),
        "NAUTILUS_DATA_DIR": os.environ["NAUTILUS_DATA_DIR"],
    }
    demo = subprocess.run(
        ["make", "-s", "demo"], cwd=checkout, env=env, capture_output=True, text=True, timeout=300
    )
    assert demo.returncode == 0, demo.stderr
    tail = [line for line in demo.stdout.strip().splitlines() if line][-3:]
    assert tail[0].startswith("Try: .venv/bin/nautilus-ranking query "), tail
    assert ".venv/bin/nautilus-ranking" in tail[1] and tail[2].endswith(". .venv/bin/activate"), (
        tail
    )
    suggested = subprocess.run(
        tail[0].removeprefix("Try: "),
        shell=True,
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert suggested.returncode == 0, suggested.stderr
    assert "rank  source" in suggested.stdout
    activated = subprocess.run(
        ". .venv/bin/activate && nautilus-ranking --version",
        shell=True,
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert activated.stdout.startswith("nautilus-ranking "), activated.stderr


def test_a_url_password_in_a_skipped_value_is_never_printed() -> None:
    """``/v1/config`` masked it; the warning and ``config`` (text and JSON) printed it."""
    secret = "pw-7d1e0c"
    url = f"https://admin:{secret}@app.example.com/a/path"
    env = {"NAUTILUS_SERVE_CORS_ORIGINS": url, "NAUTILUS_LOG_FORMAT": "json"}
    text = run_nautilus("config", env=env)
    as_json = run_nautilus("config", "--json", env=env)
    warned = run_nautilus("config", env={**env, "NAUTILUS_LOG_LEVEL": "warning"})
    assert '"event": "config_value_skipped"' in warned.stderr, warned.stderr
    for result in (text, as_json, warned):
        output = result.stdout + result.stderr
        assert "NAUTILUS_SERVE_CORS_ORIGINS" in output
        assert secret not in output and "https://***@app.example.com" in output, output
    skipped = json.loads(as_json.stdout)["skipped"]
    assert [p["value"] for p in skipped] == ["https://***@app.example.com/a/path"]


def test_a_canonical_source_no_source_has_fails_the_gate() -> None:
    """A misspelt id kept no copy where one was meant kept, and passed ``--strict``."""
    gate = run_nautilus("config", "--strict", env={"NAUTILUS_RANKING_CANONICAL_SOURCES": "runbook"})
    assert gate.returncode == 1, gate.stdout
    assert "NAUTILUS_RANKING_CANONICAL_SOURCES: 'runbook': no source has id 'runbook'" in (
        gate.stderr
    )
    good = run_nautilus(
        "config", "--strict", env={"NAUTILUS_RANKING_CANONICAL_SOURCES": "runbooks"}
    )
    assert good.returncode == 0, good.stderr
