"""Own data, as a new user brings it: ``config --strict`` reads a PostgreSQL source's seed
as ``load`` does, a table never loaded says how to load it (the real embedded
PostgreSQL), and two projects on the default data dir keep their own databases."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from cli_process import run_nautilus
from fakes import write_jsonl

from nautilus_ranking.settings.model import NautilusSettings

ROWS = [
    {"id": "a1", "title": "Reset a password", "body": "use the forgot password link"},
    {"id": "a2", "title": "Delivery times", "body": "two to four working days"},
]


def run(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None, data_dir: bool = True
) -> subprocess.CompletedProcess[str]:
    own_data: dict[str, str | None] = {} if data_dir else {"NAUTILUS_DATA_DIR": None}
    return run_nautilus(*args, env={**own_data, **(env or {})}, cwd=cwd)


def postgres_file(folder: Path, columns: str = "[title, body]", table: str = "kb") -> Path:
    path = folder / "kb.yaml"
    path.write_text(
        f"""sources:
  - {{id: kb, type: postgres_fts, dsn: "${{KB_DSN}}", table: {table}, columns: {columns},
     seed: kb.jsonl}}
  - {{id: plain, type: postgres_table, dsn: "${{KB_DSN}}", table: {table}_plain,
     columns: {columns}, seed: kb.jsonl}}
""",
        encoding="utf-8",
    )
    return path


# --- config --strict reads the seeds ------------------------------------------------------


def test_config_strict_checks_a_postgres_sources_columns_against_its_seed(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "kb.jsonl", ROWS)
    # a server that is not there: the check reads the seed, it never connects
    env = {"KB_DSN": "postgresql://app:s3cret@127.0.0.1:1/kb"}
    bad = run(
        "config", "--strict", "--config", str(postgres_file(tmp_path, "[title, bdy]")), env=env
    )
    assert bad.returncode == 1
    assert "source 'kb': columns ['bdy'] are in no row of" in bad.stderr
    assert "(fields: id, title, body)" in bad.stderr
    assert "s3cret" not in bad.stdout + bad.stderr and "Traceback" not in bad.stderr
    good = run("config", "--strict", "--config", str(postgres_file(tmp_path)), env=env)
    assert good.returncode == 0, good.stderr
    assert "postgresql://app:***@127.0.0.1:1/kb" in good.stdout


def test_config_strict_checks_every_seed_row_has_the_id_field(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "kb.jsonl", [ROWS[0], {"title": "no id", "body": "x"}])
    result = run(
        "config",
        "--strict",
        "--config",
        str(postgres_file(tmp_path)),
        env={"KB_DSN": "postgresql://app@127.0.0.1:1/kb"},
    )
    assert result.returncode == 1
    assert "row 2 has no 'id' (the id_field)" in result.stderr


def test_config_strict_names_a_missing_postgres_seed(tmp_path: Path) -> None:
    result = run(
        "config",
        "--strict",
        "--config",
        str(postgres_file(tmp_path)),
        env={"KB_DSN": "postgresql://app@127.0.0.1:1/kb"},
    )
    assert result.returncode == 1
    assert f"seed file {tmp_path / 'kb.jsonl'} not found" in result.stderr


# --- a table never loaded ----------------------------------------------------------------


def errors_of(result: subprocess.CompletedProcess[str]) -> dict[str, dict[str, Any]]:
    return {e["source_id"]: e for e in json.loads(result.stdout)["sources_errored"]}


def test_querying_a_table_never_loaded_says_to_run_nautilus_load(
    pg_dsn: str, tmp_path: Path
) -> None:
    write_jsonl(tmp_path / "kb.jsonl", ROWS)
    config = str(postgres_file(tmp_path, table="never_loaded"))
    env = {"KB_DSN": pg_dsn}
    before = run("query", "reset password", "--config", config, "--json", env=env)
    assert before.returncode == 1  # every source failed
    errors = errors_of(before)
    assert set(errors) == {"kb", "plain"}
    for error in errors.values():
        assert error["error_type"] == "PostgresSourceError"
        assert "does not exist" in error["message"] and "nautilus-ranking load" in error["message"]
        assert "never_loaded" in error["message"]
    loaded = run("load", "--config", config, env=env)
    assert loaded.returncode == 0, loaded.stderr
    after = run("query", "reset password", "--config", config, "--json", env=env)
    assert after.returncode == 0 and errors_of(after) == {}
    assert json.loads(after.stdout)["data"]["kb"][0]["id"] == "a1"


def test_a_column_the_table_lacks_says_which_and_how_to_fix_it(pg_dsn: str, tmp_path: Path) -> None:
    write_jsonl(tmp_path / "kb.jsonl", ROWS)
    env = {"KB_DSN": pg_dsn}
    assert (
        run("load", "--config", str(postgres_file(tmp_path, table="cols")), env=env).returncode == 0
    )
    other = tmp_path / "other"
    other.mkdir()
    write_jsonl(other / "kb.jsonl", [{**r, "summary": r["body"]} for r in ROWS])
    result = run(
        "query",
        "password",
        "--config",
        str(postgres_file(other, "[title, summary]", table="cols")),
        "--json",
        env=env,
    )
    error = errors_of(result)["plain"]
    assert error["error_type"] == "PostgresSourceError"
    assert "column t.summary does not exist" in error["message"]
    assert "nautilus-ranking load" in error["message"]


# --- the default data dir is shared: one folder per sources file --------------------------


def shop(folder: Path, rows: list[dict[str, str]]) -> Path:
    folder.mkdir()
    write_jsonl(folder / "faqs.jsonl", rows)
    path = folder / "shop.yaml"
    path.write_text(
        "sources:\n  - {id: faqs, type: sqlite_fts, path: shop/faqs.db, "
        "seed: faqs.jsonl, columns: [title, body]}\n",
        encoding="utf-8",
    )
    return path


def rebuilds(result: subprocess.CompletedProcess[str]) -> list[str]:
    events = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    return [e["reason"] for e in events if e.get("event") == "source_rebuilding"]


def test_two_projects_on_the_default_data_dir_do_not_rebuild_each_others_databases(
    tmp_path: Path,
) -> None:
    a = shop(tmp_path / "a", ROWS[:1])
    b = shop(tmp_path / "b", ROWS[1:])
    env = {
        "HOME": str(tmp_path / "home"),
        "NAUTILUS_LOG_FORMAT": "json",
        "NAUTILUS_LOG_LEVEL": "info",
    }  # the CLI logs warnings only by default

    def ask(config: Path) -> subprocess.CompletedProcess[str]:
        result = run(
            "query", "password delivery", "--config", str(config), "--json", env=env, data_dir=False
        )
        assert result.returncode == 0, result.stderr
        return result

    first_a, first_b, again_a = ask(a), ask(b), ask(a)
    assert rebuilds(first_a) == ["no database yet"]
    assert rebuilds(first_b) == ["no database yet"]  # not "the seed changed"
    assert rebuilds(again_a) == []
    assert [r["id"] for r in json.loads(again_a.stdout)["data"]["faqs"]] == ["a1"]
    assert [r["id"] for r in json.loads(first_b.stdout)["data"]["faqs"]] == ["a2"]
    built = sorted((tmp_path / "home" / ".cache" / "nautilus" / "projects").glob("*/shop/faqs.db"))
    assert len(built) == 2 and {p.parts[-3].split("-")[0] for p in built} == {"shop"}


def test_a_data_dir_that_is_set_keeps_relative_paths_as_written(tmp_path: Path) -> None:
    config = shop(tmp_path / "a", ROWS)
    result = run("sources", "rebuild", "--config", str(config))
    assert result.returncode == 0, result.stderr
    assert (Path(os.environ["NAUTILUS_DATA_DIR"]) / "shop" / "faqs.db").is_file()


def test_the_keyed_default_is_the_settings_default() -> None:
    from nautilus_ranking.sources.factory import DEFAULT_DATA_DIR

    assert NautilusSettings.model_fields["data_dir"].default == DEFAULT_DATA_DIR
