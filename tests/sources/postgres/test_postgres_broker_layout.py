"""``layout: nautilus-broker``: ``nautilus-ranking load`` writes a pgvector table as the
Nautilus broker's ``pgvector`` adapter reads it (``SELECT id, metadata, embedding``),
against the real embedded PostgreSQL and through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from cli_process import run_nautilus
from postgres_fixtures import execute

from nautilus_ranking.embedders import embedder_from_name
from nautilus_ranking.sources.factory import load_sources
from nautilus_ranking.sources.postgres.load import load_postgres, postgres_specs
from nautilus_ranking.sources.postgres.load_steps import LoadError

ARTICLES = [
    {"id": "KB-1", "title": "Reset your password", "body": "use the forgot password link"},
    {"id": "KB-2", "title": "Export invoices", "body": "download a CSV of every invoice"},
    {"id": "KB-3", "title": "Two-factor login", "body": "scan the QR code", "tags": ["auth"]},
]


def write_files(folder: Path, dsn: str, table: str, dim: int = 1024) -> Path:
    with (folder / "kb.jsonl").open("w", encoding="utf-8") as handle:
        for article in ARTICLES:
            handle.write(json.dumps(article) + "\n")
    path = folder / "load.yaml"
    path.write_text(
        f"""sources:
  - {{id: kb, type: pgvector, layout: nautilus-broker, dsn: "{dsn}", table: {table},
     columns: [title, body], dim: {dim}, seed: kb.jsonl}}
""",
        encoding="utf-8",
    )
    return path


def test_the_broker_layout_is_id_metadata_and_an_indexed_vector(
    pg_dsn: str, tmp_path: Path
) -> None:
    path = write_files(tmp_path, pg_dsn, "kb_broker")
    specs = postgres_specs(load_sources(path).specs)
    report = load_postgres(specs, tmp_path, "hashing", replace=True)[0]
    assert (report.loaded, report.in_table) == (3, 3)
    columns = execute(
        pg_dsn,
        "SELECT column_name, format_type(atttypid, atttypmod) FROM information_schema.columns "
        "JOIN pg_attribute ON attrelid = 'kb_broker'::regclass AND attname = column_name "
        "WHERE table_name = 'kb_broker' ORDER BY ordinal_position",
    )
    assert columns == [("id", "text"), ("metadata", "jsonb"), ("embedding", "vector(1024)")]
    # the broker's own query, as its adapter runs it: every field but the id in metadata
    rows = execute(pg_dsn, "SELECT id, metadata::text FROM kb_broker ORDER BY id")
    assert [r[0] for r in rows] == ["KB-1", "KB-2", "KB-3"]
    assert json.loads(rows[2][1]) == {
        "title": "Two-factor login",
        "body": "scan the QR code",
        "tags": ["auth"],
    }
    # the vectors are the hashing embedder's at dim 1024, of title and body
    (stored,) = execute(pg_dsn, "SELECT embedding::real[] FROM kb_broker WHERE id = 'KB-1'")[0]
    expected = embedder_from_name("hashing", 1024).embed(
        "Reset your password use the forgot password link"
    )
    np.testing.assert_allclose(np.asarray(stored), np.asarray(expected), rtol=1e-6, atol=1e-7)
    indexes = execute(pg_dsn, "SELECT indexdef FROM pg_indexes WHERE tablename = 'kb_broker'")
    assert any("hnsw" in d and "vector_cosine_ops" in d for (d,) in indexes), indexes
    model = execute(
        pg_dsn,
        "SELECT model, dim FROM nautilus_vector_models WHERE table_name = 'kb_broker'",
    )
    assert model and model[0][1] == 1024
    # nearest to a question about passwords, by the adapter's ORDER BY embedding <=> $E
    query = embedder_from_name("hashing", 1024).embed("forgot my password")
    literal = "[" + ",".join(repr(float(x)) for x in query) + "]"
    nearest = execute(
        pg_dsn, "SELECT id FROM kb_broker ORDER BY embedding <=> %s::vector LIMIT 1", [literal]
    )
    assert nearest == [("KB-1",)]


def test_loading_twice_upserts_and_prune_removes_what_left_the_seed(
    pg_dsn: str, tmp_path: Path
) -> None:
    path = write_files(tmp_path, pg_dsn, "kb_broker_again")
    specs = postgres_specs(load_sources(path).specs)
    load_postgres(specs, tmp_path, "hashing", replace=True)
    again = load_postgres(specs, tmp_path, "hashing")[0]
    assert (again.loaded, again.in_table) == (3, 3)
    (tmp_path / "kb.jsonl").write_text(json.dumps(ARTICLES[0]) + "\n", encoding="utf-8")
    pruned = load_postgres(specs, tmp_path, "hashing", prune=True)[0]
    assert (pruned.pruned, pruned.in_table) == (2, 1)


def test_a_table_in_the_column_layout_is_refused_by_name(pg_dsn: str, tmp_path: Path) -> None:
    execute(pg_dsn, "DROP TABLE IF EXISTS kb_columns")
    execute(pg_dsn, "CREATE TABLE kb_columns (id text PRIMARY KEY, title text)")
    path = write_files(tmp_path, pg_dsn, "kb_columns")
    specs = postgres_specs(load_sources(path).specs)
    try:
        load_postgres(specs, tmp_path, "hashing")
    except LoadError as exc:
        assert "without the column(s) metadata of layout nautilus-broker" in str(exc)
        assert "--replace" in str(exc)
    else:
        raise AssertionError("a table without metadata was loaded into")


def test_an_unknown_layout_is_a_clear_error(pg_dsn: str, tmp_path: Path) -> None:
    path = write_files(tmp_path, pg_dsn, "kb_bad")
    path.write_text(path.read_text().replace("nautilus-broker", "broker"), encoding="utf-8")
    done = run_nautilus("load", "--config", str(path))
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert "layout" in done.stderr and "nautilus-broker" in done.stderr


def test_the_cli_loads_the_broker_layout(pg_dsn: str, tmp_path: Path) -> None:
    path = write_files(tmp_path, pg_dsn, "kb_broker_cli")
    done = run_nautilus("load", "--config", str(path), "--replace")
    assert done.returncode == 0, done.stderr
    assert "kb (pgvector): 3 rows loaded into kb_broker_cli (3 in the table)" in done.stdout
    assert execute(pg_dsn, "SELECT count(*) FROM kb_broker_cli WHERE metadata ? 'title'") == [(3,)]
