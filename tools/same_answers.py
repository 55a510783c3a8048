"""Identical answers: ``nautilus-ranking query --json`` on this checkout and on another
(a path or a git revision) gives the same bytes, case by case.

Each side runs the real CLI in child processes (``python -m nautilus_ranking`` of the shared
venv, ``PYTHONPATH`` at its checkout; a revision is extracted with ``git archive``),
with its own data folder, only the case's NAUTILUS_* variables, the same cursor key and
the same embedder. The cases are ``tools/answer_cases.py``'s. An answer is compared as
the JSON it printed, keys in its order, without :data:`VARYING` (and any ``--ignore-key``),
at any depth; a command that fails is compared by its exit status and output.
"""

from __future__ import annotations

import difflib
import json
import os
import sys
import tempfile
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.answer_cases import Case
from tools.revisions import checkout, run_module

#: Keys that differ between two runs of the same query, and why: never compared.
VARYING = {
    "request_id": "random per request (the service's X-Request-ID)",
    "duration_ms": "the request's elapsed time",
}
#: The cursor key both sides sign pages with (else each data folder makes its own).
CURSOR_KEY = "same-answers-check-cursor-key-0123456789abcdef"


@dataclass
class Compared:
    """One case and setting: how many answers, how many identical, the first difference."""

    case: str
    answers: int
    identical: int
    first_difference: str


def comparable(stdout: str, returncode: int, ignored: Iterable[str] = ()) -> str:
    """The answer as compared: its JSON re-written without the varying and ignored keys
    (key order kept, one key a line); a failed command's status and output as they are."""
    if returncode != 0:
        return f"exit {returncode}\n{stdout}"
    try:
        answer = json.loads(stdout)
    except ValueError:
        return f"not JSON:\n{stdout}"
    drop = set(VARYING) | set(ignored)
    return json.dumps(_without(answer, drop), indent=1, ensure_ascii=False)


def _without(value: Any, keys: set[str]) -> Any:
    if isinstance(value, dict):
        return {k: _without(v, keys) for k, v in value.items() if k not in keys}
    if isinstance(value, list):
        return [_without(v, keys) for v in value]
    return value


def child_env(data_dir: Path, embedder: str, case: Case, setting: dict[str, str]) -> dict[str, str]:
    """The environment without any NAUTILUS_* variable of the caller's, plus the case's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NAUTILUS_")}
    env.update(
        NAUTILUS_DATA_DIR=str(data_dir),
        NAUTILUS_EMBEDDER=embedder,
        NAUTILUS_CURSOR_KEY=CURSOR_KEY,
        NAUTILUS_LOG_LEVEL="error",
        **setting,
    )
    if case.config is not None:
        env["NAUTILUS_CONFIG"] = str(case.config)
    return env


def answers(
    checkout_path: Path | None, data_dir: Path, case: Case, setting: str, embedder: str, pages: int
) -> list[tuple[str, int]]:
    """One side's answers to every query of ``case`` under ``setting`` (stdout, exit
    status); under ``budget pages``, each query's first ``pages`` pages by next_cursor."""
    env = child_env(data_dir, embedder, case, case.settings[setting])
    out = []
    for query in case.queries:
        cursor: list[str] = []
        for _ in range(pages if setting == "budget pages" else 1):
            done = run_module(
                "nautilus_ranking",
                ["query", "--json", *cursor, query],
                checkout_path,
                env,
                capture_output=True,
                text=True,
                timeout=600,
            )
            out.append((done.stdout, done.returncode))
            try:
                next_cursor = json.loads(done.stdout).get("next_cursor")
            except (ValueError, AttributeError):
                next_cursor = None
            if not next_cursor:
                break
            cursor = ["--cursor", next_cursor]
    return out


def compare(
    case: str, ours: list[tuple[str, int]], theirs: list[tuple[str, int]], ignored: list[str]
) -> Compared:
    mine = [comparable(s, rc, ignored) for s, rc in ours]
    other = [comparable(s, rc, ignored) for s, rc in theirs]
    same = sum(a == b for a, b in zip(mine, other, strict=False))
    first = ""
    if len(mine) != len(other):
        first = f"{len(mine)} answers here, {len(other)} there (pages)"
    for a, b in zip(mine, other, strict=False):
        if a != b:
            first = short_diff(b, a)
            break
    return Compared(case, max(len(mine), len(other)), same, first)


def short_diff(before: str, after: str, lines: int = 4, width: int = 100) -> str:
    """The first changed lines, the other checkout's as ``-``, this one's as ``+``."""
    changed = [
        line
        for line in difflib.unified_diff(before.splitlines(), after.splitlines(), n=0, lineterm="")
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    return " / ".join(line.strip()[:width] for line in changed[:lines])


def run(
    other: str, cases: list[Case], embedder: str, pages: int, ignored: list[str]
) -> list[Compared]:
    """Every case and setting on both sides (the sides in parallel, each in turn)."""
    with tempfile.TemporaryDirectory(prefix="nautilus-same-answers-") as tmp:
        root = Path(tmp)
        theirs_path = (
            Path(other) if Path(other).is_dir() else checkout(other, _made(root / "other"))
        )
        sides = {"this": None, "other": theirs_path.resolve()}

        def side(label: str) -> dict[tuple[str, str], list[tuple[str, int]]]:
            data = _made(root / f"data-{label}")
            out = {}
            for c in cases:
                for s in c.settings:
                    out[(c.name, s)] = answers(sides[label], data, c, s, embedder, pages)
                    print(f"{label}: {c.name} / {s} asked", file=sys.stderr, flush=True)
            return out

        with ThreadPoolExecutor(2) as pool:
            ours, theirs = pool.map(side, ("this", "other"))
    return [
        compare(f"{name} / {setting}", ours[(name, setting)], theirs[(name, setting)], ignored)
        for name, setting in ours
    ]


def _made(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def table(rows: list[Compared]) -> str:
    lines = [
        "| case | answers compared | identical | first difference (- other, + this) |",
        "|---|---|---|---|",
    ]
    for r in rows:
        diff = r.first_difference.replace("|", "\\|") or "—"
        lines.append(f"| {r.case} | {r.answers} | {r.identical} | {diff} |")
    return "\n".join(lines)
