"""Test set-up: hypothesis profiles (derandomized under CI); every test starts with no
NAUTILUS_* variable, no .env in its working directory and the log set-up the suite
started with."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
from hypothesis import settings

# A real PostgreSQL for the postgres_* sources: one server a session, a database a module.
from postgres_fixtures import pg_dsn, pg_server  # noqa: F401

# Property tests: random exploration on a developer's machine; under CI (CI=true)
# the same fixed examples every run, so a red CI is a real regression, never luck.
# A failure found locally is kept as an @example on its test.
settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("dev", print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE")
                      or ("ci" if os.environ.get("CI") else "dev"))
if settings.default.derandomize:
    # Hypothesis also draws constants from every local module loaded so far, so the
    # examples a property sees would depend on which tests ran before it (and a clean
    # clone drew a batch a developer's run never did). Derandomized, the pool stays empty:
    # the same examples every run. Exploring (dev) keeps it.
    from hypothesis.internal.conjecture import providers as _providers

    _providers._get_local_constants = lambda: _providers._local_constants


@pytest.fixture(autouse=True)
def fresh_log_config() -> Iterator[None]:
    """A test that runs the CLI in-process configures structlog (the CLI logs warnings
    only by default); the next test starts from the set-up the suite started with, so
    ``capture_logs`` sees every level."""
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)


@pytest.fixture(autouse=True)
def clean_nautilus_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.upper().startswith("NAUTILUS_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NAUTILUS_DATA_DIR", str(tmp_path / "data"))
