"""The embedded SQLite sources, on real database files in a temporary folder."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from fakes import DOCS, write_jsonl

from nautilus_ranking import HashingEmbedder
from nautilus_ranking.sources.sqlite.base import SqliteSource
from nautilus_ranking.sources.sqlite.fts import SqliteFtsSource, fts_match_expression
from nautilus_ranking.sources.sqlite.graph import SqliteGraphSource
from nautilus_ranking.sources.sqlite.table import SqliteTableSource
from nautilus_ranking.sources.sqlite.vector import SqliteVectorSource


def search(source: SqliteSource, query: str, limit: int = 30) -> list[dict[str, Any]]:
    return asyncio.run(source.search(query, {}, limit))


@pytest.fixture
def fts(tmp_path: Path) -> SqliteFtsSource:
    seed = write_jsonl(tmp_path / "docs.jsonl", DOCS)
    return SqliteFtsSource("fts", tmp_path / "db" / "fts.db", seed, ["title", "body"])


def test_fts_builds_once_and_ranks_by_bm25(fts: SqliteFtsSource) -> None:
    assert not fts.path.exists()
    rows = search(fts, "disk full")
    assert fts.path.exists()
    assert rows[0]["id"] == "d1"
    assert set(rows[0]) == {"id", "title", "body", "bm25"}  # its own score beside the row
    assert [r["bm25"] for r in rows] == sorted(r["bm25"] for r in rows)  # lower is better
    mtime = fts.path.stat().st_mtime_ns
    search(fts, "lag")
    assert fts.path.stat().st_mtime_ns == mtime  # not rebuilt


def test_fts_database_is_opened_read_only(fts: SqliteFtsSource) -> None:
    search(fts, "disk")
    connection = sqlite3.connect(f"file:{fts.path}?mode=ro", uri=True)
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        connection.execute("DELETE FROM docs")
    connection.close()


@pytest.mark.parametrize(
    ("hostile", "plain"),
    [
        ('disk"', "disk"),
        ('"disk', "disk"),
        ("disk*", "disk"),
        ("title:disk", "title disk"),
        ("NEAR(replica lag)", "near replica lag"),
        ("replica AND lag", "replica and lag"),
        ("lag OR", "lag"),
        ("NOT lag", "not lag"),
        ("-lag", "lag"),
        ("^disk", "disk"),
        ("(disk", "disk"),
        ("disk'); DROP TABLE docs; --", "disk drop table docs"),
        ("{title body}: disk", "title body disk"),
    ],
)
def test_fts_query_syntax_in_user_text_is_plain_words(
    fts: SqliteFtsSource, hostile: str, plain: str
) -> None:
    assert search(fts, hostile) == search(fts, plain)


@pytest.mark.parametrize(
    "query", ["", "   ", '"""', "***", "the of and", "😀" * 50, "x" * 100_000, "\x00disk"]
)
def test_fts_odd_queries_never_raise(fts: SqliteFtsSource, query: str) -> None:
    assert isinstance(search(fts, query), list)


def test_fts_match_expression_quotes_every_word() -> None:
    assert fts_match_expression('NEAR("a" b*)') == '"near" OR "b"'


def test_table_filters_by_keyword_in_table_order(tmp_path: Path) -> None:
    seed = write_jsonl(tmp_path / "t.jsonl", DOCS)
    table = SqliteTableSource("sql", tmp_path / "t.db", seed, "tickets", ["title", "body"])
    assert [r["id"] for r in search(table, "lag disk")] == ["d1", "d2"]  # rowid order
    assert search(table, "disks")[0]["id"] == "d1"  # plural folds
    assert search(table, "lag", limit=1) == [
        {"id": "d2", "title": "Replica lag", "body": "replication lag of 20 minutes near peak"}
    ]


@pytest.mark.parametrize("query", ["%", "_", "100%", "a_b", "\\", "'; DROP TABLE tickets; --"])
def test_table_like_wildcards_in_user_text_match_literally(tmp_path: Path, query: str) -> None:
    seed = write_jsonl(tmp_path / "t.jsonl", DOCS)
    table = SqliteTableSource("sql", tmp_path / "t.db", seed, "tickets", ["title", "body"])
    rows = search(table, query)
    assert len(rows) < len(DOCS)


def test_table_rejects_odd_column_names(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="invalid column"):
        SqliteTableSource("sql", tmp_path / "t.db", tmp_path / "x", "t", ['title" OR 1=1 --'])


def test_graph_returns_matches_then_neighbours(tmp_path: Path) -> None:
    entities = write_jsonl(
        tmp_path / "e.jsonl",
        [
            {"id": "orders-db", "name": "orders-db", "kind": "database", "description": "orders"},
            {"id": "checkout", "name": "checkout", "kind": "service", "description": "cart"},
            {"id": "backup", "name": "backup", "kind": "storage", "description": "s3"},
            {"id": "dns", "name": "dns", "kind": "platform", "description": "resolver"},
        ],
    )
    edges = write_jsonl(
        tmp_path / "g.jsonl",
        [
            {"src": "checkout", "dst": "orders-db", "relation": "writes_to"},
            {"src": "orders-db", "dst": "backup", "relation": "backs_up_to"},
        ],
    )
    graph = SqliteGraphSource("graph", tmp_path / "g.db", entities, edges)
    rows = search(graph, "orders-db slow")
    assert [(r["id"], r["relation"], r["direction"], r["edge"]) for r in rows] == [
        ("orders-db", "matched", None, None),
        ("backup", "backs_up_to", "out", "orders-db backs_up_to backup"),
        ("checkout", "writes_to", "in", "checkout writes_to orders-db"),
    ]
    assert search(graph, "nothing here") == []


def test_graph_answers_a_changed_seed_and_never_shares_a_row(tmp_path: Path) -> None:
    """Entities are read once per database version: a changed seed (a rebuilt file) is
    answered on the next search, and each answer's rows are objects of its own."""
    entities = write_jsonl(
        tmp_path / "e.jsonl", [{"id": "orders-db", "name": "orders-db", "tags": ["db"]}]
    )
    edges = write_jsonl(tmp_path / "g.jsonl", [])
    graph = SqliteGraphSource("graph", tmp_path / "g.db", entities, edges)
    first = search(graph, "orders-db")
    first[0]["tags"].append("changed by a caller")
    assert search(graph, "orders-db") == [
        {
            "id": "orders-db",
            "name": "orders-db",
            "tags": ["db"],
            "relation": "matched",
            "direction": None,
            "via": None,
            "edge": None,
        }
    ]
    write_jsonl(
        entities,
        [
            {"id": "orders-db", "name": "orders-db", "tags": ["db"]},
            {"id": "payments", "name": "payments"},
        ],
    )
    assert [r["id"] for r in search(graph, "payments")] == ["payments"]


def test_vector_source_returns_json_native_vectors_with_their_model(tmp_path: Path) -> None:
    seed = write_jsonl(tmp_path / "v.jsonl", DOCS)
    source = SqliteVectorSource("vec", tmp_path / "v.db", seed, ["title", "body"])
    rows = search(source, "replication lag")
    assert rows[0]["id"] == "d2"
    assert rows[0]["embedding_model"] == HashingEmbedder(dim=1024).model_id
    assert len(rows[0]["embedding"]) == 1024
    assert all(type(x) is float for x in rows[0]["embedding"])
    json.dumps(rows)  # JSON-native: no numpy values


def test_vector_source_rebuilds_when_the_embedder_changes(tmp_path: Path) -> None:
    seed = write_jsonl(tmp_path / "v.jsonl", DOCS)
    path = tmp_path / "v.db"
    search(SqliteVectorSource("vec", path, seed, ["title"]), "disk")
    small = SqliteVectorSource("vec", path, seed, ["title"], HashingEmbedder(dim=64))
    rows = search(small, "disk")
    assert len(rows[0]["embedding"]) == 64
    assert rows[0]["embedding_model"] == "hashing-v2-64"


def test_bad_seed_line_fails_the_search_with_a_clear_message(tmp_path: Path) -> None:
    seed = tmp_path / "bad.jsonl"
    seed.write_text('{"id": 1}\nnot json\n', encoding="utf-8")
    source = SqliteTableSource("sql", tmp_path / "t.db", seed, "t", ["id"])
    with pytest.raises(ValueError, match=r"bad.jsonl:2: not valid JSON"):
        search(source, "x")
    left = [p.name for p in tmp_path.glob("*.db*") if not p.name.endswith(".lock")]
    assert left == []  # no half-built database left behind (only the build lock file)
