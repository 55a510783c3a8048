"""Time read from a real PostgreSQL (the embedded one): a column and a key of a JSON
column, through `load` and `query` as an operator runs them."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from cli_process import run_nautilus
from fakes import write_jsonl

ROWS = [
    {
        "id": "p1",
        "title": "Password policy",
        "body": "passwords rotate every 90 days",
        "updated": "2026-03-01T10:00:00+01:00",
        "meta": {"effective": 1767225600},
    },
    {
        "id": "p2",
        "title": "Password policy (archived)",
        "body": "passwords rotate every 30 days",
        "updated": "2024-05",
        "meta": {"effective": "2024-06-01"},
    },
]


def run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_nautilus(*args, env=env)


def test_a_postgres_column_and_a_json_key_are_times(pg_dsn: str, tmp_path: Path) -> None:
    write_jsonl(tmp_path / "kb.jsonl", ROWS)
    # the other table's rows say it in other words: not copies of these
    write_jsonl(tmp_path / "meta.jsonl", [{**r, "title": r["title"] + " (HR)"} for r in ROWS])
    config = tmp_path / "kb.yaml"
    config.write_text(
        'sources:\n  - {id: kb, type: postgres_fts, dsn: "${KB_DSN}", table: policies,\n'
        "     columns: [title, body], seed: kb.jsonl, time_field: updated}\n"
        '  - {id: meta, type: postgres_table, dsn: "${KB_DSN}", table: policies_meta,\n'
        "     columns: [title, body], seed: meta.jsonl, time_field: meta.effective}\n",
        encoding="utf-8",
    )
    env = {"KB_DSN": pg_dsn}
    loaded = run("load", "--config", str(config), env=env)
    assert loaded.returncode == 0, loaded.stderr
    answered = run(
        "query",
        "password rotation policy",
        "--config",
        str(config),
        "--json",
        "--explain",
        "--recency",
        "half_life:90d",
        env=env,
    )
    assert answered.returncode == 0, answered.stderr
    answer: dict[str, Any] = json.loads(answered.stdout)
    times = {(e["source_id"], e["id"]): e["time"]["time"] for e in answer["ranking"]}
    assert times == {
        ("kb", "p1"): "2026-03-01T09:00:00Z",  # a timestamptz, read in UTC
        ("kb", "p2"): "2024-05",
        ("meta", "p1"): "2026-01-01T00:00:00Z",  # epoch seconds in a JSON column
        ("meta", "p2"): "2024-06-01",
    }
    assert answer["time"]["reference"] == "2026-03-01T09:00:00Z"
    assert answer["time"]["undated"] == 0
