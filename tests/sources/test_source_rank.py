"""``source_rank`` is a row's 1-based position in its source's own answer, the position
``sources_warned.positions`` counts in: a bad row dropped before it does not renumber
the rows after it — in the library, ``nautilus-ranking query --json`` and
``nautilus-ranking serve``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest
from fakes import FakeSource
from plain_environment import plain_environment
from structlog.testing import capture_logs

from nautilus_ranking import AdapterResult, Broker, HashingEmbedder, RankingSynthesizer
from nautilus_ranking.synthesis.ranking_boost import stage1_key
from tools.servers import SLOW_SERVE, Server, running, wait_ready

QUERY = "orders-db disk full"
HOSTILE = [
    {"id": "a", "t": "disk full on orders-db"},
    None,
    {"id": "c", "t": "orders-db disk alert"},
    ["not", "a", "row"],
    {"id": "e", "t": "disk cleanup runbook"},
]
KEPT = {"a": 1, "c": 3, "e": 5}  # row id -> its position in HOSTILE


def hostile_broker(ranking: bool) -> Broker:
    plain = FakeSource(
        "plain",
        [
            {"id": "p", "t": "orders-db disk"},
            {"id": "c", "t": "orders-db disk alert"},  # a copy of c
            {"id": "e", "t": "orders-db disk full"},
        ],
    )  # e, closer
    return Broker(
        [FakeSource("hostile", HOSTILE), plain],
        RankingSynthesizer(dedup_key="id") if ranking else None,
    )


def ranks_of(out: dict[str, Any], sid: str) -> list[int]:
    """Every source rank ``out`` (a response as JSON) gives ``sid``'s rows, copies included."""
    ranks = [r["source_rank"] for r in out["ranking"] if r["source_id"] == sid]
    return ranks + [
        c["source_rank"] for r in out["ranking"] for c in r["also_from"] if c["source_id"] == sid
    ]


@pytest.mark.parametrize("ranking", [False, True], ids=["passthrough", "ranking"])
def test_rows_after_a_dropped_row_keep_their_position_in_the_source(ranking: bool) -> None:
    response = hostile_broker(ranking).request(QUERY)
    [warned] = response.sources_warned
    assert (warned.source_id, warned.positions) == ("hostile", (2, 4))
    ranked = {(r.source_id, r.row["id"]): r.source_rank for r in response.ranking}
    copies = {(c.source_id, c.id): c.source_rank for r in response.ranking for c in r.also_from}
    hostile = {rid: n for (sid, rid), n in {**ranked, **copies}.items() if sid == "hostile"}
    assert hostile == KEPT
    if ranking:  # e collapsed into plain's better copy: also_from keeps its position
        assert copies[("hostile", "e")] == 5
    assert not set(hostile.values()) & set(warned.positions)
    out = json.loads(json.dumps(response.to_dict(explain=True)))
    assert sorted(ranks_of(out, "hostile")) == sorted(KEPT.values())


def test_fusion_ranks_a_row_at_its_position_in_the_source() -> None:
    response = hostile_broker(ranking=True).request(QUERY)
    for r in response.ranking:
        assert r.stage1_key == pytest.approx(float(stage1_key(np.float64(r.source_rank))))
    assert {r.source_rank for r in response.ranking if r.source_id == "hostile"} <= {1, 3, 5}


def test_fetch_hands_the_kept_rows_positions_to_the_ranker() -> None:
    results = hostile_broker(ranking=True).fetch_sync(QUERY)
    assert [(r.source_id, r.source_ranks) for r in results] == [
        ("hostile", (1, 3, 5)),
        ("plain", None),
    ]
    ranked = RankingSynthesizer().rank(results, {"query": QUERY})
    assert {r.row["id"]: r.source_rank for r in ranked if r.source_id == "hostile"} == KEPT


def test_rank_called_directly_keeps_the_ranks_of_the_rows_after_a_bad_one() -> None:
    rows: list[Any] = [{"id": "a", "t": "disk"}, "junk", {"id": "c", "t": "disk full"}]
    for context in ({"query": "disk"}, {}):  # ranked, and passthrough (no query)
        ranked = RankingSynthesizer().rank([AdapterResult("s", rows)], context)
        assert {r.row["id"]: r.source_rank for r in ranked} == {"a": 1, "c": 3}


def test_given_source_ranks_are_used_with_a_matrix_of_the_kept_rows() -> None:
    embedder = HashingEmbedder()
    rows = [{"id": "x", "t": "cats"}, {"id": "y", "t": "disk full"}]
    vectors = np.stack([embedder.embed(r["t"]) for r in rows])
    result = AdapterResult("s", rows, embeddings=vectors, source_ranks=(2, 7))
    ranked = RankingSynthesizer(embedder=embedder).rank([result], {"query": "disk full"})
    assert [(r.row["id"], r.source_rank) for r in ranked] == [("y", 7), ("x", 2)]
    assert ranked[0].similarity == pytest.approx(1.0)  # row y scored on matrix row 1


@pytest.mark.parametrize(
    "bad",
    [
        (1,),
        (2, 1),
        (0, 1),
        (1, 1),
        (1.0, 2),
        (1, 10**30),
        (1, 2**41),
        [[1], [2]],
        "12",
        {1: 1, 2: 2},
        np.array([2, 1], dtype=np.uint64),
    ],
)
def test_unusable_source_ranks_are_warned_and_the_rows_counted_in_order(bad: Any) -> None:
    result = AdapterResult(
        "s", [{"id": "x", "t": "disk"}, {"id": "y", "t": "disk"}], source_ranks=bad
    )
    with capture_logs() as logs:
        ranked = RankingSynthesizer().rank([result], {"query": "disk"})
    assert sorted(r.source_rank for r in ranked) == [1, 2]
    assert [e["source_id"] for e in logs if e["event"] == "rank_source_ranks_invalid"] == ["s"]


# --- the same through the CLI and the HTTP service (a bad row put second by the launcher) ---


def check_runbooks(out: dict[str, Any]) -> None:
    """The launcher put a bad row second in runbooks' answer: its kept rows are 1, 3, 4…"""
    [warned] = out["sources_warned"]
    assert (warned["source_id"], warned["positions"]) == ("runbooks", [2])
    ranks = sorted(ranks_of(out, "runbooks"))
    assert len(ranks) >= 3
    assert ranks == [1, *range(3, len(ranks) + 2)]


@pytest.mark.parametrize(
    "env", [{}, {"NAUTILUS_RANKING_TOP_K": "1000"}], ids=["passthrough", "ranking"]
)
def test_query_json_reports_source_ranks_in_the_sources_own_order(env: dict[str, str]) -> None:
    base = plain_environment()
    done = subprocess.run(
        [
            sys.executable,
            SLOW_SERVE,
            "--bad-row",
            "runbooks",
            "--",
            "query",
            QUERY,
            "--json",
            "--explain",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**base, "NAUTILUS_DATA_DIR": os.environ["NAUTILUS_DATA_DIR"], **env},
    )
    assert done.returncode == 0, done.stderr
    check_runbooks(json.loads(done.stdout))


@pytest.fixture(scope="module")
def bad_row_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("bad-row")
    with running(tmp, launcher=["--bad-row", "runbooks"]) as server:
        assert wait_ready(server).status_code == 200, server.logs()
        yield server


@pytest.mark.parametrize(
    "body",
    [{"query": QUERY, "explain": True}, {"query": QUERY, "top_k": 1000, "explain": True}],
    ids=["passthrough", "ranking"],
)
def test_serve_reports_source_ranks_in_the_sources_own_order(
    bad_row_server: Server, body: dict[str, Any]
) -> None:
    response = httpx.post(bad_row_server.url + "/v1/query", json=body, timeout=30)
    assert response.status_code == 200, response.text
    check_runbooks(response.json())
