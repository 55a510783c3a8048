"""Nothing a source hands back breaks a request: one reproducer per finding.

Several brokers on one fresh data dir belong to the sources' build logic and are
tested with it (tests/test_source_builds.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from fakes import FakeSource
from plain_environment import plain_environment
from structlog.testing import capture_logs

from nautilus_ranking import (
    AdapterResult,
    Broker,
    HashingEmbedder,
    RankingSynthesizer,
    compute_response_hash,
)
from nautilus_ranking.response_hash import canonical_json


class RaisingStr:
    """A value that cannot be turned into text."""

    def __str__(self) -> str:
        raise RuntimeError("no text for you")

    __repr__ = __str__


class GetRaises(dict[str, Any]):
    """A row that is a dict but whose ``.get`` fails."""

    def get(self, key: Any, default: Any = None) -> Any:
        raise KeyError("get is broken")


def cyclic_row() -> dict[str, Any]:
    row: dict[str, Any] = {"t": "disk cycle"}
    row["self"] = row
    return row


BAD_ROWS: dict[str, Any] = {
    "cycle": cyclic_row,
    "mixed_key_types": lambda: {1: "a", "b": "disk x"},
    "huge_int": lambda: {"t": "disk", "n": 10**5000},
    "str_raises": lambda: {"t": "disk", "v": RaisingStr()},
    "get_raises": lambda: GetRaises(t="disk broken get"),
    "tuple_key": lambda: {("a", "b"): 1, "t": "disk"},
}


# --- 1. one bad row fails neither its source nor the request -----------------------------


@pytest.mark.parametrize("ranking", [False, True], ids=["passthrough", "ranking"])
@pytest.mark.parametrize("kind", list(BAD_ROWS))
def test_a_bad_row_is_dropped_and_every_other_row_and_source_answered(
    kind: str, ranking: bool
) -> None:
    bad = BAD_ROWS[kind]()
    good = {"t": "disk full", "id": 1}
    broker = Broker(
        [FakeSource("hostile", [bad, {"t": "disk ok", "id": 2}]), FakeSource("plain", [good])],
        RankingSynthesizer(top_k=10, idf=True) if ranking else None,
    )
    with capture_logs() as logs:
        response = broker.request("disk")
    assert response.sources_errored == []
    assert response.data == {"hostile": [{"t": "disk ok", "id": 2}], "plain": [good]}
    assert {r.source_id for r in response.ranking} == {"hostile", "plain"}
    [warning] = response.sources_warned
    assert (warning.source_id, warning.warning_type, warning.count) == (
        "hostile",
        "rows_dropped",
        1,
    )
    assert warning.positions == (1,)
    dropped = [e for e in logs if e["event"] == "source_rows_invalid"]
    assert len(dropped) == 1 and dropped[0]["source_id"] == "hostile" and dropped[0]["count"] == 1
    out = response.to_dict()
    assert out["sources_warned"][0]["source_id"] == "hostile"
    json.dumps(out)  # the whole response is JSON as it stands
    assert response.response_hash == compute_response_hash(response.data)
    # The raw hash covers what the source returned, less what has no canonical form.
    raw = [bad] if kind == "get_raises" else []
    assert response.source_response_hashes["hostile"] == compute_response_hash(
        [*raw, {"t": "disk ok", "id": 2}]
    )


def test_the_hash_names_why_a_value_has_no_canonical_form() -> None:
    for kind, make in BAD_ROWS.items():
        if kind == "get_raises":
            continue
        with pytest.raises(ValueError, match="no canonical JSON form"):
            compute_response_hash([make()])


# --- 3. the sync path returns at the deadline ----------------------------------------------


class StuckInAThread:
    """A source blocked in a worker thread (like a long SQLite call) until released."""

    def __init__(self, source_id: str) -> None:
        self.id = source_id
        self.timeout_s = 0.05
        self.release = threading.Event()
        self.finished = threading.Event()

    def _block(self) -> list[dict[str, Any]]:
        self.release.wait(10)
        self.finished.set()
        return [{"t": "late"}]

    async def search(self, query: str, context: Mapping[str, Any], limit: int) -> Any:
        return await asyncio.to_thread(self._block)

    def close(self) -> None:
        self.release.set()


def test_sync_request_returns_at_the_deadline_while_the_worker_is_still_blocked() -> None:
    stuck = StuckInAThread("stuck")
    broker = Broker([stuck, FakeSource("plain", [{"t": "disk"}])])
    try:
        response = broker.request("disk")
        # It answered although the abandoned worker thread has not finished (and
        # before this change, request() waited for it).
        assert not stuck.finished.is_set()
        assert [(e.source_id, e.error_type) for e in response.sources_errored] == [
            ("stuck", "timeout")
        ]
        assert response.data == {"plain": [{"t": "disk"}]}
        # The abandoned work cannot touch a later request: each request has its own loop.
        second = broker.request("disk")
        assert second.data == response.data
        assert second.response_hash == response.response_hash
    finally:
        stuck.release.set()
    assert stuck.finished.wait(5)
    # Released, the source answers in time again, on the same broker.
    third = broker.request("disk")
    assert third.sources_errored == []
    assert third.data == {"stuck": [{"t": "late"}], "plain": [{"t": "disk"}]}


def test_an_abandoned_thread_does_not_hold_the_process_open(tmp_path: Path) -> None:
    script = tmp_path / "stuck.py"
    script.write_text(
        "import asyncio, threading, time\n"
        "from nautilus_ranking import Broker\n"
        "class Stuck:\n"
        "    id, timeout_s = 'stuck', 0.05\n"
        "    async def search(self, q, c, n):\n"
        "        return await asyncio.to_thread(threading.Event().wait, 3600)\n"
        "    def close(self): pass\n"
        "r = Broker([Stuck()]).request('x')\n"
        "print(r.sources_errored[0].error_type)\n"
    )
    # Without the fix the interpreter joins the worker at exit: the timeout would fire.
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.splitlines()[-1] == "timeout"


# --- 4. rank() never raises ----------------------------------------------------------------


def _rank(rows: Any, context: Mapping[str, Any] | None, source_id: Any = "s", **kwargs: Any) -> Any:
    synth = RankingSynthesizer(**kwargs)
    results = [AdapterResult(source_id, rows), AdapterResult("other", [{"t": "disk other"}])]
    found = synth.merge_ranked(results, context)
    return found.data, found.ranking


RANK_CASES: dict[str, tuple[Any, Mapping[str, Any] | None, dict[str, Any]]] = {
    "zero_d_row_embedding": (
        [{"t": "disk", "embedding": np.array(1.0)}, {"t": "x", "embedding": np.array([1.0, 2.0])}],
        {"embedding": [1.0, 0.0]},
        {},
    ),
    "zero_d_query_embedding": ([{"t": "disk"}], {"embedding": np.array(1.0), "query": "disk"}, {}),
    "huge_int_row_embedding": (
        [{"t": "disk", "embedding": [10**400, 1.0]}],
        {"embedding": [1.0, 0.0]},
        {},
    ),
    "huge_int_query_embedding": (
        [{"t": "disk"}],
        {"embedding": [10**400, 1.0], "query": "disk"},
        {},
    ),
    "get_raises": (
        [GetRaises(t="disk"), {"t": "disk fine"}],
        {"query": "disk"},
        {"dedup_key": "t"},
    ),
    "cyclic_dedup_value": (
        [{"t": "disk", "k": cyclic_row()}, {"t": "disk", "k": 1}],
        {"query": "disk"},
        {"dedup_key": "k"},
    ),
    "mixed_key_dedup_value": (
        [{"t": "disk", "k": {1: "a", "b": 2}}],
        {"query": "disk"},
        {"dedup_key": "k"},
    ),
    "rows_none_passthrough": (None, None, {}),
    "rows_none_ranked": (None, {"query": "disk"}, {}),
}


@pytest.mark.parametrize("case", list(RANK_CASES))
def test_rank_never_raises_on_hostile_input(case: str) -> None:
    rows, context, kwargs = RANK_CASES[case]
    merged, ranking = _rank(rows, context, **kwargs)
    assert {"t": "disk other"} in merged["other"]
    assert [r.rank for r in ranking] == list(range(1, len(ranking) + 1))


def test_rank_accepts_a_source_id_that_is_not_a_string() -> None:
    merged, ranking = _rank(
        [{"t": "disk"}], {"query": "disk"}, source_id=7, source_boosts={"other": "high"}
    )
    assert merged[7] == [{"t": "disk"}]
    assert {r.source_id for r in ranking} == {7, "other"}


# --- 5. two query words whose features cancel do not switch ranking off ---------------------


def test_features_that_cancel_never_give_a_zero_vector() -> None:
    embedder = HashingEmbedder()
    vector = np.array(embedder.embed("standby ms"))
    assert np.linalg.norm(vector) == pytest.approx(1.0)
    # Texts whose features do not cancel are embedded exactly as before.
    alone = np.array(embedder.embed("standby"))
    assert np.count_nonzero(alone) == 1 and np.isclose(np.abs(alone).sum(), 1.0)


@pytest.mark.parametrize(
    "query", ["standby ms", "merchant 10", "idempotency applied", "jwk sale"]
)  # the demo vocabulary's four such pairs
def test_a_query_of_two_cancelling_words_is_ranked(query: str) -> None:
    rows = [{"t": word} for word in query.split()] + [{"t": "unrelated text"}]
    with capture_logs() as logs:
        ranking = RankingSynthesizer().rank([AdapterResult("s", rows)], {"query": query})
    assert not [e for e in logs if e["log_level"] == "warning"]
    assert len(ranking) == 3 and any(r.similarity > 0 for r in ranking)


def test_cli_query_of_two_colliding_words_is_ranked(tmp_path: Path) -> None:
    env = plain_environment()
    env["NAUTILUS_DATA_DIR"] = str(tmp_path / "data")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "nautilus_ranking.cli",
            "query",
            "standby ms",
            "--top-k",
            "3",
            "--boost",
            "graph:high",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
        check=True,
    )
    assert "rank_query_vector_invalid" not in done.stderr
    assert "rank_no_query_vector" not in done.stderr
    ranking = json.loads(done.stdout)["ranking"]
    assert len(ranking) == 3 and ranking[0]["score"] > 0


# --- 6. the hash is the same in every process ----------------------------------------------

HASH_SCRIPT = """
import json
from nautilus_ranking import compute_response_hash
data = {"s": [{"tags": {"alpha", "beta", "gamma", "delta"}, "f": frozenset({3, "x", 1.5}),
               "b": b"\\x00raw", "nan": float("nan")}]}
print(compute_response_hash(data))
"""


def test_response_hash_of_rows_holding_sets_is_the_same_under_every_hash_seed() -> None:
    hashes = set()
    for seed in ("0", "1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", HASH_SCRIPT],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=True,
        )
        hashes.add(done.stdout.strip())
    assert len(hashes) == 1


def test_a_set_hashes_as_its_sorted_canonical_list() -> None:
    # Elements in the order of their canonical text: '"a"' < '"b"' < '2'.
    assert canonical_json({"tags": {"b", "a", 2}}) == '{"tags":["a","b",2]}'
    assert compute_response_hash({"tags": {"b", "a"}}) == compute_response_hash(
        {"tags": ["a", "b"]}
    )


def test_json_native_data_hashes_exactly_as_the_upstream_broker() -> None:
    import hashlib

    data = {"b": [{"x": 1, "y": [1.5, None, True, "é"], "z": {"k": float("nan")}}], "a": []}
    upstream = (
        "sha256:"
        + hashlib.sha256(
            json.dumps(data, sort_keys=True, separators=(",", ":"), default=str).encode()
        ).hexdigest()
    )
    assert compute_response_hash(data) == upstream


# --- 7. a query that is not a string is one clear error ------------------------------------


@pytest.mark.parametrize("query", [None, 5, b"disk", ["disk"]])
def test_a_query_that_is_not_a_string_is_one_clear_error(query: Any) -> None:
    source = FakeSource("plain", [{"t": "disk"}])
    with capture_logs() as logs, pytest.raises(TypeError, match="query must be a string"):
        Broker([source]).request(query)
    assert not [e for e in logs if e["event"] == "source_failed"]


def test_a_context_that_is_not_a_mapping_is_one_clear_error() -> None:
    with pytest.raises(TypeError, match="context must be a mapping"):
        Broker([FakeSource("plain", [])]).request("disk", ["not", "a", "mapping"])  # type: ignore[arg-type]


# --- 8. a source can neither fail nor steer the rest of the request ------------------------


class CancelsItself(FakeSource):
    """Raises ``CancelledError`` from its own code: nobody cancelled the request."""

    async def search(self, query: str, context: Mapping[str, Any], limit: int) -> Any:
        raise asyncio.CancelledError


class WritesIntoItsContext(FakeSource):
    """Rewrites the context it was handed: the query, the embedding, a nested list."""

    async def search(self, query: str, context: Mapping[str, Any], limit: int) -> Any:
        assert isinstance(context, dict)
        context["query"] = "hijacked"
        context["embedding"] = [1.0, 0.0, 0.0]
        context["tags"].append("injected")
        return self.result


class SaysWhatItSaw(FakeSource):
    """Answers with the query and tags in its context, after the writer has run."""

    async def search(self, query: str, context: Mapping[str, Any], limit: int) -> Any:
        await asyncio.sleep(0.01)
        return [{"t": f"{context['query']} seen", "tags": list(context["tags"])}]


def test_a_source_raising_cancelled_error_fails_only_itself() -> None:
    good = [{"t": "disk full", "id": 1}]
    for synthesizer in (None, RankingSynthesizer(top_k=5)):
        broker = Broker([CancelsItself("cancels"), FakeSource("plain", good)], synthesizer)
        with capture_logs() as logs:
            response = broker.request("disk")  # before: CancelledError out of request()
        assert response.data == {"plain": good}
        assert [(e.source_id, e.error_type) for e in response.sources_errored] == [
            ("cancels", "CancelledError")
        ]
        assert [e["source_id"] for e in logs if e["event"] == "source_failed"] == ["cancels"]

        async def inside_a_loop(b: Broker = broker) -> Any:
            return await b.arequest("disk")

        assert asyncio.run(inside_a_loop()).data == {"plain": good}


def test_cancelling_the_request_itself_still_cancels_it() -> None:
    async def run() -> None:
        broker = Broker([FakeSource("hangs", hang=True, timeout_s=30)])
        task = asyncio.create_task(broker.arequest("disk"))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(run())


def test_a_source_writing_into_its_context_changes_nothing_for_the_others() -> None:
    rows = [{"t": "disk full", "id": 1}, {"t": "disk slow", "id": 2}]
    context = {"tags": ["ops"]}

    def broker(first: FakeSource) -> Broker:
        return Broker([first, SaysWhatItSaw("reader")], RankingSynthesizer(top_k=5, idf=True))

    with capture_logs() as logs:
        hostile = broker(WritesIntoItsContext("writer", rows)).request("disk", context)
    quiet = broker(FakeSource("writer", rows)).request("disk", context)
    # The other source saw the caller's query and tags, not the writer's.
    assert hostile.data["reader"] == [{"t": "disk seen", "tags": ["ops"]}]
    # The ranker ranked by the caller's query, not the injected embedding (whose
    # dimension would not even fit): the same ranking as without the writes.
    assert [r.explain() for r in hostile.ranking] == [r.explain() for r in quiet.ranking]
    assert hostile.response_hash == quiet.response_hash
    # (its rows have no id: that is said once, and is not what this test is about)
    assert not [
        e for e in logs if e["log_level"] == "warning" and e["event"] != "source_rows_without_id"
    ]
    assert context == {"tags": ["ops"]}  # the caller's own context is untouched


@pytest.mark.parametrize("bad_id", [7, None, ("a", "b")], ids=["int", "none", "tuple"])
def test_a_source_with_a_non_string_id_fails_only_itself(bad_id: Any) -> None:
    good = [{"t": "disk full", "id": 1}]
    for synthesizer in (None, RankingSynthesizer(top_k=5)):
        broker = Broker(
            [FakeSource(bad_id, [{"t": "disk"}]), FakeSource("plain", good)], synthesizer
        )
        response = broker.request("disk")  # before: NoCanonicalFormError from the hash
        assert response.data == {"plain": good}
        [error] = response.sources_errored
        assert error.error_type == "invalid_source"
        assert error.source_id == f"<{type(bad_id).__name__} {bad_id!r}>"
        assert "must be a string" in error.message
        out = response.to_dict()
        json.dumps(out)
        assert out["sources_queried"] == [error.source_id, "plain"]


def test_the_service_answers_when_a_source_raises_cancelled_error(tmp_path: Path) -> None:
    from tools.servers import running, wait_ready

    with running(
        tmp_path, {"NAUTILUS_RANKING_TOP_K": "8"}, launcher=["--cancel", "runbooks"]
    ) as server:
        wait_ready(server, timeout=10)
        response = httpx.post(
            server.url + "/v1/query", json={"query": "orders-db disk full"}, timeout=30
        )
        assert response.status_code == 200, response.text  # before: a plain-text 500
        body = response.json()
        assert [(e["source_id"], e["error_type"]) for e in body["sources_errored"]] == [
            ("runbooks", "CancelledError")
        ]
        # The other sources' rows are ranked as usual: a full top 8 without runbooks.
        assert len(body["ranking"]) == 8
        assert {r["source_id"] for r in body["ranking"]} <= {"tickets", "graph", "postmortems"}
        assert not body["data"].get("runbooks")
