"""Hostile sources files and queries: duplicate YAML keys, data paths that cannot be a
database, SQLite's own table names, queries of 100,000 words, NUL and lone surrogates
in a PostgreSQL web-search query, and rows deleted from a loaded seed. Real subprocess
CLI runs, real SQLite files and the real embedded PostgreSQL."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from cli_process import run_nautilus
from fakes import write_jsonl
from postgres_fixtures import execute

from nautilus_ranking import Broker
from nautilus_ranking.sources.factory import build_sources

DOCS = [
    {"id": "d1", "title": "disk full on the orders database"},
    {"id": "d2", "title": "zebra crossing replica lag"},
]


def cli(
    folder: Path,
    *args: str | bytes,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    env = {"NAUTILUS_DATA_DIR": str(folder / "data"), **(env or {})}
    return run_nautilus(*args, env=env, cwd=folder)


def strict(folder: Path, sources: str) -> subprocess.CompletedProcess[str]:
    write_jsonl(folder / "docs.jsonl", DOCS)
    (folder / "nautilus.yaml").write_text(sources, encoding="utf-8")
    return cli(folder, "config", "--strict", "--config", str(folder / "nautilus.yaml"))


@pytest.mark.parametrize(
    ("sources", "message"),
    [
        (
            "sources:\n  - id: a\n    type: sqlite_fts\n    path: a.db\n    path: b.db\n"
            "    seed: docs.jsonl\n    columns: [title]\n",
            "nautilus.yaml:5: duplicate key 'path' (first on line 4); give each option once",
        ),
        (
            "sources:\n  - {id: a, type: sqlite_fts, path: a.db, seed: docs.jsonl, "
            "columns: [title]}\nsources: []\n",
            "nautilus.yaml:3: duplicate key 'sources' (first on line 1)",
        ),
        (
            "sources:\n  - {id: a, type: sqlite_fts, path: shop, seed: docs.jsonl, "
            "columns: [title]}\n",
            "path 'shop' is a directory",
        ),
        (
            "sources:\n  - {id: a, type: sqlite_fts, path: " + "n" * 230 + ".db, seed: docs.jsonl, "
            "columns: [title]}\n",
            "file name longer than 200 bytes",
        ),
        (
            "sources:\n  - {id: a, type: sqlite_table, path: a.db, seed: docs.jsonl, "
            "table: sqlite_master, search_columns: [title]}\n",
            "table name 'sqlite_master' is reserved",
        ),
        (
            "sources:\n  - {id: a, type: sqlite_table, path: a.db, seed: docs.jsonl, "
            "table: SQLITE_sequence, search_columns: [title]}\n",
            "is reserved",
        ),
    ],
    ids=[
        "duplicate-option",
        "duplicate-top-level",
        "path-directory",
        "path-too-long",
        "sqlite-master",
        "sqlite-sequence",
    ],
)
def test_config_strict_refuses_what_cannot_work(tmp_path: Path, sources: str, message: str) -> None:
    (tmp_path / "data" / "shop").mkdir(parents=True)
    result = strict(tmp_path, sources)
    assert result.returncode == 1, result.stdout + result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr


def test_a_yaml_merge_key_may_still_be_overridden(tmp_path: Path) -> None:
    result = strict(
        tmp_path,
        "sources:\n"
        "  - &first {id: a, type: sqlite_fts, path: a.db, seed: docs.jsonl, "
        "columns: [title]}\n  - {<<: *first, id: b, path: b.db}\n",
    )
    assert result.returncode == 0, result.stderr


def test_sqlite_fts_searches_the_first_32_words_of_a_huge_query(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "docs.jsonl", DOCS)
    config = tmp_path / "nautilus.yaml"
    config.write_text(
        "sources:\n  - {id: notes, type: sqlite_fts, path: notes.db, "
        "seed: docs.jsonl, columns: [title]}\n",
        encoding="utf-8",
    )
    sources, limit = build_sources(config, tmp_path / "data", "hashing")
    broker = Broker(sources, limit=limit)
    filler = [f"w{i}" for i in range(120_000)]
    huge = broker.request(" ".join(["disk", *filler]))
    assert huge.sources_errored == [] and [r["id"] for r in huge.data["notes"]] == ["d1"]
    late = broker.request(" ".join([*filler[:40], "zebra"]))  # the 41st word does not count
    assert late.sources_errored == [] and late.data["notes"] == []
    assert [r["id"] for r in broker.request("zebra " + " ".join(filler)).data["notes"]] == ["d2"]


def fts_sources(folder: Path, dsn: str) -> Path:
    write_jsonl(folder / "docs.jsonl", DOCS)
    path = folder / "nautilus.yaml"
    path.write_text(
        f"""sources:
  - {{id: web, type: postgres_fts, dsn: "{dsn}", table: hostile_docs, columns: [title],
     tsvector_column: tsv, seed: docs.jsonl, match: all}}
""",
        encoding="utf-8",
    )
    return path


def test_nul_and_lone_surrogates_do_not_break_match_all(pg_dsn: str, tmp_path: Path) -> None:
    config = fts_sources(tmp_path, pg_dsn)
    assert cli(tmp_path, "load", "--config", str(config)).returncode == 0
    sources, limit = build_sources(config, tmp_path / "data", "hashing")
    broker = Broker(sources, limit=limit)
    try:
        for query in (
            "disk\x00full",
            "disk \ud800full",
            "\udcff disk full \x00",
            "\x00 \ud800",
            " ".join(["disk", "full"] + ["orders"] * 200),
        ):
            response = broker.request(query)
            assert response.sources_errored == [], (query, response.sources_errored)
            if query.strip("\x00 \ud800"):
                assert [r["id"] for r in response.data["web"]] == ["d1"], query
    finally:
        broker.close()
    # From the command line: an undecodable byte arrives as a lone surrogate.
    query = cli(tmp_path, "query", b"disk \xff full", "--config", str(config), "--json")
    assert query.returncode == 0, query.stderr
    body = json.loads(query.stdout)
    assert body["sources_errored"] == [] and body["data"]["web"][0]["id"] == "d1"


def test_load_prune_removes_rows_deleted_from_the_seed(pg_dsn: str, tmp_path: Path) -> None:
    config = fts_sources(tmp_path, pg_dsn).read_text().replace("hostile_docs", "pruned_docs")
    (tmp_path / "nautilus.yaml").write_text(config, encoding="utf-8")
    path = str(tmp_path / "nautilus.yaml")
    assert cli(tmp_path, "load", "--config", path).returncode == 0
    write_jsonl(tmp_path / "docs.jsonl", DOCS[:1])
    kept = cli(tmp_path, "load", "--config", path)
    assert kept.returncode == 0 and "(2 in the table)" in kept.stdout  # an upsert keeps it
    pruned = cli(tmp_path, "load", "--config", path, "--prune")
    assert pruned.returncode == 0, pruned.stderr
    assert "1 rows loaded into pruned_docs (1 in the table, 1 pruned)" in pruned.stdout
    assert execute(pg_dsn, "SELECT id FROM pruned_docs") == [("d1",)]
