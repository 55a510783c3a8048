"""Faults against a real PostgreSQL: down at start, restarted mid-traffic, a slow query."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import psycopg
import pytest
from fakes import write_jsonl
from postgres_fixtures import PgServer, execute

from nautilus_ranking import Broker
from nautilus_ranking.records import BrokerResponse
from nautilus_ranking.sources.factory import build_sources, load_source_specs
from nautilus_ranking.sources.postgres.load import load_postgres, postgres_specs
from nautilus_ranking.sources.postgres.table import PostgresTableSource

DOCS = [
    {"id": f"r{i}", "title": f"runbook {i} disk full", "body": "drop the stale slot"}
    for i in range(5)
]


def config(folder: Path, dsn: str) -> Path:
    """Two PostgreSQL sources and one SQLite source over the same rows."""
    write_jsonl(folder / "docs.jsonl", DOCS)
    path = folder / "sources.yaml"
    path.write_text(
        f"""
sources:
  - id: pg_fts
    type: postgres_fts
    dsn: "{dsn}"
    table: fault_docs
    columns: [title, body]
    seed: docs.jsonl
    timeout_s: 2
  - id: pg_table
    type: postgres_table
    dsn: "{dsn}"
    table: fault_docs
    columns: [title, body]
    timeout_s: 2
  - id: lite
    type: sqlite_fts
    path: lite.db
    seed: docs.jsonl
    columns: [title, body]
""",
        encoding="utf-8",
    )
    return path


def broker_for(path: Path) -> Broker:
    sources, limit = build_sources(path, path.parent / "data", "hashing")
    return Broker(sources, limit=limit)


def errored(response: BrokerResponse) -> dict[str, str]:
    return {e.source_id: e.error_type for e in response.sources_errored}


def test_database_down_at_start_errors_only_its_sources(tmp_path: Path) -> None:
    nowhere = f"postgresql://app:hunter2@/kb?host={tmp_path / 'no-server'}"
    with broker_for(config(tmp_path, nowhere)) as broker:  # start-up does not touch the DB
        response = broker.request("disk full")
    assert errored(response) == {
        "pg_fts": "PostgresUnavailableError",
        "pg_table": "PostgresUnavailableError",
    }
    assert len(response.data["lite"]) == 5  # the other source answers
    message = response.sources_errored[0].message
    assert message.startswith("database unavailable (postgresql://app:***@/kb")
    assert "hunter2" not in message


def test_server_restarted_mid_traffic_errors_cleanly_then_recovers(
    pg_server: PgServer, pg_dsn: str, tmp_path: Path
) -> None:
    path = config(tmp_path, pg_dsn)
    load_postgres(postgres_specs(load_source_specs(path).specs), tmp_path, "hashing")
    phase = {"now": "before"}
    outcomes: list[tuple[str, dict[str, str], int]] = []

    async def traffic(broker: Broker, stop: asyncio.Event) -> None:
        for _ in range(2000):  # bounded; ends when the restart is over
            if stop.is_set():
                return
            sent = phase["now"]
            response = await broker.arequest("disk full")  # never raises
            # a request counts for a phase only if it started and ended in it
            seen = sent if sent == phase["now"] else "transition"
            outcomes.append((seen, errored(response), len(response.data.get("lite", []))))
            await asyncio.sleep(0.02)

    async def scenario() -> None:
        with broker_for(path) as broker:
            stop = asyncio.Event()
            client = asyncio.create_task(traffic(broker, stop))
            await asyncio.sleep(0.3)
            phase["now"] = "stopping"
            await asyncio.to_thread(pg_server.stop)
            phase["now"] = "outage"
            await asyncio.sleep(1.0)
            phase["now"] = "restarting"
            await asyncio.to_thread(pg_server.start)
            phase["now"] = "after"
            await asyncio.sleep(0.5)
            stop.set()
            await client
            # a request on the same broker, long after: every source answers
            final = await broker.arequest("disk full")
            assert errored(final) == {}
            assert len(final.data["pg_fts"]) == len(final.data["pg_table"]) == 5

    asyncio.run(scenario())
    by_phase: dict[str, list[dict[str, str]]] = {}
    for name, errors, lite_rows in outcomes:
        by_phase.setdefault(name, []).append(errors)
        assert lite_rows == 5  # SQLite answered through the whole outage
    assert by_phase["before"] and all(e == {} for e in by_phase["before"])
    outage = by_phase["outage"]
    assert outage and all(set(e) == {"pg_fts", "pg_table"} for e in outage)
    assert {t for e in outage for t in e.values()} <= {"PostgresUnavailableError", "timeout"}
    # recovered without restarting nautilus-ranking: after the first request that finds the
    # server back, every request is answered by every source
    after = by_phase["after"]
    assert len(after) >= 3 and all(e == {} for e in after[1:])


def test_slow_query_is_cut_at_its_timeout(pg_dsn: str) -> None:
    execute(pg_dsn, "CREATE TABLE IF NOT EXISTS quick (id text primary key, title text)")
    execute(pg_dsn, "INSERT INTO quick VALUES ('q1', 'disk full') ON CONFLICT DO NOTHING")
    execute(
        pg_dsn,
        "CREATE OR REPLACE VIEW slow AS SELECT q.* FROM quick q, LATERAL (SELECT pg_sleep(30)) s",
    )
    slow = PostgresTableSource("slow", pg_dsn, "slow", ["title"], timeout_s=0.5)
    started = time.perf_counter()
    try:
        with pytest.raises(psycopg.errors.QueryCanceled, match="statement timeout"):
            asyncio.run(slow.search("disk", {}, 10))
        elapsed = time.perf_counter() - started
        # the server cut it: no backend is still sleeping, the pooled connection is reusable
        assert execute(
            pg_dsn,
            "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' "
            "AND query LIKE '%%slow%%' AND pid <> pg_backend_pid()",
        ) == [(0,)]
        slow.table = PostgresTableSource("q", pg_dsn, "quick", ["title"]).table
        assert asyncio.run(slow.search("disk", {}, 10)) == [{"id": "q1", "title": "disk full"}]
    finally:
        slow.close()
    assert elapsed < 10  # sanity, not a benchmark: pg_sleep(30) never ran to the end

    quick = PostgresTableSource("quick", pg_dsn, "quick", ["title"], timeout_s=5)
    slow = PostgresTableSource("slow", pg_dsn, "slow", ["title"], timeout_s=0.5)
    with Broker([quick, slow]) as broker:
        response = broker.request("disk")
    assert response.data == {"quick": [{"id": "q1", "title": "disk full"}]}
    assert errored(response) in ({"slow": "QueryCanceled"}, {"slow": "timeout"})
