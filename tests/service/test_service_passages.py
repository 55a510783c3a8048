"""A real ``serve`` with API keys and ranking profiles: under a budget a long row is
handed over as its passage, and the same request with ``whole: [handle]`` hands it
over whole. The handle goes through the same path as the request that found the row:
a key's profile still decides what the request ranks, so a handle taken from one
profile's answer gets nothing from a request whose own ranking does not hold the row,
and naming a profile the key may not use is refused whatever the body carries."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from long_rows import LONG, QUERY, SHORT, service_environment

from tools.servers import Server, running, wait_ready

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("service-passages")
    with running(tmp, service_environment(tmp)) as srv:
        assert wait_ready(srv).status_code == 200, srv.logs()
        yield srv


def ask(server: Server, key: str | None, **body: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.post(
        server.url + "/v1/query", json={"query": QUERY, **body}, headers=headers, timeout=30
    )


def rows_of(answer: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["id"]: row for row in answer["data"]["docs"]}


def test_a_long_row_is_a_passage_and_whole_when_the_same_request_asks(server: Server) -> None:
    first = ask(server, "k-wide")
    assert first.status_code == 200, first.text
    answer = first.json()
    assert answer["profile"] == "wide"
    [entry] = [e for e in answer["ranking"] if e["id"] == "long"]
    part = entry["passage"]
    assert part["field"] == "body" and part["length"] == len(LONG)
    assert rows_of(answer)["long"]["body"] == LONG[part["start"] : part["end"]]
    assert answer["budget"]["tokens_used"] <= 400 and not answer["budget"]["too_large_ranks"]
    # whole is no override: a profile that allows none still takes it
    again = ask(server, "k-wide", whole=[part["handle"]])
    assert again.status_code == 200, again.text
    whole = again.json()
    assert rows_of(whole)["long"]["body"] == LONG
    assert all("passage" not in e for e in whole["ranking"])
    assert [e["id"] for e in whole["ranking"]] == [e["id"] for e in answer["ranking"]]
    assert whole["budget"]["tokens_used"] > 400  # asked for whole: whatever it costs


def test_a_handle_gets_nothing_a_requests_own_ranking_does_not_hold(server: Server) -> None:
    handle = next(e for e in ask(server, "k-wide").json()["ranking"] if e["id"] == "long")[
        "passage"
    ]["handle"]
    narrow = ask(server, "k-narrow", whole=[handle])
    assert narrow.status_code == 200, narrow.text
    answer = narrow.json()
    assert answer["profile"] == "narrow"
    assert list(rows_of(answer)) == ["short"] and rows_of(answer)["short"]["body"] == SHORT
    # the handle does not open the other profile, nor a request without a key
    refused = ask(server, "k-narrow", profile="wide", whole=[handle])
    assert refused.status_code == 403 and refused.json()["field"] == "profile"
    assert ask(server, None, whole=[handle]).status_code == 401
    # a handle of no row of the answer changes nothing, a malformed one is a clear 422
    unknown = ask(server, "k-wide", whole=["row:" + "0" * 24]).json()
    assert "passage" in next(e for e in unknown["ranking"] if e["id"] == "long")
    bad = ask(server, "k-wide", whole=["long"])
    assert bad.status_code == 422 and "whole" in bad.text
