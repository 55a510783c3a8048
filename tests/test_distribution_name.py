"""The distribution's name is ours: every install hint names it, never the name taken.

``nautilus`` on the package index is an unrelated project, so a message or a doc that
says ``pip install 'nautilus[serve]'`` installs someone else's code.
"""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DISTRIBUTION = "nautilus-ranking"
#: An extra asked for under the taken name: ``nautilus[serve]`` not preceded by a
#: letter, a dash or a dot (so ``nautilus-ranking[serve]`` and ``.[serve]`` pass).
TAKEN = re.compile(r"(?<![\w.-])nautilus\[")


def test_the_project_is_named_for_the_package_index() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["name"] == DISTRIBUTION
    assert project["scripts"] == {"nautilus-ranking": "nautilus_ranking.cli:main"}


def test_no_message_or_doc_names_the_taken_distribution() -> None:
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    texts = [
        p
        for p in tracked
        if p.endswith((".py", ".md", ".toml", ".example", ".yaml", "Makefile", "Dockerfile"))
        and not p.startswith("nautilus_ranking/models/")
        and p != "tests/test_distribution_name.py"
    ]
    offenders = [
        f"{path}:{n}"
        for path in texts
        for n, line in enumerate((ROOT / path).read_text(encoding="utf-8").splitlines(), start=1)
        if TAKEN.search(line)
    ]
    assert offenders == []
