"""The identical-answers check (``python -m tools.same_output --answers``): the real CLI of
two checkouts on the demo, compared byte for byte but for the keys that vary per run."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from tools.same_answers import VARYING, comparable

ROOT = Path(__file__).resolve().parents[1]


def check(other: Path, *settings: str) -> subprocess.CompletedProcess[str]:
    """The check of this checkout against ``other``: the demo, one query."""
    return subprocess.run(
        [
            *(sys.executable, "-m", "tools.same_output", "--answers", str(other)),
            *(
                "--cases",
                "demo",
                "--queries",
                "1",
                "--pages",
                "2",
                "--settings",
                ",".join(settings),
            ),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_this_checkout_against_itself_is_identical() -> None:
    done = check(ROOT, "unset", "budget pages")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "| demo / unset | 1 | 1 | — |" in done.stdout
    assert "| demo / budget pages | 2 | 2 | — |" in done.stdout  # page 2 by next_cursor
    assert "2 of 2 cases identical" in done.stdout


def test_a_tampered_copy_is_found_and_named(tmp_path: Path) -> None:
    """A copy whose demo runbooks' titles were changed answers other bytes: exit 1, and
    the table shows the changed line."""
    package = tmp_path / "nautilus_ranking"
    shutil.copytree(
        ROOT / "nautilus_ranking", package, ignore=shutil.ignore_patterns("__pycache__")
    )
    seed = package / "demo" / "runbooks.jsonl"
    rows = [json.loads(line) for line in seed.read_text(encoding="utf-8").splitlines() if line]
    seed.write_text(
        "".join(json.dumps({**r, "title": r["title"] + " tampered"}) + "\n" for r in rows),
        encoding="utf-8",
    )
    done = check(tmp_path, "unset")
    assert done.returncode == 1, done.stdout + done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith("| demo / unset |"))
    assert line.startswith("| demo / unset | 1 | 0 | ")
    changed = line.split(" | ")[3].split(" / ")  # the other checkout's lines as -, ours as +
    assert any(c.startswith("-") and "tampered" in c for c in changed)
    assert not any(c.startswith("+") and "tampered" in c for c in changed)
    assert "0 of 1 cases identical" in done.stdout


def test_varying_and_ignored_keys_are_left_out_at_any_depth() -> None:
    first = {"request_id": "a", "ranking": [{"id": 1}], "duration_ms": 3, "ranking_hash": "x"}
    second = {"request_id": "b", "ranking": [{"id": 1}], "duration_ms": 9}
    assert set(VARYING) == {"request_id", "duration_ms"}
    assert comparable(json.dumps(first), 0) != comparable(json.dumps(second), 0)
    ignored = ["ranking_hash"]
    assert comparable(json.dumps(first), 0, ignored) == comparable(json.dumps(second), 0, ignored)
    nested = {"page": {"next_cursor": "c1", "number": 2}}
    assert comparable(json.dumps(nested), 0, ["next_cursor"]) == comparable(
        json.dumps({"page": {"next_cursor": "c2", "number": 2}}), 0, ["next_cursor"]
    )
    assert comparable("{}", 0) != comparable("{}", 2)  # a failure is compared as one


def test_an_unknown_setting_is_named_with_the_valid_ones() -> None:
    done = check(ROOT, "unset", "supersession, may revise")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "--settings may revise: not a setting" in done.stderr  # split at the comma
    assert "not a setting (unset, boosts, idf, recency, supersession, budget pages" in done.stderr
    assert done.stdout == ""
