"""What a newcomer meets on a fresh clone: our name first, no build artefact tracked, the
broker example's files kept out of the checkout, and a skip they can act on when the
shared IR collections are not beside it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import eval_support
import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_the_readme_and_make_demo_say_our_name() -> None:
    assert (ROOT / "README.md").read_text(encoding="utf-8").splitlines()[0] == "# nautilus-ranking"
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert '@echo "nautilus-ranking is installed in $(VENV)' in makefile


def test_no_coverage_file_is_tracked_and_the_broker_examples_files_are_ignored() -> None:
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert ".coverage" not in tracked
    for name in (".coverage", "audit.jsonl", ".nautilus/x"):
        ignored = subprocess.run(["git", "check-ignore", "-q", name], cwd=ROOT, check=False)
        assert ignored.returncode == 0, name


def test_a_missing_collection_is_skipped_with_a_reason_a_newcomer_can_act_on() -> None:
    with pytest.raises(pytest.skip.Exception) as skipped:
        eval_support.dataset("no-such-collection")
    reason = str(skipped.value)
    assert str(eval_support.DATASETS) in reason
    assert "README.md" in reason and "BEIR" in reason
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "## The test collections" in readme
