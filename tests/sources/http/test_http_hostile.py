"""An HTTP source against a hostile server on loopback (tools/hostile_http.py), beside a
well-behaved engine: each bad answer is one error naming the source, the call, the
status and what failed; the other source's rows still arrive; no traceback."""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from http_support import DOCS, built, es_entry, search, write_sources
from structlog.testing import capture_logs

from nautilus_ranking import Broker
from nautilus_ranking.sources.http.client import HttpSourceError
from tools import hostile_http
from tools.hostile_http import hostile_server
from tools.json_engine import json_engine

#: The bad source's entry, with this file's deadline (1.5 s) unless a test names another.
hostile_entry = partial(hostile_http.hostile_entry, timeout_s=1.5)


CASES = [
    # (path, options, what the error must say)
    (
        "slow-headers",
        {},
        r"bad: POST http://127\.0\.0\.1:\d+/slow-headers: no complete answer "
        r"within the deadline .*connecting and waiting for the headers",
    ),
    (
        "trickle",
        {},
        r"bad: POST .*/trickle: no complete answer within the deadline "
        r".*reading the body of a 200, \d+ bytes so far",
    ),
    (
        "huge",
        {"timeout_s": 20},
        r"bad: POST .*/huge: answered 200: the body is larger than "
        r"8,388,608 bytes \(more streamed\)",
    ),
    (
        "fifty-mb",
        {"timeout_s": 20, "max_bytes": 40 << 20},
        r"bad: POST .*/fifty-mb: answered "
        r"200: the body is larger than 41,943,040 bytes \(more streamed\)",
    ),
    (
        "huge-declared",
        {},
        r"bad: POST .*/huge-declared: answered 200: the body is larger than "
        r"8,388,608 bytes \(67,108,864 declared\)",
    ),
    (
        "gzip-bomb",
        {"timeout_s": 20},
        r"bad: POST .*/gzip-bomb: answered 200: the body is larger "
        r"than 8,388,608 bytes \(inflated\)",
    ),
    (
        "retry/429/30/5",
        {},
        r"bad: POST .*/retry/429/30/5: answered 429 \(Retry-After 30 s\): "
        r"the wait would end past the deadline",
    ),
    ("retry/503/-/5", {"retries": 1}, r"bad: POST .*/retry/503/-/5: answered 503: body '\{\}'"),
    (
        "body/html-500",
        {},
        r"bad: POST .*/body/html-500: answered 500: body '<html><body><h1>500 "
        r"Internal Server Error",
    ),
    (
        "body/not-json",
        {},
        r"bad: POST .*/body/not-json: answered 200 but the body is not JSON "
        r"\(Expecting value.*; content type application/json: '<html>gateway error</html>'",
    ),
    (
        "body/wrong-shape",
        {},
        r"bad: POST .*/body/wrong-shape: answered 200 but response.hits "
        r"'hits.hits' gave an object, expected a list of hits",
    ),
    (
        "body/a-list",
        {},
        r"bad: POST .*/body/a-list: answered 200 but response.hits 'hits.hits' "
        r"gave null \(no such path\)",
    ),
    (
        "body/deep",
        {},
        r"bad: POST .*/body/deep: answered 200 but the body is JSON nested too "
        r"deeply to read",
    ),
    (
        "body/deep-100",
        {},
        r"bad: POST .*/body/deep-100: answered 200 but the JSON nests deeper "
        r"than max_depth=64",
    ),
]


@pytest.mark.parametrize(("path", "options", "message"), CASES, ids=[c[0] for c in CASES])
def test_each_hostile_answer_fails_only_its_source_with_one_clear_error(
    tmp_path: Path, path: str, options: dict[str, Any], message: str
) -> None:
    with hostile_server() as hostile, json_engine(DOCS) as engine:
        sources = write_sources(
            tmp_path, es_entry(engine.url), hostile_entry(hostile.url, path, **options)
        )
        broker = Broker.from_config(sources)
        try:
            with capture_logs() as logs:
                response = broker.request("orders-db disk")
        finally:
            for source in broker.sources:
                source.close()
    assert [r["id"] for r in response.data["es"]][:2] == ["d00", "d01"]  # the others' rows
    [error] = response.sources_errored
    assert error.source_id == "bad"
    # a deadline is a timeout whichever deadline fired (the source's own, just before the
    # broker's, says what the call was doing); every other failure is the source's error
    deadline = "no complete answer within the deadline" in message
    assert error.error_type == ("timeout" if deadline else "HttpSourceError")
    assert re.search(message, error.message), error.message
    assert "Traceback" not in error.message
    failed = [e for e in logs if e.get("source_id") == "bad" and e["log_level"] == "warning"]
    assert len(failed) == 1  # one warning for the source, from the broker


def test_a_429_with_retry_after_inside_the_deadline_is_retried(tmp_path: Path) -> None:
    with (
        hostile_server() as hostile,
        built(tmp_path, hostile_entry(hostile.url, "retry/429/1/1", timeout_s=5)) as [source],
    ):
        with capture_logs() as logs:
            rows = search(source, "disk")
        assert hostile.paths == ["/retry/429/1/1"] * 2
    assert rows == [{"id": "h1", "title": "one hit", "engine_score": 1.0}]
    [retry] = [e for e in logs if e["event"] == "http_source_retry"]
    assert retry["status"] == 429 and retry["wait_s"] == 1


def test_retries_are_bounded(tmp_path: Path) -> None:
    with (
        hostile_server() as hostile,
        built(tmp_path, hostile_entry(hostile.url, "retry/502/0/9", retries=2)) as [source],
    ):
        with pytest.raises(HttpSourceError, match="answered 502"):
            search(source, "disk")
        assert len(hostile.paths) == 3  # the call and two retries


def test_a_500_is_not_retried(tmp_path: Path) -> None:
    with (
        hostile_server() as hostile,
        built(tmp_path, hostile_entry(hostile.url, "body/html-500")) as [source],
    ):
        with pytest.raises(HttpSourceError, match="answered 500"):
            search(source, "disk")
        assert len(hostile.paths) == 1


def test_a_failing_second_page_keeps_the_first_with_a_warning(tmp_path: Path) -> None:
    entry = hostile_entry("", "then-fail/1", paging={"by": "offset", "page_size": 2})
    entry["body"] = {"q": "{{query}}", "size": "{{size}}", "from": "{{offset}}"}
    with hostile_server() as hostile:
        entry["url"] = f"{hostile.url}/then-fail/1"
        with built(tmp_path, entry) as [source], capture_logs() as logs:
            rows = search(source, "disk", 5)
    assert [r["id"] for r in rows] == ["p1-0", "p1-1"]
    [warning] = [e for e in logs if e["event"] == "http_source_page_failed"]
    assert warning["page"] == 2 and warning["kept_rows"] == 2
    assert "then-fail/1: answered 500" in warning["error"]


def test_a_bad_hit_is_dropped_with_a_warning_naming_it(tmp_path: Path) -> None:
    with (
        hostile_server() as hostile,
        built(tmp_path, hostile_entry(hostile.url, "body/one-bad-hit")) as [source],
        capture_logs() as logs,
    ):
        rows = search(source, "disk")
    assert [r["id"] for r in rows] == ["a", "b"]
    [dropped] = [e for e in logs if e["event"] == "http_source_hits_dropped"]
    assert dropped["source_id"] == "bad" and dropped["count"] == 1
    assert dropped["first_problem"] == (
        "hit 1: id is null (no such path), expected a string or a number"
    )


def test_a_redirect_is_not_followed(tmp_path: Path) -> None:
    with (
        hostile_server() as hostile,
        built(tmp_path, hostile_entry(hostile.url, "redirect")) as [source],
        pytest.raises(HttpSourceError, match=r"answered 302: a redirect to .*, not followed"),
    ):
        search(source, "disk")
