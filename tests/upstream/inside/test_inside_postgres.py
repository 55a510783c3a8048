"""Inside the broker, over its ``postgres`` and ``pgvector`` adapters against a real
PostgreSQL (the main suite's, its DSN in ``UPSTREAM_PG_DSN``)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
from conftest import AGENT, CONTEXT, ids, write_config

from nautilus_ranking import NautilusSettings
from nautilus_ranking.upstream import attach_ranking

TICKETS = [
    (1, "checkout latency spike", "p99 above two seconds"),
    (2, "orders-db disk 91% full on primary", "disk full alert on the primary"),
    (3, "kafka broker restarted", "consumer lag grew"),
    (4, "login page slow", "sessions expire early"),
]
#: Notes and their vectors; the request's embedding is nearest the first.
NOTES = [
    ("N-1", {"title": "TLS certificate renewal", "body": "renew before expiry"}, [1.0, 0.0, 0.0]),
    (
        "N-2",
        {"title": "orders-db disk cleanup", "body": "vacuum and free the disk"},
        [0.9, 0.1, 0.0],
    ),
    ("N-3", {"title": "checkout runbook", "body": "payment provider status"}, [0.0, 1.0, 0.0]),
    ("N-4", {"title": "kafka partitions", "body": "rebalance the consumers"}, [0.0, 0.0, 1.0]),
]
QUERY_VECTOR = [1.0, 0.05, 0.0]


@pytest.fixture(scope="module")
def dsn() -> str:
    found = os.environ.get("UPSTREAM_PG_DSN")
    if not found:
        pytest.fail("UPSTREAM_PG_DSN is not set: the PostgreSQL checks need the suite's server")
    return found


@pytest.fixture(scope="module")
def tables(dsn: str) -> str:
    import asyncpg

    async def load() -> None:
        conn = await asyncpg.connect(dsn)
        try:
            await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            await conn.execute("DROP TABLE IF EXISTS tickets, notes")
            await conn.execute("CREATE TABLE tickets (id int PRIMARY KEY, title text, body text)")
            await conn.executemany("INSERT INTO tickets VALUES ($1, $2, $3)", TICKETS)
            await conn.execute(
                "CREATE TABLE notes (id text PRIMARY KEY, metadata jsonb, embedding vector(3))"
            )
            for note_id, metadata, vector in NOTES:
                await conn.execute(
                    "INSERT INTO notes VALUES ($1, $2::jsonb, $3::vector)",
                    note_id,
                    json.dumps(metadata),
                    str(vector),
                )
        finally:
            await conn.close()

    asyncio.run(load())
    return dsn


@pytest.fixture
def pg_config(tables: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("OPS_DB_DSN", tables)  # the operator's own, expanded by the YAML
    common = {
        "classification": "unclassified",
        "data_types": ["ops"],
        "allowed_purposes": ["support"],
    }
    return write_config(
        tmp_path,
        [
            {
                "id": "tickets",
                "type": "postgres",
                "connection": "${OPS_DB_DSN}",
                "table": "public.tickets",
                **common,
            },
            {
                "id": "notes",
                "type": "pgvector",
                "connection": "${OPS_DB_DSN}",
                "table": "public.notes",
                "top_k": 4,
                **common,
            },
        ],
    )


def ask(config: Path, settings: NautilusSettings | None, query: str) -> tuple[Any, Any]:
    from nautilus import Broker

    broker = Broker.from_config(config)
    try:
        attached = attach_ranking(broker, settings) if settings is not None else None
        context = {**CONTEXT, "embedding": QUERY_VECTOR}
        return broker.request(AGENT, query, context), attached
    finally:
        broker.close()


def test_unset_knobs_leave_the_postgres_answer_as_the_stock_brokers(pg_config: Path) -> None:
    stock, _ = ask(pg_config, None, "ops: orders-db disk full")
    ours, attached = ask(pg_config, NautilusSettings(), "ops: orders-db disk full")
    assert not attached.enabled
    assert json.dumps(stock.data, default=str) == json.dumps(ours.data, default=str)
    assert ids(stock.data["notes"]) == ["N-1", "N-2", "N-3", "N-4"]  # pgvector: nearest first


def test_pgvector_order_counts_as_relevance_and_its_metadata_as_content(pg_config: Path) -> None:
    response, attached = ask(
        pg_config, NautilusSettings(ranking_top_k=3), "ops: orders-db disk full"
    )
    ranking = attached.ranking(response.request_id)
    assert ranking is not None and ranking.fallback is None
    by_id = {r.row["id"]: r for r in ranking.ranking}
    # the two rows about a full orders-db disk lead, one from each source
    assert {r.row["id"] for r in ranking.ranking[:2]} == {2, "N-2"}
    notes = [r for r in ranking.ranking if r.source_id == "notes"]
    tickets = [r for r in ranking.ranking if r.source_id == "tickets"]
    assert notes and all(r.source_weight > 0 for r in notes)  # declared ranked: pgvector
    assert tickets and all(r.source_weight == 0 for r in tickets)  # no ORDER BY: not ranked
    assert by_id["N-2"].similarity > 0  # its metadata's words were read
    # data holds the broker's own rows: metadata still a JSON string, the vector kept
    note = response.data["notes"][0]
    assert isinstance(note["metadata"], str) and "embedding" in note
    assert sum(len(rows) for rows in response.data.values()) == 3
    assert next(iter(response.data)) == ranking.ranking[0].source_id
    assert sum(len(r) for r in ranking.dropped.values()) == len(TICKETS) + len(NOTES) - 3
