"""Built data is never stale, never half-built, never someone else's file."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from nautilus_ranking import Broker, NautilusSettings
from nautilus_ranking.sources.sqlite.base import SqliteSource
from nautilus_ranking.sources.sqlite.graph import SqliteGraphSource
from nautilus_ranking.sources.sqlite.table import SqliteTableSource

ROWS = [
    {"id": "t1", "title": "Disk full on orders-db", "body": "WAL filled the disk"},
    {"id": "t2", "title": "Replica lag", "body": "replication lag near peak"},
]
CONFIG = """
sources:
  - {id: tickets, type: sqlite_table, path: shop/tickets.db, seed: tickets.jsonl,
     table: tickets, search_columns: [title]}
  - {id: notes, type: sqlite_fts, path: shop/notes.db, seed: tickets.jsonl, columns: [title, body]}
  - {id: vectors, type: sqlite_vector, path: shop/vectors.db, seed: tickets.jsonl,
     text_fields: [title, body], dim: 64}
  - {id: graph, type: sqlite_graph, path: shop/graph.db, entities: entities.jsonl,
     edges: edges.jsonl}
"""


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def shop(tmp_path: Path, text: str = CONFIG) -> Path:
    write_jsonl(tmp_path / "tickets.jsonl", ROWS)
    write_jsonl(
        tmp_path / "entities.jsonl",
        [
            {"id": "orders-db", "kind": "database", "owner": "dba", "tags": ["pg"]},
            {"id": "zebra-api", "name": "zebra-api", "team": "zoo"},
        ],
    )
    write_jsonl(
        tmp_path / "edges.jsonl", [{"src": "zebra-api", "dst": "orders-db", "relation": "reads"}]
    )
    path = tmp_path / "shop.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def ids(broker: Broker, query: str) -> dict[str, list[str]]:
    response = broker.request(query)
    assert response.sources_errored == []
    return {sid: [str(r["id"]) for r in rows] for sid, rows in response.data.items()}


def test_a_changed_seed_is_answered_on_the_next_query(tmp_path: Path) -> None:
    """Item 1: appending a row used to leave every SQLite source answering '(no rows)'."""
    broker = Broker.from_config(shop(tmp_path))
    assert ids(broker, "zebra")["tickets"] == []
    with (tmp_path / "tickets.jsonl").open("a", encoding="utf-8") as seed:
        seed.write(json.dumps({"id": "t3", "title": "zebra stripes", "body": "zebra"}) + "\n")
    with capture_logs() as logs:
        found = ids(broker, "zebra")
    assert found["tickets"] == found["notes"] == found["vectors"] == ["t3"]
    reasons = {e["source_id"]: e["reason"] for e in logs if e["event"] == "source_rebuilding"}
    assert reasons == {
        "tickets": "the seed changed",
        "notes": "the seed changed",
        "vectors": "the seed changed",
    }


def test_touching_a_seed_does_not_rebuild(tmp_path: Path) -> None:
    broker = Broker.from_config(shop(tmp_path))
    ids(broker, "disk")
    built = (Path(os.environ["NAUTILUS_DATA_DIR"]) / "shop" / "tickets.db").stat().st_mtime_ns
    os.utime(tmp_path / "tickets.jsonl")
    with capture_logs() as logs:
        ids(broker, "disk")
    assert not [e for e in logs if e["event"] == "source_rebuilding"]
    after = (Path(os.environ["NAUTILUS_DATA_DIR"]) / "shop" / "tickets.db").stat().st_mtime_ns
    assert after == built


def test_fixing_an_option_rebuilds_in_a_new_process(tmp_path: Path) -> None:
    """Item 1: fixing a column used to have no effect until the database was deleted."""
    path = shop(tmp_path, CONFIG.replace("columns: [title, body]", "columns: [title]"))
    assert ids(Broker.from_config(path), "WAL")["notes"] == []  # body not indexed yet
    path.write_text(CONFIG, encoding="utf-8")
    with capture_logs() as logs:
        assert ids(Broker.from_config(path), "WAL")["notes"] == ["t1"]
    assert {"source_id": "notes", "reason": "the source's options changed"}.items() <= next(
        e for e in logs if e["event"] == "source_rebuilding"
    ).items()


def test_the_vector_source_rebuilds_when_the_embedder_model_changes(tmp_path: Path) -> None:
    path = shop(tmp_path)
    ids(Broker.from_config(path), "disk")
    with capture_logs() as logs:
        ids(Broker.from_config(path), "disk")  # same model: nothing to do
        path.write_text(CONFIG.replace("dim: 64", "dim: 32"), encoding="utf-8")
        ids(Broker.from_config(path), "disk")
    assert [e["reason"] for e in logs if e["event"] == "source_rebuilding"] == [
        "the embedder model changed"
    ]


def test_rebuild_forces_a_build_and_keeps_the_database_in_place(tmp_path: Path) -> None:
    broker = Broker.from_config(shop(tmp_path))
    ids(broker, "disk")
    source = broker.sources[0]
    assert isinstance(source, SqliteSource)
    with capture_logs() as logs:
        assert source.rebuild() == "forced"
    assert [e["reason"] for e in logs if e["event"] == "source_rebuilding"] == ["forced"]
    assert ids(broker, "disk")["tickets"] == ["t1"]
    leftovers = [p.name for p in source.path.parent.iterdir() if p.name.endswith(".partial")]
    assert leftovers == []


def test_a_database_built_before_fingerprints_is_rebuilt_not_refused(tmp_path: Path) -> None:
    import sqlite3

    data = Path(os.environ["NAUTILUS_DATA_DIR"]) / "shop"
    data.mkdir(parents=True)
    old = sqlite3.connect(data / "tickets.db")
    old.execute("CREATE TABLE tickets (id, title)")
    old.commit()
    old.close()
    with capture_logs() as logs:
        assert ids(Broker.from_config(shop(tmp_path)), "disk")["tickets"] == ["t1"]
    assert any(e.get("reason") == "built by an older nautilus" for e in logs)


def test_four_brokers_on_a_fresh_data_dir_each_in_a_thread_all_succeed(tmp_path: Path) -> None:
    """Several brokers building the same files at once broke each other."""
    path = shop(tmp_path)
    brokers = [Broker.from_config(path) for _ in range(4)]
    barrier = threading.Barrier(4)
    results: list[Any] = [None] * 4

    def ask(i: int) -> None:
        barrier.wait()
        try:
            results[i] = brokers[i].request("disk zebra")
        except Exception as exc:  # recorded and asserted on below
            results[i] = exc

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    for response in results:
        assert not isinstance(response, Exception), response
        assert response.sources_errored == []
        assert response.data["tickets"][0]["id"] == "t1"
    built = sorted(
        p.name
        for p in (Path(os.environ["NAUTILUS_DATA_DIR"]) / "shop").iterdir()
        if not p.name.startswith(".")
    )
    assert built == ["graph.db", "notes.db", "tickets.db", "vectors.db"]


def test_graph_rows_keep_the_users_fields_and_gain_none(tmp_path: Path) -> None:
    """Item 7: the graph dropped extra fields and added "kind": null, "team": null."""
    response = Broker.from_config(shop(tmp_path)).request("zebra")
    rows = response.data["graph"]
    assert rows[0] == {
        "id": "zebra-api",
        "name": "zebra-api",
        "team": "zoo",
        "relation": "matched",
        "direction": None,
        "via": None,
        "edge": None,
    }
    assert rows[1] == {
        "id": "orders-db",
        "kind": "database",
        "owner": "dba",
        "tags": ["pg"],
        "relation": "reads",
        "direction": "out",
        "via": "zebra-api",
        "edge": "zebra-api reads orders-db",
    }


def search(source: SqliteSource, query: str) -> list[dict[str, Any]]:
    return asyncio.run(source.search(query, {}, 30))


def test_table_matching_folds_case_in_every_script(tmp_path: Path) -> None:
    """Item 11: SQLite's LIKE folds ASCII only; uppercase Cyrillic was missed."""
    seed = write_jsonl(
        tmp_path / "t.jsonl",
        [
            {"id": 1, "title": "СЕРВЕР НЕ ОТВЕЧАЕТ"},
            {"id": 2, "title": "ÉCHEC DU DISQUE"},
            {"id": 3, "title": "nothing"},
        ],
    )
    table = SqliteTableSource("t", tmp_path / "t.db", seed, "t", ["title"])
    assert [r["id"] for r in search(table, "сервер")] == [1]
    assert [r["id"] for r in search(table, "échec")] == [2]
    assert search(table, "сервер")[0] == {"id": 1, "title": "СЕРВЕР НЕ ОТВЕЧАЕТ"}


def test_a_very_long_query_word_does_not_break_the_table(tmp_path: Path) -> None:
    """Item 15: a word over 50,000 bytes made SQLite refuse the LIKE pattern."""
    seed = write_jsonl(
        tmp_path / "t.jsonl", [{"id": 1, "title": "disk " + "x" * 300}, {"id": 2, "title": "lag"}]
    )
    table = SqliteTableSource("t", tmp_path / "t.db", seed, "t", ["title"])
    assert [r["id"] for r in search(table, "x" * 60_000)] == [1]
    assert [r["id"] for r in search(table, "é" * 60_000 + " lag")] == [2]


def test_nested_seed_values_are_stored_as_json_text(tmp_path: Path) -> None:
    seed = write_jsonl(tmp_path / "t.jsonl", [{"id": 1, "title": "disk", "tags": ["a", "b"]}])
    table = SqliteTableSource("t", tmp_path / "t.db", seed, "t", ["title"])
    assert search(table, "disk") == [{"id": 1, "title": "disk", "tags": '["a", "b"]'}]


def test_a_data_path_with_uri_characters_opens(tmp_path: Path) -> None:
    seed = write_jsonl(tmp_path / "t.jsonl", ROWS)
    table = SqliteTableSource("t", tmp_path / "a?b#c%20 d.db", seed, "t", ["title"])
    assert [r["id"] for r in search(table, "disk")] == ["t1"]


def test_graph_source_built_directly_still_needs_an_id_per_entity(tmp_path: Path) -> None:
    entities = write_jsonl(tmp_path / "e.jsonl", [{"name": "no id"}])
    edges = write_jsonl(tmp_path / "g.jsonl", [])
    graph = SqliteGraphSource("g", tmp_path / "g.db", entities, edges)
    with pytest.raises(ValueError, match="row 1 has no 'id'"):
        search(graph, "id")


def test_the_settings_data_dir_is_where_databases_go(tmp_path: Path) -> None:
    settings = NautilusSettings(data_dir=tmp_path / "elsewhere")
    ids(Broker.from_config(shop(tmp_path), settings), "disk")
    assert (tmp_path / "elsewhere" / "shop" / "tickets.db").exists()


def test_a_query_that_is_not_a_string_is_a_clear_error(tmp_path: Path) -> None:
    """Item 11: request(None) failed every source with AttributeError."""
    broker = Broker.from_config(shop(tmp_path))
    with pytest.raises(TypeError, match="query must be a string, got NoneType"):
        broker.request(None)  # type: ignore[arg-type]


def test_json_ranking_entries_say_which_row_they_are(tmp_path: Path) -> None:
    """Item 11: `nautilus-ranking query --json | jq '.ranking[0]'` showed no id."""
    broker = Broker.from_config(shop(tmp_path), NautilusSettings(ranking_top_k=3))
    ranking = broker.request("disk full").to_dict()["ranking"]
    assert ranking[0]["id"] == "t1" and ranking[0]["source_id"] in {"tickets", "notes", "vectors"}


def test_a_slow_build_is_not_cut_off_by_the_query_timeout(tmp_path: Path) -> None:
    """timeout_s bounds the answer, not the build: a first onnx build used to time out."""
    import sqlite3
    import time

    class SlowTable(SqliteTableSource):
        def build(self, connection: sqlite3.Connection) -> None:
            time.sleep(0.5)
            super().build(connection)

    seed = write_jsonl(tmp_path / "t.jsonl", ROWS)
    slow = SlowTable("slow", tmp_path / "slow.db", seed, "t", ["title"], timeout_s=0.1)
    response = Broker([slow]).request("disk")
    assert response.sources_errored == []
    assert [r["id"] for r in response.data["slow"]] == ["t1"]


def test_an_up_to_date_database_is_served_without_taking_the_build_lock(tmp_path: Path) -> None:
    """Databases built at deployment may sit in a read-only folder: reading needs no lock."""
    path = shop(tmp_path)
    ids(Broker.from_config(path), "disk")
    folder = Path(os.environ["NAUTILUS_DATA_DIR"]) / "shop"
    for lock in folder.glob(".*.lock"):
        lock.unlink()
    assert ids(Broker.from_config(path), "disk")["tickets"] == ["t1"]
    assert list(folder.glob(".*.lock")) == []
