"""Seeds that are not regular files (a device, a pipe, a directory) and seed lines
built to cost too much are refused with one clear message, by ``config --strict`` and
``query`` as real subprocesses, instead of being read forever or hanging."""

from __future__ import annotations

import os
import resource
import subprocess
from pathlib import Path

import pytest
from cli_process import NAUTILUS
from plain_environment import plain_environment

MEMORY_CAP = 3 << 30  # a seed read whole into memory fails the test instead of the machine


def cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def run(folder: Path, seed: str, *args: str) -> subprocess.CompletedProcess[str]:
    config = folder / "sources.yaml"
    config.write_text(
        f"sources:\n  - {{id: notes, type: sqlite_fts, path: notes.db, "
        f"seed: '{seed}', columns: [title]}}\n",
        encoding="utf-8",
    )
    env = plain_environment()
    env.update(NAUTILUS_DATA_DIR=str(folder / "data"), NAUTILUS_CONFIG=str(config))
    return subprocess.run(
        [NAUTILUS, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        preexec_fn=cap_memory,
    )


def fifo(folder: Path) -> str:
    path = folder / "notes.jsonl"
    os.mkfifo(path)
    return str(path)


def directory(folder: Path) -> str:
    path = folder / "notes.jsonl"
    path.mkdir()
    return str(path)


@pytest.mark.parametrize(
    ("make", "kind"),
    [
        (lambda folder: "/dev/zero", "a character device"),
        (lambda folder: "/dev/urandom", "a character device"),
        (fifo, "a named pipe"),
        (directory, "a directory"),
    ],
    ids=["dev-zero", "dev-urandom", "fifo", "directory"],
)
@pytest.mark.parametrize(
    "command", [("config", "--strict"), ("query", "disk")], ids=["config-strict", "query"]
)
def test_a_seed_that_is_not_a_regular_file_is_refused(
    tmp_path: Path, make: object, kind: str, command: tuple[str, ...]
) -> None:
    seed = make(tmp_path)  # type: ignore[operator]
    result = run(tmp_path, seed, *command)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"seed file {seed} is {kind}; a seed is a regular JSON-lines file" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b'{"id": "a", "title": "' + b"x" * (17 << 20), b"line longer than 16777216 bytes"),
        (b'{"id": "a", "title": "x", "n": 1' + b"0" * 5000 + b"}\n", b"Exceeds the limit"),
        (b'{"id": "a", "title": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n", b"nested too deeply"),
    ],
    ids=["no-line-end", "huge-integer", "deep-nesting"],
)
def test_a_seed_line_built_to_cost_too_much_is_refused_naming_it(
    tmp_path: Path, line: bytes, reason: bytes
) -> None:
    seed = tmp_path / "notes.jsonl"
    seed.write_bytes(b'{"id": "ok", "title": "disk full"}\n' + line)
    result = run(tmp_path, str(seed), "config", "--strict")
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"{seed}:2: ".encode() in result.stderr.encode()
    assert reason in result.stderr.encode() and b"Traceback" not in result.stderr.encode()
