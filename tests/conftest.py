"""Test set-up: hypothesis profiles (derandomized unless exploring is asked for); every
test starts with no NAUTILUS_* variable, no .env in its working directory and the log
set-up the suite started with."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
from hypothesis import settings

# A real PostgreSQL for the postgres_* sources: one server a session, a database a module.
from postgres_fixtures import pg_dsn, pg_server  # noqa: F401

# Property tests: the same fixed examples every run by default (make test, make
# test-fast, CI), so a red run is a real regression, never luck. Exploring at random is
# opt-in: HYPOTHESIS_PROFILE=explore (or NAUTILUS_FUZZ_EXAMPLES, which asks for more
# examples to explore). A failure found that way is kept as an @example on its test.
settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("explore", print_blob=True)
settings.register_profile("dev", print_blob=True)  # the former name of "explore"
settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE")
    or ("explore" if os.environ.get("NAUTILUS_FUZZ_EXAMPLES") else "ci")
)
if settings.default.derandomize:
    # Hypothesis also draws constants from every local module loaded so far, so the
    # examples a property sees would depend on which tests ran before it (and a clean
    # clone drew a batch a developer's run never did). Derandomized, the pool stays empty:
    # the same examples every run. Exploring keeps it.
    from hypothesis.internal.conjecture import providers as _providers

    _providers._get_local_constants = lambda: _providers._local_constants


#: The suite ranks by words (see clean_nautilus_env), module- and session-scoped fixtures
#: (servers started once for many tests) included: they start before any test's own.
os.environ["NAUTILUS_EMBEDDER"] = "hashing"


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
    # The dev venv has the embed extra, so unset would load the model in every test
    # that ranks: the suite ranks by words; tests/embedders/test_embedder_default.py tests unset.
    monkeypatch.setenv("NAUTILUS_EMBEDDER", "hashing")


#: What `make test-fast` leaves out (marked ``slow``): the suites that start real servers,
#: a real PostgreSQL or many CLI processes, or run every example of the docs. Every
#: module of the package is still exercised by the rest (`make test` runs everything).
SLOW_PATHS = (
    "sources/postgres/",  # a real PostgreSQL 18
    "sources/http/test_http_source.py",  # JSON engines on loopback, CLI processes
    "sources/http/test_http_hostile.py",  # a hostile server on loopback
    "sources/http/test_opensearch.py",  # the OpenSearch-API emulator
    "sources/http/test_engines.py",  # Typesense, Chroma and Groonga (make test-engines)
    "sources/http/test_http_hostile_engine.py",  # bombs of 1 GiB, engines on loopback
    "sources/http/test_http_wrong_mapping.py",  # CLI processes, a real server
    "sources/http/test_engine_score.py",  # an engine on loopback, a CLI process
    "mcp/",  # real MCP servers, stdio and HTTP
    "retrievers/",  # a real nautilus-ranking serve behind them
    "service/test_service_attacks.py",
    "service/test_service_limits.py",
    "service/test_service_operations.py",
    "service/test_service_readonly_root.py",
    "service/test_service_settings.py",  # real servers on loopback
    "request/test_every_way_in.py",
    "request/test_budget_every_way_in.py",
    "selection/test_abstain_ways_in.py",  # real serve and MCP servers, CLI processes
    "cli/",  # tens of CLI processes each
    "embedders/test_embedder_extra_missing.py",  # a venv-like child without the extra
    "test_docs.py",
    "test_showcase.py",
    "test_deploy_files.py",
    "test_same_answers.py",  # CLI processes of two checkouts
    "upstream/test_nautilus_broker.py",  # a Python 3.13 venv with the Nautilus broker
)
#: Single tests of a few seconds each in otherwise quick suites.
SLOW_TESTS = frozenset(
    {
        "test_robustness.py::test_the_service_answers_when_a_source_raises_cancelled_error",
        "request/test_pages.py::test_cli_pages_by_number_and_by_cursor_concatenate_to_the_top_3k",
        "synthesis/test_ranking.py::test_vectorised_path_matches_the_reference",
        # ranks every query of the four shared collections (about a minute)
        "selection/test_shipped_fit.py::test_refitting_the_hashing_setups_reproduces_the_shipped_file",
    }
)
#: Fixtures that make a test slow wherever it is.
SLOW_FIXTURES = frozenset({"pg_dsn", "pg_server"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = Path(__file__).parent
    for item in items:
        where = Path(str(item.fspath)).relative_to(root).as_posix()
        if (
            where.startswith(SLOW_PATHS)
            or f"{where}::{item.name}" in SLOW_TESTS
            or SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ()))
        ):
            item.add_marker(pytest.mark.slow)
