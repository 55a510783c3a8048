"""A Python 3.13 venv with the Nautilus broker and this project, installed as a user
would: ``pip install 'nautilus-rkm[postgres,pgvector,otel]==0.3.0'``, then this project's
wheel (never editable), into one venv.

Shared by tests/upstream/ and benchmarks/broker/nautilus_broker.py. The venv is cached under
``~/.cache/nautilus-ranking/broker-venvs/`` keyed by the broker's version, the
interpreter, ``pyproject.toml`` and every file of the package, so a run reuses the
venv of the same source and a changed source gets its own (built under a lock; one
that did not complete is rebuilt; beyond the three most recently used, venvs unused for
an hour are removed).
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import hashlib
import os
import shutil
import subprocess
import time
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BROKER = "nautilus-rkm"
BROKER_VERSION = "0.3.0"
# otel: its spans (broker.request, synthesis…), the SDK and exporters (tests/upstream/inside)
BROKER_EXTRAS = "postgres,pgvector,otel"
#: What the venv needs besides the two: the checks run under pytest there.
TOOLING = ("pytest>=8.0", "setuptools>=68", "wheel")
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nautilus-ranking"
#: Venvs of other sources kept however old, and how recently used one must be to stay.
KEEP_RECENT = 3
STALE_S = 3600


class BrokerVenvUnavailable(RuntimeError):
    """The venv cannot be built here; the message names what is missing."""


@dataclass(frozen=True)
class BrokerVenv:
    root: Path
    wheel: Path

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    def bin(self, name: str) -> Path:
        return self.root / "bin" / name


def find_python313() -> Path:
    """A Python 3.13 interpreter: ``$BROKER_PYTHON``, ``python3.13`` on PATH, or
    pyenv's 3.13.x."""
    given = os.environ.get("BROKER_PYTHON")
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    candidates = [given] if given else []
    candidates.extend(sorted(glob.glob(str(pyenv / "versions" / "3.13*" / "bin" / "python3.13"))))
    candidates.append(shutil.which("python3.13") or "")  # a pyenv shim may not run
    for candidate in candidates:
        if candidate and _is_python313(candidate):
            return Path(candidate)
    raise BrokerVenvUnavailable(
        "no Python 3.13 interpreter (the broker nautilus-rkm needs Python >= 3.13): "
        "looked at $BROKER_PYTHON, python3.13 on PATH and "
        f"{pyenv}/versions/3.13*/bin/python3.13"
    )


def _is_python313(candidate: str) -> bool:
    try:
        probe = subprocess.run(
            [candidate, "-c", "import sys; print(sys.version_info[:2] >= (3, 13))"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except OSError:
        return False
    return probe.returncode == 0 and probe.stdout.strip() == "True"


def source_key(python: Path, extras: Sequence[str] = ()) -> str:
    digest = hashlib.sha256()
    digest.update(f"{BROKER}=={BROKER_VERSION}[{BROKER_EXTRAS}] {python} {sorted(extras)}".encode())
    digest.update((ROOT / "pyproject.toml").read_bytes())
    for path in sorted((ROOT / "nautilus_ranking").rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(ROOT)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _run(args: Sequence[str | Path], what: str, cwd: Path | None = None) -> None:
    done = subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, cwd=cwd, timeout=1200
    )
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-25:])
        raise BrokerVenvUnavailable(f"{what} failed (exit {done.returncode}):\n{tail}")


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build_wheel(python: Path, into: Path) -> Path:
    """This project's wheel, built from a copy of the source (no build/ left here)."""
    source = into / "src"
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".git",
            ".venv",
            "build",
            "*.egg-info",
            "__pycache__",
            ".*_cache",
            ".hypothesis",
            "docs",
            "tests",
            "benchmarks",
            "deploy",
            "examples",
        ),
    )
    _run(
        [
            python,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            into / "dist",
            source,
        ],
        "building this project's wheel",
    )
    [wheel] = sorted((into / "dist").glob("nautilus_ranking-*.whl"))
    shutil.rmtree(source)
    return wheel


def wheel_top_level(wheel: Path) -> set[str]:
    """The names a wheel installs at the top of site-packages (its .dist-info aside)."""
    with zipfile.ZipFile(wheel) as archive:
        names = {n.split("/", 1)[0] for n in archive.namelist()}
    return {n for n in names if not n.endswith((".dist-info", ".data"))}


def broker_venv(extras: Sequence[str] = ()) -> BrokerVenv:
    """The venv for this source (built, or reused from the cache). ``extras``: this
    project's extras to install with it (the benchmark's ``embed``)."""
    python = find_python313()
    key = source_key(python, extras)
    where = CACHE / "broker-venvs"
    final = where / key
    with _locked(where / f"{key}.lock"):
        if (final / ".complete").is_file():
            os.utime(final / ".complete")
            return BrokerVenv(final, next((final / "dist").glob("*.whl")))
        shutil.rmtree(final, ignore_errors=True)  # a build that did not complete
        _run([python, "-m", "venv", final], "python3.13 -m venv")
        pip = [final / "bin" / "python", "-m", "pip", "install", "--quiet"]
        _run([*pip, "--upgrade", "pip", *TOOLING], "installing pip, pytest and setuptools")
        _run([*pip, f"{BROKER}[{BROKER_EXTRAS}]=={BROKER_VERSION}"], f"installing {BROKER}")
        wheel = build_wheel(final / "bin" / "python", final)
        target = f"{wheel}[{','.join(extras)}]" if extras else str(wheel)
        _run([*pip, target], "installing this project's wheel beside the broker")
        (final / ".complete").write_text(time.strftime("%Y-%m-%dT%H:%M:%SZ"), encoding="utf-8")
    _prune(where, keep=final)
    return BrokerVenv(final, wheel)


def _prune(where: Path, keep: Path) -> None:
    """Remove the venvs of other sources: each is ~200 MB and a day of work makes many.
    The :data:`KEEP_RECENT` most recently used stay, and any used in the last
    :data:`STALE_S` (a run of another checkout may be using it); each goes under its lock
    (never one being built)."""
    now = time.time()
    used = sorted(
        (m for m in where.glob("*/.complete") if m.parent != keep),
        key=lambda m: m.stat().st_mtime,
        reverse=True,
    )
    for marker in used[KEEP_RECENT:]:
        if now - marker.stat().st_mtime < STALE_S:
            continue
        with _locked(where / f"{marker.parent.name}.lock"):
            shutil.rmtree(marker.parent, ignore_errors=True)
