"""Where a row's id comes from: every source type takes ``id_field`` and answers that
field's value as the row's ``id``; ``nautilus-ranking config --strict`` says when a seed's rows
have none; the retrievers name a row without one by its content, never by its rank.
Real seeds, real built SQLite files, the CLI run in-process (what it prints is tested)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from fakes import write_jsonl
from inprocess import run_cli

from nautilus_ranking import Broker
from nautilus_ranking.retrievers.source import HitSource, row_key
from nautilus_ranking.sources.factory import build_sources

INCIDENTS = [
    {"key": "INC-7", "title": "disk full on the orders database", "team": "db"},
    {"key": "INC-9", "title": "orders replica lag after the disk alarm", "team": "db"},
]
TYPES = {
    "sqlite_table": "table: incidents, search_columns: [title]",
    "sqlite_fts": "columns: [title]",
    "sqlite_vector": "text_fields: [title]",
}


def cli(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(args, folder, {"NAUTILUS_DATA_DIR": str(folder / "data")})


def sources(folder: Path, kind: str, id_field: str | None) -> Path:
    write_jsonl(folder / "incidents.jsonl", INCIDENTS)
    option = f", id_field: {id_field}" if id_field else ""
    path = folder / "nautilus.yaml"
    path.write_text(
        f"sources:\n  - {{id: incidents, type: {kind}, path: incidents.db, "
        f"seed: incidents.jsonl, {TYPES[kind]}{option}}}\n",
        encoding="utf-8",
    )
    return path


@pytest.mark.parametrize("kind", sorted(TYPES))
def test_every_type_answers_its_id_field_as_the_row_id(tmp_path: Path, kind: str) -> None:
    path = sources(tmp_path, kind, "key")
    assert cli(tmp_path, "config", "--strict", "--config", str(path)).returncode == 0
    query = cli(tmp_path, "query", "disk orders", "--json", "--config", str(path))
    assert query.returncode == 0, query.stderr
    rows = json.loads(query.stdout)["data"]["incidents"]
    assert sorted(r["id"] for r in rows) == ["INC-7", "INC-9"]
    assert all(r["id"] == r["key"] for r in rows)  # the field itself stays


def test_the_graph_takes_an_id_field_for_its_entities(tmp_path: Path) -> None:
    write_jsonl(
        tmp_path / "services.jsonl",
        [{"name": "orders-db", "ref": "svc-1"}, {"name": "checkout-api", "ref": "svc-2"}],
    )
    write_jsonl(
        tmp_path / "edges.jsonl", [{"src": "svc-2", "dst": "svc-1", "relation": "writes_to"}]
    )
    path = tmp_path / "nautilus.yaml"
    path.write_text(
        "sources:\n  - {id: graph, type: sqlite_graph, path: g.db, "
        "entities: services.jsonl, edges: edges.jsonl, id_field: ref}\n"
    )
    query = cli(tmp_path, "query", "orders", "--json", "--config", str(path))
    assert query.returncode == 0, query.stderr
    rows = json.loads(query.stdout)["data"]["graph"]
    assert [(r["id"], r["relation"]) for r in rows] == [
        ("svc-1", "matched"),
        ("svc-2", "writes_to"),
    ]


@pytest.mark.parametrize("kind", sorted(TYPES))
def test_config_says_when_rows_have_no_id(tmp_path: Path, kind: str) -> None:
    path = sources(tmp_path, kind, None)
    strict = cli(tmp_path, "config", "--strict", "--config", str(path))
    assert strict.returncode == 1
    assert (
        "source 'incidents': 2 of 2 rows of " in strict.stderr
        and "have no 'id' (the id_field)" in strict.stderr
        and "set id_field to the seed's id field (unique in every row: key, title)" in strict.stderr
    ), strict.stderr
    shown = cli(tmp_path, "config", "--config", str(path))
    assert shown.returncode == 0 and "warning: source 'incidents': 2 of 2 rows" in shown.stdout
    listing = json.loads(cli(tmp_path, "config", "--json", "--config", str(path)).stdout)
    assert len(listing["sources_file"]["warnings"]) == 1


def test_a_row_without_an_id_keeps_one_key_whatever_its_rank(tmp_path: Path) -> None:
    write_jsonl(
        tmp_path / "notes.jsonl",
        [{"title": "disk disk disk full"}, {"title": "orders orders disk"}],
    )
    path = tmp_path / "nautilus.yaml"
    path.write_text(
        "sources:\n  - {id: notes, type: sqlite_fts, path: n.db, "
        "seed: notes.jsonl, columns: [title]}\n"
    )
    built, limit = build_sources(path, tmp_path / "data", "hashing")
    broker = Broker(built, limit=limit)
    try:
        source = HitSource(broker=broker)
        first = {hit.fields["title"]: hit for hit in source.hits("disk")}
        second = {hit.fields["title"]: hit for hit in source.hits("orders disk")}
    finally:
        broker.close()
    row = "disk disk disk full"
    assert first[row].rank != second[row].rank  # its place changed …
    assert first[row].key == second[row].key  # … its name did not
    assert first[row].key.startswith("notes:sha256-") and len(first[row].key) == 29
    assert len({hit.key for hit in first.values()}) == 2


def test_row_key_names_a_row_by_its_id_else_by_its_content() -> None:
    assert row_key("kb", "a1", {"id": "a1"}) == "kb:a1"
    assert row_key("kb", 0, {"id": 0}) == "kb:0"
    one = row_key("kb", None, {"title": "x", "similarity": 0.9, "bm25": -3.0})
    assert one == row_key("kb", None, {"title": "x", "similarity": 0.1})  # per-query fields
    assert one != row_key("kb", None, {"title": "y"})


def test_a_langchain_document_leaves_out_the_id_whatever_its_field(tmp_path: Path) -> None:
    from nautilus_ranking.retrievers.langchain import NautilusRetriever

    path = sources(tmp_path, "sqlite_table", "key")
    with Broker.from_config(path) as broker:
        docs = NautilusRetriever(broker=broker).invoke("disk orders")
    assert sorted(d.metadata["id"] for d in docs) == ["INC-7", "INC-9"]
    for doc in docs:
        assert not doc.page_content.startswith("INC-"), doc.page_content
        assert doc.metadata["id"] not in doc.page_content.splitlines()
        assert doc.page_content.splitlines()[0] in {i["title"] for i in INCIDENTS}


def test_rows_without_an_id_are_warned_about_at_query_time(tmp_path: Path) -> None:
    from structlog.testing import capture_logs

    path = sources(tmp_path, "sqlite_table", None)  # the rows' id is under "key"
    with Broker.from_config(path) as broker, capture_logs() as logs:
        broker.request("disk orders")
        broker.request("orders replica")  # once a source, not once a request
    warned = [e for e in logs if e["event"] == "source_rows_without_id"]
    assert len(warned) == 1, logs
    assert warned[0]["source_id"] == "incidents" and "id_field" in warned[0]["action"]
    assert warned[0]["count"] == warned[0]["rows"] > 0
    query = cli(tmp_path, "query", "disk orders", "--config", str(path))
    assert query.returncode == 0 and "source_rows_without_id" in query.stderr
    keyed = sources(tmp_path, "sqlite_table", "key")
    quiet = cli(tmp_path, "query", "disk orders", "--config", str(keyed))
    assert quiet.returncode == 0 and "source_rows_without_id" not in quiet.stderr
