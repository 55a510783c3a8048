"""A ``time_field`` or ``document_key`` naming a field the rows lack, or a path that is
not one, is refused by ``config --strict`` and at start, naming the source, the option,
the field and the fix: for every kind of source whose rows' fields are known."""

from __future__ import annotations

import json
import logging
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
from cli_process import run_nautilus

from nautilus_ranking.cli import main
from nautilus_ranking.settings.time_entries import parse_source_paths
from nautilus_ranking.sources.mapped_fields import leading_field, path_problem

SOPS = [
    {"id": "sop-1", "title": "Restart the orders database", "body": "drain, then restart"},
    {"id": "sop-1", "title": "Restart the orders database", "body": "fail over first"},
]
ENTITIES = [{"id": "orders-db", "name": "orders db", "owner": "data"}]
EDGES = [{"src": "orders-db", "dst": "orders-api", "relation": "serves"}]
SOURCE = {
    "sqlite_table": "{id: sops, type: sqlite_table, path: t.db, seed: sops.jsonl, "
    "table: sops, search_columns: [title, body]",
    "sqlite_vector": "{id: sops, type: sqlite_vector, path: v.db, seed: sops.jsonl, "
    "text_fields: [title, body]",
    "sqlite_fts": "{id: sops, type: sqlite_fts, path: f.db, seed: sops.jsonl, "
    "columns: [title, body], stored: [publish_date]",
    "sqlite_graph": "{id: sops, type: sqlite_graph, path: g.db, entities: entities.jsonl, "
    "edges: edges.jsonl",
    "postgres_table": "{id: sops, type: postgres_table, dsn: 'postgresql://u@localhost/db', "
    "table: sops, columns: [title, body], seed: sops.jsonl",
    "pgvector": "{id: sops, type: pgvector, dsn: 'postgresql://u@localhost/db', "
    "table: sops, columns: [title, body], seed: sops.jsonl",
}


def write_jsonl(path: Path, rows: list[dict[str, object]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    write_jsonl(tmp_path / "sops.jsonl", SOPS)
    write_jsonl(tmp_path / "entities.jsonl", ENTITIES)
    write_jsonl(tmp_path / "edges.jsonl", EDGES)
    return tmp_path


def sources_file(folder: Path, kind: str, options: str) -> Path:
    path = folder / "nautilus.yaml"
    path.write_text(f"sources:\n  - {SOURCE[kind]}, {options}}}\n", encoding="utf-8")
    return path


@pytest.fixture
def in_process_cli() -> Iterator[None]:
    """main() configures logging for the process: undo it after the test."""
    yield
    structlog.reset_defaults()
    target = logging.getLogger("nautilus_ranking")
    for handler in list(target.handlers):
        target.removeHandler(handler)
    target.setLevel(logging.NOTSET)
    target.propagate = True


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_nautilus(*args, env=env)


def test_a_time_field_the_seed_lacks_fails_config_strict_naming_source_field_and_fix(
    folder: Path,
) -> None:
    """A new user's older SOP revision ranked first, with no error: the seed has no
    publish_date, so no revision was dated and none superseded."""
    path = sources_file(folder, "sqlite_table", "time_field: publish_date")
    result = run(
        "config", "--strict", "--config", str(path), env={"NAUTILUS_RANKING_SUPERSEDE": "true"}
    )
    assert result.returncode == 1, result.stdout
    assert "sources[0] (sops, sqlite_table)" in result.stderr
    assert "time_field 'publish_date': no row of seed file" in result.stderr
    assert "add 'publish_date' to the rows" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("kind", list(SOURCE))
@pytest.mark.parametrize("option", ["time_field", "document_key"])
def test_every_kind_of_source_refuses_a_field_its_rows_lack(
    folder: Path,
    kind: str,
    option: str,
    capsys: pytest.CaptureFixture[str],
    in_process_cli: None,
) -> None:
    if kind.startswith("p"):
        pytest.importorskip("psycopg")
    path = sources_file(folder, kind, f"{option}: publish_date")
    code = main(["config", "--strict", "--config", str(path)])
    out, err = capsys.readouterr()
    assert code == 1, out
    assert f"{option} 'publish_date': no row of" in err
    assert "(sops, " in err or "source 'sops'" in err
    assert "Traceback" not in err + out


@pytest.mark.parametrize("kind", list(SOURCE))
def test_a_field_the_rows_have_passes(
    folder: Path, kind: str, capsys: pytest.CaptureFixture[str], in_process_cli: None
) -> None:
    if kind.startswith("p"):
        pytest.importorskip("psycopg")
    field = "owner" if kind == "sqlite_graph" else "title"
    if kind == "sqlite_fts":
        field = "publish_date"
        write_jsonl(folder / "sops.jsonl", [{**r, "publish_date": "2024"} for r in SOPS])
    path = sources_file(folder, kind, f"time_field: {field}, document_key: id")
    code = main(["config", "--strict", "--config", str(path)])
    _, err = capsys.readouterr()
    assert code == 0, err


def test_the_broker_layout_reads_a_field_inside_metadata(
    folder: Path, capsys: pytest.CaptureFixture[str], in_process_cli: None
) -> None:
    pytest.importorskip("psycopg")
    for field, code in (("metadata.title", 0), ("title", 1)):
        path = sources_file(folder, "pgvector", f"layout: nautilus-broker, time_field: {field}")
        assert main(["config", "--strict", "--config", str(path)]) == code, capsys.readouterr()
        capsys.readouterr()


@pytest.mark.parametrize("bad", ["'[[['", "'" + "(" * 200 + "'"])
def test_a_path_that_is_not_a_path_is_refused_in_the_sources_file(
    folder: Path, bad: str, capsys: pytest.CaptureFixture[str], in_process_cli: None
) -> None:
    path = sources_file(folder, "sqlite_table", f"time_field: {bad}")
    code = main(["config", "--strict", "--config", str(path)])
    out, err = capsys.readouterr()
    assert code == 1, out
    assert "time_field: time_field" in err and "is not a path (not a JMESPath" in err
    assert "name a column or row key" in err and "Traceback" not in err


@pytest.mark.parametrize("bad", ["[[[", "(" * 3000])
def test_a_path_that_is_not_a_path_is_refused_in_the_settings(
    folder: Path,
    bad: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    in_process_cli: None,
) -> None:
    paths, problem = parse_source_paths("NAUTILUS_RANKING_TIME_FIELDS", f"sops:{bad},b:at")
    assert paths == {"b": "at"}
    assert problem is not None and problem.reason.startswith("not a path (not a JMESPath")
    assert "\n" not in problem.reason
    path = sources_file(folder, "sqlite_table", "time_field: title")
    monkeypatch.setenv("NAUTILUS_RANKING_TIME_FIELDS", f"sops:{bad}")
    code = main(["config", "--strict", "--config", str(path)])
    _, err = capsys.readouterr()
    assert code == 1 and "NAUTILUS_RANKING_TIME_FIELDS" in err and "not a path" in err


def test_serve_refuses_to_start_on_a_field_the_rows_lack(folder: Path) -> None:
    pytest.importorskip("uvicorn")
    path = sources_file(folder, "sqlite_vector", "document_key: doc")
    with socket.socket() as taken:  # were the file accepted, serve would stop at the port
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        result = run("serve", "--config", str(path), "--host", "127.0.0.1", "--port", port)
    assert result.returncode != 0
    assert "document_key 'doc': no row of seed file" in result.stderr
    assert "Traceback" not in result.stderr


def test_what_a_path_starts_from() -> None:
    assert leading_field("meta.modified") == "meta" and leading_field("hits[0].at") == "hits"
    assert leading_field("max_by(hits, &at)") is None and leading_field("[0]") is None
    assert path_problem("meta.modified") is None and path_problem("[[[") is not None
