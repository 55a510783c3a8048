"""The PostgreSQL sources and `nautilus-ranking load`, on a real PostgreSQL 18 + pgvector."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fakes import write_jsonl
from postgres_fixtures import execute

from nautilus_ranking import NautilusSettings
from nautilus_ranking.embedders import HashingEmbedder
from nautilus_ranking.evaluation.evaluate import run_eval
from nautilus_ranking.evaluation.recommend import recommendation_lines
from nautilus_ranking.sources.factory import build_sources, load_source_specs
from nautilus_ranking.sources.postgres.base import PostgresSourceError
from nautilus_ranking.sources.postgres.dsn import mask_dsn
from nautilus_ranking.sources.postgres.fts import PostgresFtsSource
from nautilus_ranking.sources.postgres.load import load_postgres, postgres_specs
from nautilus_ranking.sources.postgres.load_steps import LoadError
from nautilus_ranking.sources.postgres.table import PostgresTableSource
from nautilus_ranking.sources.postgres.vector import PgvectorSource, VectorModelMismatchError

DOCS = [
    {
        "id": "d1",
        "title": "Disk almost full on the orders database",
        "body": "WAL files filled the disk; drop the stale replication slot.",
        "severity": 2,
    },
    {
        "id": "d2",
        "title": "Kafka broker disk full",
        "body": "Retention too long on the audit topic; the broker ran out of disk.",
        "severity": 3,
    },
    {
        "id": "d3",
        "title": "Users logged out of their sessions",
        "body": "Redis failover lost the session keys; users had to log in again.",
        "severity": 2,
    },
    {
        "id": "d4",
        "title": "Discount code 100% off applied twice",
        "body": "A promo_code with an underscore matched every cart.",
        "severity": 1,
        "tags": ["billing", "promo"],
    },
]


def sources_file(folder: Path, dsn: str, extra: str = "") -> Path:
    write_jsonl(folder / "docs.jsonl", DOCS)
    path = folder / "sources.yaml"
    path.write_text(
        f"""
sources:
  - id: fts
    type: postgres_fts
    dsn: {dsn}
    table: fts_docs
    columns: [title, body]
    tsvector_column: search_tsv
    seed: docs.jsonl
  - id: fts_expr
    type: postgres_fts
    dsn: {dsn}
    table: fts_expr_docs
    columns: [title, body]
    seed: docs.jsonl
  - id: vec
    type: pgvector
    dsn: {dsn}
    table: vec_docs
    columns: [title, body]
    dim: 256
    seed: docs.jsonl
  - id: tab
    type: postgres_table
    dsn: {dsn}
    table: tab_docs
    columns: [title, body]
    seed: docs.jsonl
{extra}""",
        encoding="utf-8",
    )
    return path


@pytest.fixture(scope="module")
def loaded(pg_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = sources_file(tmp_path_factory.mktemp("sources"), pg_dsn)
    load_postgres(postgres_specs(load_source_specs(path).specs), path.parent, "hashing")
    return path


def search(source: Any, query: str, limit: int = 10) -> list[dict[str, Any]]:
    try:
        return asyncio.run(source.search(query, {}, limit))  # type: ignore[no-any-return]
    finally:
        source.close()


def built(path: Path, source_id: str, embedder: str = "hashing") -> Any:
    sources, _ = build_sources(path, path.parent / "data", embedder)
    wanted = [s for s in sources if s.id == source_id]
    for other in sources:
        if other is not wanted[0]:
            other.close()
    return wanted[0]


def test_fts_orders_by_ts_rank_cd_and_returns_the_rank(loaded: Path) -> None:
    rows = search(built(loaded, "fts"), "disk full")
    assert [r["id"] for r in rows][:2] in (["d1", "d2"], ["d2", "d1"])
    assert {r["id"] for r in rows} == {"d1", "d2"}
    ranks = [r["rank"] for r in rows]
    assert ranks == sorted(ranks, reverse=True) and all(r > 0 for r in ranks)
    assert "search_tsv" not in rows[0]  # the tsvector stays in the database
    assert rows == json.loads(json.dumps(rows))  # JSON-native


def test_fts_over_an_expression_matches_the_generated_column(loaded: Path) -> None:
    by_column = search(built(loaded, "fts"), "sessions redis")
    by_expression = search(built(loaded, "fts_expr"), "sessions redis")
    assert [r["id"] for r in by_column] == [r["id"] for r in by_expression] == ["d3"]
    assert by_column[0]["rank"] == pytest.approx(by_expression[0]["rank"])


def test_fts_match_all_takes_web_search_syntax(pg_dsn: str, loaded: Path) -> None:
    source = PostgresFtsSource(
        "all", pg_dsn, "fts_docs", ["title", "body"], tsvector_column="search_tsv", match="all"
    )
    assert [r["id"] for r in search(source, "disk -kafka")] == ["d1"]
    source = PostgresFtsSource(
        "all", pg_dsn, "fts_docs", ["title", "body"], tsvector_column="search_tsv", match="all"
    )
    assert search(source, '"kafka broker" sessions') == []


def test_pgvector_orders_by_cosine_distance_like_numpy(loaded: Path) -> None:
    source = built(loaded, "vec")
    query = "users lost their session after a failover"
    rows = search(source, query)
    embedder = HashingEmbedder(dim=256)
    q = np.asarray(embedder.embed(query))
    expected = {}
    for doc in DOCS:
        v = np.asarray(embedder.embed(f"{doc['title']} {doc['body']}"))
        expected[doc["id"]] = 1 - float(v @ q / (np.linalg.norm(v) * np.linalg.norm(q)))
    assert [r["id"] for r in rows] == sorted(expected, key=expected.__getitem__)
    for row in rows:
        assert row["distance"] == pytest.approx(expected[row["id"]], abs=1e-5)
        assert isinstance(row["embedding"], list) and len(row["embedding"]) == 256
        assert all(isinstance(x, float) for x in row["embedding"])
        assert row["embedding_model"] == "hashing-v2-256"
    assert rows == json.loads(json.dumps(rows))


def test_pgvector_refuses_a_query_embedded_by_another_model(pg_dsn: str, loaded: Path) -> None:
    other = PgvectorSource(
        "vec", pg_dsn, "vec_docs", ["title", "body"], embedder=HashingEmbedder(dim=512)
    )
    with pytest.raises(VectorModelMismatchError) as info:
        search(other, "disk full")
    assert "'hashing-v2-256'" in str(info.value) and "'hashing-v2-512'" in str(info.value)
    assert "embedder and dim that loaded the table" in str(info.value)
    onnx_query = PgvectorSource(
        "vec", pg_dsn, "vec_docs", ["title", "body"], embedder=HashingEmbedder(dim=256)
    )
    onnx_query.model_id = "all-MiniLM-L6-v2-onnx-int8-matmul"  # as if the query were onnx's
    with pytest.raises(VectorModelMismatchError) as info:
        search(onnx_query, "disk full")
    assert "(set NAUTILUS_EMBEDDER=hashing, or reload" in str(info.value)  # what made them


def test_pgvector_without_a_recorded_model_says_how_to_load(pg_dsn: str, loaded: Path) -> None:
    execute(
        pg_dsn, "CREATE TABLE IF NOT EXISTS hand_made (id text primary key, embedding vector(3))"
    )
    execute(
        pg_dsn,
        "CREATE TABLE IF NOT EXISTS nautilus_vector_models (table_name text, "
        "column_name text, model text, dim integer)",
    )
    source = PgvectorSource("hand", pg_dsn, "hand_made", ["id"], embedder=HashingEmbedder(dim=16))
    with pytest.raises(PostgresSourceError, match="nautilus-ranking load"):
        search(source, "disk")


def test_table_filters_with_escaped_wildcards_in_id_order(loaded: Path) -> None:
    source = built(loaded, "tab")
    assert type(source).ranked is False
    assert [r["id"] for r in search(source, "disk sessions")] == ["d1", "d2", "d3"]
    # '%' and '_' in the query are literal characters, not wildcards
    assert [r["id"] for r in search(built(loaded, "tab"), "100%")] == ["d4"]
    assert [r["id"] for r in search(built(loaded, "tab"), "promo_code")] == ["d4"]
    row = search(built(loaded, "tab"), "discount")[0]
    assert row["tags"] == ["billing", "promo"] and row["severity"] == 1  # typed columns


def test_user_text_is_bound_never_executed(pg_dsn: str, loaded: Path) -> None:
    hostile = "x'); DROP TABLE tab_docs; -- \\ % _ \" ' ; $$"
    for source_id in ("fts", "fts_expr", "vec", "tab"):
        assert isinstance(search(built(loaded, source_id), hostile), list)
    assert execute(pg_dsn, "SELECT count(*) FROM tab_docs") == [(4,)]


def test_odd_table_and_column_names_are_quoted(pg_dsn: str, tmp_path: Path) -> None:
    write_jsonl(tmp_path / "odd.jsonl", [{"key id": "a", 'the "text"': "quoted words"}])
    path = tmp_path / "odd.yaml"
    path.write_text(
        f"""
sources:
  - id: odd
    type: postgres_table
    dsn: {pg_dsn}
    table: 'odd "table"; --'
    id_field: key id
    columns: ['the "text"']
    seed: odd.jsonl
""",
        encoding="utf-8",
    )
    load_postgres(postgres_specs(load_source_specs(path).specs), tmp_path, "hashing")
    assert search(built(path, "odd"), "words") == [
        {"key id": "a", 'the "text"': "quoted words", "id": "a"}
    ]  # id_field answered as the id


def test_queries_run_in_read_only_transactions(pg_dsn: str) -> None:
    execute(pg_dsn, "CREATE TABLE IF NOT EXISTS audit (at timestamptz)")
    execute(
        pg_dsn,
        """CREATE OR REPLACE FUNCTION log_read() RETURNS text LANGUAGE sql
                       AS $$ INSERT INTO audit VALUES (now()) RETURNING 'logged' $$""",
    )
    execute(pg_dsn, "CREATE OR REPLACE VIEW writes AS SELECT 'w1' AS id, log_read() AS title")
    source = PostgresTableSource("writes", pg_dsn, "writes", ["title"])
    with pytest.raises(Exception, match="read-only transaction"):
        search(source, "logged")
    assert execute(pg_dsn, "SELECT count(*) FROM audit") == [(0,)]


def test_load_twice_updates_rows_without_duplicating_them(pg_dsn: str, loaded: Path) -> None:
    specs = postgres_specs(load_source_specs(loaded).specs)
    first = {r.source_id: r.in_table for r in load_postgres(specs, loaded.parent, "hashing")}
    assert first == {"fts": 4, "fts_expr": 4, "vec": 4, "tab": 4}
    changed = [{**DOCS[0], "title": "Disk full on orders-db (edited)"}]
    write_jsonl(loaded.parent / "one.jsonl", changed)
    tab = next(s for s in specs if s.id == "tab").model_copy(update={"seed": "one.jsonl"})
    (report,) = load_postgres([tab], loaded.parent, "hashing")
    assert (report.loaded, report.in_table) == (1, 4)
    assert execute(pg_dsn, "SELECT title FROM tab_docs WHERE id = 'd1'") == [
        ("Disk full on orders-db (edited)",)
    ]


def test_load_creates_gin_and_hnsw_indexes_the_queries_use(pg_dsn: str, loaded: Path) -> None:
    indexes = dict(
        execute(
            pg_dsn,
            "SELECT indexname, indexdef FROM pg_indexes "
            "WHERE tablename IN ('fts_docs', 'fts_expr_docs', 'vec_docs')",
        )
    )
    assert "USING gin (search_tsv)" in indexes["fts_docs_search_tsv_gin"]
    assert "USING gin (to_tsvector(" in indexes["fts_expr_docs_tsv_gin"]
    assert "USING hnsw (embedding vector_cosine_ops)" in indexes["vec_docs_embedding_hnsw"]
    import psycopg

    for source_id, index in (
        ("fts_expr", "fts_expr_docs_tsv_gin"),
        ("vec", "vec_docs_embedding_hnsw"),
    ):
        source = built(loaded, source_id)
        statement, params = source.statement("disk full", 5)
        source.close()
        with psycopg.connect(pg_dsn) as conn:
            conn.execute("SET enable_seqscan = off")
            plan = "\n".join(
                r[0]
                for r in conn.execute(b"EXPLAIN " + statement.as_bytes(conn), params).fetchall()
            )
        assert index in plan, plan


def test_load_refuses_to_mix_models_unless_replacing(pg_dsn: str, loaded: Path) -> None:
    specs = [s for s in postgres_specs(load_source_specs(loaded).specs) if s.id == "vec"]
    bigger = [specs[0].model_copy(update={"dim": 128})]
    with pytest.raises(LoadError, match="--replace"):
        load_postgres(bigger, loaded.parent, "hashing")
    try:
        (report,) = load_postgres(bigger, loaded.parent, "hashing", replace=True)
        assert report.in_table == 4
        assert execute(
            pg_dsn, "SELECT model, dim FROM nautilus_vector_models WHERE table_name = 'vec_docs'"
        ) == [("hashing-v2-128", 128)]
    finally:
        load_postgres(specs, loaded.parent, "hashing", replace=True)


def test_unknown_option_and_bad_dsn_are_start_up_errors_without_the_password(
    tmp_path: Path,
) -> None:
    from nautilus_ranking.sources.factory import SourceConfigError

    path = tmp_path / "bad.yaml"
    path.write_text(
        "sources:\n  - {id: a, type: postgres_fts, dsn: 'host=x password=hunter2 "
        "port=notanumber junk', table: t, columns: [c], colums: [d]}\n",
        encoding="utf-8",
    )
    with pytest.raises(SourceConfigError) as info:
        build_sources(path, tmp_path, "hashing")
    message = str(info.value)
    assert "colums" in message and "dsn" in message and "hunter2" not in message


def test_mask_dsn_hides_passwords_in_both_forms() -> None:
    assert (
        mask_dsn("postgresql://app:s3cr%40t@db.internal:5432/kb?sslmode=require")
        == "postgresql://app:***@db.internal:5432/kb?sslmode=require"
    )
    assert (
        mask_dsn("postgresql://db/kb?password=s3cret&user=app")
        == "postgresql://db/kb?password=***&user=app"
    )
    assert (
        mask_dsn("host=db user=app password='s3 cret' dbname=kb")
        == "host=db user=app password=*** dbname=kb"
    )


def test_a_spec_shows_its_dsn_masked_wherever_it_is_printed() -> None:
    from nautilus_ranking.sources.postgres.fts import PostgresFtsSpec

    spec = PostgresFtsSpec(
        id="kb",
        type="postgres_fts",
        table="kb",
        columns=["title"],
        dsn="postgresql://app:hunter2@db.internal/kb",
    )  # type: ignore[arg-type]
    shown = [repr(spec), str(spec), json.dumps(spec.model_dump(mode="json")), str(spec.dsn)]
    assert all("hunter2" not in text for text in shown)
    assert "postgresql://app:***@db.internal/kb" in repr(spec)
    assert spec.dsn.get_secret_value().endswith("hunter2@db.internal/kb")


def test_ranked_is_declared_per_type_and_a_spec_may_override_it(tmp_path: Path) -> None:
    from nautilus_ranking.sources.postgres.table import PostgresTableSpec
    from nautilus_ranking.sources.schema import BuildContext

    context = BuildContext(tmp_path, tmp_path, "hashing")
    options = {
        "id": "t",
        "type": "postgres_table",
        "dsn": "postgresql://db/kb",
        "table": "t",
        "columns": ["title"],
    }
    assert PostgresTableSpec.model_validate(options).build(context).ranked is False  # type: ignore[attr-defined]
    declared = PostgresTableSpec.model_validate({**options, "ranked": True}).build(context)
    assert declared.ranked is True  # type: ignore[attr-defined]
    assert PostgresFtsSource.ranked is True and PgvectorSource.ranked is True


@pytest.mark.skipif(importlib.util.find_spec("onnxruntime") is None, reason="needs the embed extra")
def test_eval_naming_another_embedder_says_to_reload_the_stored_vectors(
    loaded: Path, tmp_path: Path
) -> None:
    write_jsonl(tmp_path / "queries.jsonl", [{"_id": "q1", "text": "disk full"}])
    (tmp_path / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    settings = NautilusSettings(ranking_top_k=10, embedder="hashing", data_dir=tmp_path / "data")
    result = run_eval(
        tmp_path / "queries.jsonl", tmp_path / "qrels.tsv", str(loaded), settings, sweep=True
    )
    assert result.stored_vectors == ["vec"] and result.stored_by == "hashing"
    model = next(s for s in result.scored if s.alternative.name == "embedder onnx")
    told = recommendation_lines(
        dataclasses.replace(
            result,
            recommendation=dataclasses.replace(result.recommendation, best=model, qualifying=[]),
        )
    )
    reload = next(line for line in told if "load --replace" in line)
    assert reload.startswith("# first reload vec ")
    assert f"nautilus-ranking load --replace --config {loaded}" in reload
    assert told.index(reload) < told.index("# NAUTILUS_EMBEDDER=onnx")  # one query: commented
    # the word embedder keeps what the table was loaded with: nothing to reload
    words = dataclasses.replace(result, stored_by="onnx")
    assert not any(
        "load --replace" in line
        for line in recommendation_lines(
            dataclasses.replace(
                words,
                recommendation=dataclasses.replace(
                    result.recommendation, best=model, qualifying=[]
                ),
            )
        )
    )
