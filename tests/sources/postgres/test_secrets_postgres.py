"""Passwords in libpq keyword DSNs (escaped spaces and quotes) never leave nautilus:
not in ``sources_errored``, the logs, ``nautilus-ranking config`` or ``/readyz``. Against the
real embedded PostgreSQL, with a database that does not exist (the error names the
DSN) and with the CLI and the server as real subprocesses."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import httpx
import pytest
from cli_process import run_nautilus
from fakes import write_jsonl
from postgres_fixtures import PgServer
from psycopg.conninfo import conninfo_to_dict

from nautilus_ranking.sources.postgres.dsn import mask_dsn
from tools.servers import running

KEY = "k-5c2b9e1f70"
# What must never appear: the part of each password after its first space or quote.
SECRET_TAIL = "TWO"
PASSWORDS = [
    r"Hunter\ TWO\ 9x",
    r"Hunter\'TWO\'9x",
    r"'Hunter TWO\'s 9x'",
    r"Hunter\ TWO\\",
    r"'Hunter\\ TWO 9x",
]


def keyword_dsn(server: PgServer, password: str) -> str:
    """A keyword DSN to the real server's socket, for a database that does not exist."""
    parts = conninfo_to_dict(server.dsn())
    return (
        f"host={parts['host']} port={parts.get('port', 5432)} "
        f"user={parts.get('user', 'postgres')} password={password} dbname=no_such_db "
        "connect_timeout=5"
    )


@pytest.mark.parametrize("password", PASSWORDS)
def test_mask_dsn_hides_the_whole_keyword_password(password: str) -> None:
    masked = mask_dsn(f"host=db user=app password={password} dbname=kb")
    assert masked == "host=db user=app password=*** dbname=kb" or (
        masked.endswith("password=***") and not password.endswith("9x'")
    )
    assert SECRET_TAIL not in masked


def sources(folder: Path) -> Path:
    write_jsonl(folder / "kb.jsonl", [{"id": "a1", "title": "disk full", "body": "x"}])
    path = folder / "sources.yaml"
    path.write_text(
        """
sources:
  - {id: text, type: postgres_fts, dsn: "${KB_DSN}", table: kb_text, columns: [title, body],
     seed: kb.jsonl}
""",
        encoding="utf-8",
    )
    return path


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_nautilus(*args, env=env)


@pytest.mark.parametrize("password", [PASSWORDS[0], PASSWORDS[2]])
def test_the_cli_never_shows_a_keyword_password(
    pg_server: PgServer, tmp_path: Path, password: str
) -> None:
    env = {
        "KB_DSN": keyword_dsn(pg_server, password),
        "NAUTILUS_LOG_FORMAT": "json",
        "NAUTILUS_CONFIG": str(sources(tmp_path)),
    }
    query = cli("query", "disk", "--json", env=env)
    assert query.returncode == 1, query.stderr  # the only source failed
    errors = json.loads(query.stdout)["sources_errored"]
    assert [e["error_type"] for e in errors] == ["PostgresUnavailableError"]
    assert "password=***" in errors[0]["message"] and "no_such_db" in errors[0]["message"]
    shown = [query.stdout, query.stderr]
    for args in (["config"], ["config", "--json"], ["config", "--strict"]):
        result = cli(*args, env=env)
        assert "password=***" in result.stdout, result.stdout + result.stderr
        shown += [result.stdout, result.stderr]
    load = cli("load", env=env)
    assert load.returncode == 1 and "password=***" in load.stderr, load.stderr
    shown += [load.stdout, load.stderr]
    for text in shown:
        assert SECRET_TAIL not in text, text


def test_the_server_never_shows_a_keyword_password(pg_server: PgServer, tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.write_text(KEY + "\n")
    keys.chmod(0o600)  # a secret: owner-only
    env = {
        "KB_DSN": keyword_dsn(pg_server, PASSWORDS[0]),
        "NAUTILUS_CONFIG": str(sources(tmp_path)),
        "NAUTILUS_SERVE_API_KEYS_FILE": str(keys),
        "NAUTILUS_SERVE_PROBE_INTERVAL_S": "0.3",
    }
    with running(tmp_path, env) as server:
        headers = {"X-API-Key": KEY}
        answer = httpx.post(
            server.url + "/v1/query", json={"query": "disk"}, headers=headers, timeout=30
        )
        assert answer.status_code == 200, answer.text
        assert "password=***" in answer.json()["sources_errored"][0]["message"]
        ready = httpx.get(server.url + "/readyz", headers=headers)
        assert ready.status_code == 503 and "text" in ready.json()["failing"]
        config = httpx.get(server.url + "/v1/config", headers=headers)
        for text in (answer.text, ready.text, config.text):
            assert SECRET_TAIL not in text, text
    assert "password=***" in server.logs() and SECRET_TAIL not in server.logs()
