"""Stable pages: pages of a 3-page result concatenate to the unpaged top 3K, by page number
and by cursor, in-process, on the command line and over HTTP; a cursor for other
settings is refused (exit 2 / 422) and one whose data moved is refused (409)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cli_process import run_nautilus
from fakes import sources_file
from hypothesis import given, settings
from hypothesis import strategies as st
from plain_environment import plain_environment

from nautilus_ranking.broker import Broker
from nautilus_ranking.cli import DEMO_QUERIES
from nautilus_ranking.records import AdapterResult, BrokerResponse
from nautilus_ranking.request.pages import PageError, paging
from nautilus_ranking.response_hash import compute_response_hash
from nautilus_ranking.settings.model import NautilusSettings
from nautilus_ranking.synthesis.ranking import RankingSynthesizer
from tools.servers import Server, running, wait_ready

QUERY = "orders-db disk full"
#: The cursor key the server and a CLI run share, as replicas would.
SHARED_KEY = "k" * 40


@pytest.mark.parametrize("query", DEMO_QUERIES)
@pytest.mark.parametrize("size", [1, 4])
def test_in_process_pages_are_slices_of_one_ranking(query: str, size: int) -> None:
    settings = NautilusSettings(ranking_top_k=size, ranking_idf=True, source_boosts="graph:high")
    with Broker.from_config(None, settings) as broker:
        ids = [s.id for s in broker.sources]
        base = broker.synthesizer
        whole = Broker(
            broker.sources,
            Broker.from_config(
                None, settings.model_copy(update={"ranking_top_k": 3 * size})
            ).synthesizer,
        ).request(query)
        seen: list[dict[str, Any]] = []
        pages = paging(query, settings, ids, page=1)
        for number in (1, 2, 3):
            assert pages is not None and pages.number == number
            broker.synthesizer = pages.synthesizer(settings, None)
            response, page, _ = pages.cut(broker.request(query))
            assert [r.rank for r in response.ranking] == list(
                range((number - 1) * size + 1, number * size + 1)
            )
            assert response.response_hash == compute_response_hash(response.data)
            seen += [r.explain() for r in response.ranking]
            pages = paging(query, settings, ids, cursor=page["next_cursor"])
        broker.synthesizer = base
    assert seen == [r.explain() for r in whole.ranking]


WORDS = ["disk", "full", "orders", "lag", "replica", "backup", "slot", "wal"]
_TEXT = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join)


@settings(max_examples=60, deadline=None)
@given(
    sources=st.lists(st.lists(_TEXT, max_size=8), min_size=1, max_size=3),
    size=st.integers(1, 5),
    boost=st.sampled_from([None, "low", "high"]),
    ranked=st.sampled_from([None, True, False]),
)
def test_pages_of_any_batch_concatenate_to_its_top_3k(
    sources: list[list[str]], size: int, boost: str | None, ranked: bool | None
) -> None:
    """Copies (the same text in two sources), ties (the same text twice in one) and
    boosts included: pages 1-3 are exactly the top 3K, and the page after the last
    full one is empty with no next cursor."""
    results = [
        AdapterResult(
            f"s{i}", [{"id": f"s{i}-{j}", "text": t} for j, t in enumerate(rows)], ranked=ranked
        )
        for i, rows in enumerate(sources)
    ]
    boosts = {"s0": boost} if boost else {}
    context = {"query": "orders disk full"}
    settings_ = NautilusSettings(ranking_top_k=size, source_boosts=boosts)
    whole = RankingSynthesizer(top_k=3 * size, source_boosts=boosts).rank(results, context)
    ids = [f"s{i}" for i in range(len(sources))]
    seen = []
    pages = paging("q", settings_, ids, page=1)
    for _ in range(4):
        assert pages is not None
        ranker = pages.synthesizer(settings_, None)
        found = ranker.merge_ranked(results, context)
        data, ranking = found.data, found.ranking
        page, info, _ = pages.cut(BrokerResponse("r", data, ranking))
        seen += [(r.source_id, r.row["id"], r.score, r.rank) for r in page.ranking]
        if info["next_cursor"] is None:
            break
        pages = paging("q", settings_, ids, cursor=info["next_cursor"])
    expected = [(r.source_id, r.row["id"], r.score, r.rank) for r in whole]
    assert seen[: 3 * size] == expected
    assert len({(s, i) for s, i, _, _ in seen}) == len(seen)  # no row twice


def test_a_cursor_is_refused_for_other_settings_and_when_malformed() -> None:
    settings = NautilusSettings(ranking_top_k=3)
    first = paging(QUERY, settings, ["a", "b"], page=1)
    assert first is not None
    cursor = type(first)(2, 3, first.key, "data", keys=first.keys).cursor()
    assert paging(QUERY, settings, ["a", "b"], cursor=cursor) is not None
    with pytest.raises(PageError, match="made for pages of 3 rows, not 4") as refused:
        paging(QUERY, settings.model_copy(update={"ranking_top_k": 4}), ["a", "b"], cursor=cursor)
    assert refused.value.field == "cursor" and not refused.value.stale
    # without a page size of its own, a request pages by the cursor's
    unsized = paging(QUERY, NautilusSettings(), ["a", "b"], cursor=cursor)
    assert unsized is not None and (unsized.number, unsized.size) == (2, 3)
    for query, changed, ids in (
        (QUERY, {"ranking_idf": True}, ["a", "b"]),
        (QUERY, {"source_boosts": {"a": "high"}}, ["a", "b"]),
        (QUERY, {}, ["a"]),
        ("another query", {}, ["a", "b"]),
    ):
        with pytest.raises(PageError, match="another query or other settings") as refused:
            paging(query, settings.model_copy(update=changed), ids, cursor=cursor)
        assert refused.value.field == "cursor" and not refused.value.stale
    for garbage in ("", "not-a-cursor", "e30", cursor[:-3], cursor[:-2] + "AA"):
        with pytest.raises(PageError, match="not a cursor nautilus made"):
            paging(QUERY, settings, ["a", "b"], cursor=garbage)
    with pytest.raises(PageError, match="paging needs a page size"):
        paging(QUERY, NautilusSettings(), ["a"], page=1)
    with pytest.raises(PageError, match="both page and cursor"):
        paging(QUERY, settings, ["a"], page=1, cursor=cursor)
    for bad in (0, 1001, True):
        with pytest.raises(PageError, match="an integer from 1 to 1000"):
            paging(QUERY, settings, ["a"], page=bad)


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_nautilus("query", QUERY, *args, env={"NAUTILUS_RANKING_IDF": "true", **(env or {})})


def test_cli_pages_by_number_and_by_cursor_concatenate_to_the_top_3k() -> None:
    whole = json.loads(run("--top-k", "9", "--json").stdout)["ranking"]
    seen, cursor, firsts = [], None, []
    for _ in range(3):  # page 1 by number, then each next page by its cursor
        out = run("--top-k", "3", "--json", *(("--cursor", cursor) if cursor else ("--page", "1")))
        body = json.loads(out.stdout)
        seen += body["ranking"]
        firsts.append(body["page"]["first_rank"])
        cursor = body["page"]["next_cursor"]
    assert seen == whole and len(whole) == 9 and firsts == [1, 4, 7]
    table = run("--top-k", "3", "--cursor", cursor)
    assert table.returncode == 0
    assert "page 4 (3 rows a page); next: nautilus-ranking query " in table.stdout
    refused = run("--top-k", "5", "--cursor", cursor)
    assert refused.returncode == 2
    assert "cursor: " in refused.stderr and "made for pages of 3 rows, not 5" in refused.stderr
    assert "Traceback" not in refused.stderr
    unsized = run("--page", "2")
    assert unsized.returncode == 2 and "paging needs a page size" in unsized.stderr
    both = run("--top-k", "3", "--page", "2", "--cursor", cursor)
    assert both.returncode == 2 and "not allowed with argument" in both.stderr
    past = json.loads(run("--top-k", "3", "--page", "1000", "--json").stdout)
    assert past["ranking"] == [] and past["page"]["next_cursor"] is None


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("pages")
    env = {
        "NAUTILUS_RANKING_TOP_K": "3",
        "NAUTILUS_RANKING_IDF": "true",
        "NAUTILUS_CONFIG": str(sources_file(tmp, "orders-db disk full", timeout_s=None)),
        "NAUTILUS_CURSOR_KEY": SHARED_KEY,
    }
    with running(tmp, env) as srv:
        assert wait_ready(srv).status_code == 200, srv.logs()
        yield srv


def post(server: Server, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(server.url + "/v1/query", json=body, timeout=30)


def test_http_pages_concatenate_and_bad_cursors_are_422(server: Server) -> None:
    whole = post(server, {"query": QUERY, "top_k": 9}).json()["ranking"]
    seen: list[dict[str, Any]] = []
    body: dict[str, Any] = {"query": QUERY, "page": 1}
    for number in (1, 2, 3):
        answer = post(server, body)
        assert answer.status_code == 200, answer.text
        page = answer.json()
        assert page["page"]["number"] == number and page["page"]["size"] == 3
        seen += page["ranking"]
        body = {"query": QUERY, "cursor": page["page"]["next_cursor"]}
    assert seen == whole and len(whole) == 9
    assert "page" not in post(server, {"query": QUERY}).json()
    sized = post(server, {**body, "top_k": 4})
    assert sized.status_code == 422 and sized.json()["field"] == "cursor"
    assert "made for pages of 3 rows, not 4" in sized.json()["detail"]
    for changed in (
        {"idf": False},
        {"boosts": {"graph": "high"}},
        {"sources": ["graph", "tickets"]},
        {"query": "another query"},
    ):
        refused = post(server, {**body, **changed})
        assert refused.status_code == 422, refused.text
        problem = refused.json()
        assert refused.headers["content-type"] == "application/problem+json"
        assert problem["field"] == "cursor" and "other settings" in problem["detail"]
        assert problem["valid"] == "the next_cursor of a response to this same query and settings"
    for bad, field, valid in (
        ({"page": 0}, "page", "an integer from 1 to 1000"),
        ({"page": "two"}, "page", "an integer from 1 to 1000"),
        (
            {"page": 2, "cursor": body["cursor"]},
            "page",
            "one of them: page for a page by number, cursor to continue",
        ),
        ({"cursor": "zzz"}, "cursor", "the next_cursor of an earlier response, unchanged"),
    ):
        problem = post(server, {"query": QUERY, **bad}).json()
        assert (problem["status"], problem["field"], problem["valid"]) == (422, field, valid)


def test_http_honours_a_cli_cursor_and_refuses_one_whose_data_moved(
    server: Server, tmp_path: Path
) -> None:
    env = {  # another data directory: the key is the one the server was given
        "NAUTILUS_RANKING_TOP_K": "3",
        "NAUTILUS_CONFIG": str(sources_file(tmp_path, "orders-db disk full", timeout_s=None)),
        "NAUTILUS_DATA_DIR": str(tmp_path / "data"),
        "NAUTILUS_CURSOR_KEY": SHARED_KEY,
    }
    cli = json.loads(run("--page", "1", "--json", env=env).stdout)
    over_http = post(server, {"query": QUERY, "cursor": cli["page"]["next_cursor"]})
    assert over_http.status_code == 200, over_http.text
    assert over_http.json()["page"]["first_rank"] == 4
    cursor = post(server, {"query": QUERY, "page": 1}).json()["page"]["next_cursor"]
    (server.log.parent / "broken.jsonl").unlink()  # the server's source fails from now on
    stale = post(server, {"query": QUERY, "cursor": cursor})
    assert stale.status_code == 409, stale.text
    problem = stale.json()
    assert problem["type"] == "urn:nautilus:problem:cursor-stale"
    assert "answers changed since this cursor was made" in problem["detail"]
    assert problem["valid"] == "no cursor: ask for the first page again"


def test_a_top_k_says_more_rows_exist_and_the_hint_runs_as_printed() -> None:
    shown = run("--top-k", "3", "--boost", "runbooks:high")
    assert shown.returncode == 0, shown.stderr
    last = shown.stdout.splitlines()[-1]
    assert last.startswith("more rows past these 3; next: nautilus-ranking query ")
    command = shlex.split(last.split("next: ", 1)[1])
    assert command[:2] == ["nautilus-ranking", "query"] and "--cursor" in command
    base = plain_environment()
    base["NAUTILUS_DATA_DIR"] = os.environ["NAUTILUS_DATA_DIR"]
    base["NAUTILUS_RANKING_IDF"] = "true"
    for env in ({}, {"NAUTILUS_RANKING_TOP_K": "7"}):  # as printed, whatever the shell's K
        follow = run_nautilus(*command[1:], env=base | env)
        assert follow.returncode == 0, follow.stderr
        assert "page 2 (3 rows a page); next: nautilus-ranking query " in follow.stdout
    whole = json.loads(run("--top-k", "6", "--boost", "runbooks:high", "--json").stdout)
    second = json.loads(run_nautilus(*command[1:], "--json", env=base).stdout)
    assert [e["rank"] for e in second["ranking"]] == [4, 5, 6]
    assert [e["id"] for e in second["ranking"]] == [e["id"] for e in whole["ranking"][3:]]


def test_every_ranked_json_answer_with_a_top_k_carries_next_cursor() -> None:
    more = json.loads(run("--top-k", "3", "--json").stdout)
    assert "page" not in more and isinstance(more["next_cursor"], str)
    following = json.loads(run("--cursor", more["next_cursor"], "--json").stdout)
    assert following["page"]["number"] == 2 and following["page"]["first_rank"] == 4
    everything = json.loads(run("--top-k", "1000", "--json").stdout)
    assert everything["next_cursor"] is None
    passthrough = json.loads(run("--json", env={"NAUTILUS_RANKING_IDF": "false"}).stdout)
    assert passthrough["ranking_enabled"] is False and passthrough["next_cursor"] is None
    # the first page is the top K as it was: the same rows as --page 1
    paged = json.loads(run("--top-k", "3", "--page", "1", "--json").stdout)
    assert paged["ranking"] == more["ranking"] and paged["next_cursor"] == more["next_cursor"]
