"""The broker's ``pgvector`` adapter without hand work: ``nautilus-ranking load`` (the
installed command) writes its table with ``layout: nautilus-broker``, and the attached
ranking gives its adapter a query vector when the caller passes none, against a real
PostgreSQL (the main suite's, its DSN in ``UPSTREAM_PG_DSN``)."""

from __future__ import annotations

import asyncio
import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import AGENT, CONTEXT, ids, write_config

from nautilus_ranking import NautilusSettings
from nautilus_ranking.upstream import attach_ranking

NAUTILUS_RANKING = str(Path(sys.executable).with_name("nautilus-ranking"))
ARTICLES = [
    {"id": "KB-1", "title": "Reset your password", "body": "use the forgot password link"},
    {"id": "KB-2", "title": "Export invoices", "body": "download a CSV of every invoice"},
    {"id": "KB-3", "title": "Two-factor login", "body": "scan the QR code with your phone"},
    {"id": "KB-4", "title": "Close your account", "body": "billing stops at the period end"},
]
LOAD_YAML = """sources:
  - id: articles
    type: pgvector
    layout: nautilus-broker
    dsn: ${OPS_DB_DSN}
    table: kb_articles
    columns: [title, body]
    seed: articles.jsonl
"""


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """The table loaded by the installed CLI, as a user runs it; (DSN, its report)."""
    dsn = os.environ.get("UPSTREAM_PG_DSN")
    if not dsn:
        pytest.fail("UPSTREAM_PG_DSN is not set: the PostgreSQL checks need the suite's server")
    folder = tmp_path_factory.mktemp("load")
    with (folder / "articles.jsonl").open("w", encoding="utf-8") as handle:
        for article in ARTICLES:
            handle.write(json.dumps(article) + "\n")
    (folder / "load.yaml").write_text(LOAD_YAML, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("NAUTILUS_")}
    env["NAUTILUS_EMBEDDER"] = "hashing"  # as the suite (tests/conftest.py)
    done = subprocess.run(
        [NAUTILUS_RANKING, "load", "--config", "load.yaml", "--replace"],
        cwd=folder,
        env={**env, "OPS_DB_DSN": dsn},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return dsn, done.stdout


@pytest.fixture
def config(loaded: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("OPS_DB_DSN", loaded[0])
    return write_config(
        tmp_path,
        [
            {
                "id": "articles",
                "type": "pgvector",
                "connection": "${OPS_DB_DSN}",
                "table": "public.kb_articles",
                "top_k": 4,
                "classification": "unclassified",
                "data_types": ["kb"],
                "allowed_purposes": ["support"],
            }
        ],
    )


def errored(response: Any) -> list[str]:
    return [str(e.source_id) for e in response.sources_errored]


def ask(
    config: Path, settings: NautilusSettings | None, context: dict[str, Any]
) -> tuple[Any, Any]:
    from nautilus import Broker

    broker = Broker.from_config(config)
    try:
        attached = attach_ranking(broker, settings) if settings is not None else None
        return broker.request(AGENT, "kb: I forgot my password", context), attached
    finally:
        broker.close()


def test_load_writes_the_table_the_adapter_reads(loaded: tuple[str, str]) -> None:
    import asyncpg

    dsn, report = loaded
    assert "articles (pgvector): 4 rows loaded into kb_articles (4 in the table)" in report

    async def read() -> list[Any]:
        conn = await asyncpg.connect(dsn)
        try:
            return list(
                await conn.fetch(
                    "SELECT id, metadata, vector_dims(embedding) AS dims FROM kb_articles "
                    "ORDER BY id"
                )
            )
        finally:
            await conn.close()

    rows = asyncio.run(read())
    assert [r["id"] for r in rows] == ["KB-1", "KB-2", "KB-3", "KB-4"]
    assert json.loads(rows[0]["metadata"])["title"] == "Reset your password"
    assert {r["dims"] for r in rows} == {1024}  # indexable by HNSW (at most 2,000)


def test_the_stock_broker_needs_a_query_vector(config: Path) -> None:
    stock, _ = ask(config, None, dict(CONTEXT))
    assert errored(stock) == ["articles"]  # its NoopEmbedder refuses
    assert stock.sources_errored[0].error_type == "EmbeddingUnavailableError"
    assert not stock.data.get("articles")


def test_attached_the_adapter_gets_our_query_vector_and_the_context_is_untouched(
    config: Path,
) -> None:
    context = dict(CONTEXT)
    before = copy.deepcopy(context)
    response, attached = ask(config, NautilusSettings(), context)
    assert not attached.enabled  # every ranking knob unset: the broker's own merge
    assert attached.vector_sources == ["articles"]
    assert errored(response) == []
    assert ids(response.data["articles"])[0] == "KB-1"  # nearest the intent's words
    assert context == before  # nothing put where the LLM analyser would read it
    assert "embedding" not in context
    row = response.data["articles"][0]
    assert isinstance(row["metadata"], str)
    assert json.loads(row["metadata"])["title"] == "Reset your password"
    assert row["embedding"].dimensions() == 1024  # pgvector's Vector, as the adapter reads it


def test_ranked_over_the_loaded_table(config: Path) -> None:
    response, attached = ask(config, NautilusSettings(ranking_top_k=2), dict(CONTEXT))
    ranking = attached.ranking(response.request_id)
    assert ranking is not None and ranking.fallback is None
    assert ranking.ranked_by == "I forgot my password"  # the routing word left out
    assert len(response.data["articles"]) == 2  # the top K of the four
    assert ids(response.data["articles"])[0] == "KB-1"
    assert ranking.ranking[0].row["id"] == "KB-1"


def test_a_callers_vector_still_wins(config: Path) -> None:
    from nautilus_ranking.embedders import embedder_from_name

    vector = embedder_from_name("hashing", 1024).embed("Export invoices CSV")
    context = {**CONTEXT, "embedding": [float(x) for x in vector]}
    response, _ = ask(config, NautilusSettings(), context)
    assert ids(response.data["articles"])[0] == "KB-2"


def test_dim_zero_leaves_the_brokers_refusal(config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NAUTILUS_UPSTREAM_VECTOR_DIM", "0")
    response, attached = ask(config, NautilusSettings(), dict(CONTEXT))
    assert attached.vector_sources == []
    assert errored(response) == ["articles"]


def test_a_source_a_reload_adds_gets_the_query_vectors_too(config: Path) -> None:
    import yaml
    from nautilus import Broker

    broker = Broker.from_config(config)
    try:
        attached = attach_ranking(broker, NautilusSettings())
        assert attached.vector_sources == ["articles"]
        file = yaml.safe_load(config.read_text(encoding="utf-8"))
        file["sources"].append({**file["sources"][0], "id": "articles_copy"})
        config.write_text(yaml.safe_dump(file, sort_keys=False), encoding="utf-8")
        candidate = Broker.from_config(config)
        broker._run_sync(broker.reload(candidate))  # what a SIGHUP runs
        assert attached.vector_sources == ["articles", "articles_copy"]
        response = broker.request(AGENT, "kb: I forgot my password", dict(CONTEXT))
        assert errored(response) == []
        assert ids(response.data["articles_copy"])[0] == "KB-1"
    finally:
        broker.close()
