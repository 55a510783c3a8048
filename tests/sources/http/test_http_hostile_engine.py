"""An HTTP source against an engine that attacks it (tools/hostile_http.py), beside a
well-behaved one (tools/json_engine.py): compression bombs, a flood of bad hits,
credentials quoted back, redirects elsewhere, errors of every kind, ids that are not
numbers and path expressions nested without end. Each fails only its own source, with
one clear, masked message, and the other source answers within its own deadline."""

from __future__ import annotations

import asyncio
import base64
import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from cli_process import run_nautilus
from http_support import DOCS, built, es_entry, search, write_sources
from plain_environment import plain_environment
from structlog.testing import capture_logs

from nautilus_ranking import Broker
from nautilus_ranking.records import BrokerResponse
from nautilus_ranking.service.readiness import Readiness
from nautilus_ranking.sources.http.client import HttpSourceError
from tools import hostile_http
from tools.hostile_http import hostile_server
from tools.json_engine import json_engine

MB = 1 << 20


#: The bad source's entry, with this file's deadline (3 s) unless a test names another.
hostile_entry = partial(hostile_http.hostile_entry, timeout_s=3)


def _rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@contextmanager
def peak_rss() -> Iterator[list[int]]:
    """[the resident size before, the highest seen meanwhile], sampled every 5 ms."""
    seen = [_rss(), _rss()]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.005):
            seen[1] = max(seen[1], _rss())

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        done.set()
        thread.join()
        seen[1] = max(seen[1], _rss())


def ask(tmp_path: Path, *entries: dict[str, Any], query: str = "orders-db disk") -> Any:
    """The broker's response over ``entries`` beside the well-behaved ``es`` (timeout
    5 s), and every log event meanwhile."""
    with json_engine(DOCS) as engine:
        broker = Broker.from_config(
            write_sources(tmp_path, es_entry(engine.url, timeout_s=5), *entries)
        )
        try:
            with capture_logs() as logs:
                response = broker.request(query)
        finally:
            broker.close()
    return response, logs


def answered(response: BrokerResponse) -> None:
    """The well-behaved source answered, within its own deadline."""
    assert "es" not in [e.source_id for e in response.sources_errored]
    assert [r["id"] for r in response.data["es"]][:2] == ["d00", "d01"]


# 1. Compression bombs ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("coding", "message"),
    [
        ("gzip-gzip", r"the body is larger than 8,388,608 bytes \(inflated\)"),
        ("deflate", r"the body is larger than 8,388,608 bytes \(inflated\)"),
        ("zstd", r"answered 200 in content coding 'zstd', which was not offered"),
        ("br", r"answered 200 in content coding 'br', which was not offered"),
    ],
)
def test_a_compression_bomb_is_refused_as_it_inflates(
    tmp_path: Path, coding: str, message: str
) -> None:
    with hostile_server() as hostile:
        bad = hostile_entry(hostile.url, f"bomb/{coding}", timeout_s=20)
        with peak_rss() as rss:
            response, _ = ask(tmp_path, bad)
        heads = list(hostile.heads)
    answered(response)
    [error] = response.sources_errored
    assert error.source_id == "bad"
    assert f"bad: POST {hostile.url}/bomb/{coding}: " in error.message
    assert re.search(message, error.message), error.message
    assert rss[1] - rss[0] < 100 * MB, f"{(rss[1] - rss[0]) / MB:.0f} MB more"
    [head] = heads
    assert b"\r\naccept-encoding: gzip, deflate\r\n" in head.lower()  # only what is bounded


def test_a_gzip_bomb_inflates_no_further_than_the_cap(tmp_path: Path) -> None:
    with hostile_server() as hostile:
        bad = hostile_entry(hostile.url, "bomb/gzip", timeout_s=20, max_bytes=2 * MB)
        with peak_rss() as rss:
            response, _ = ask(tmp_path, bad)
    answered(response)
    assert "larger than 2,097,152 bytes (inflated)" in response.sources_errored[0].message
    assert rss[1] - rss[0] < 100 * MB


# 2. A flood of bad hits is counted, not logged one by one -----------------------------


def test_a_million_empty_hits_are_one_counted_warning(tmp_path: Path) -> None:
    with hostile_server() as hostile:
        response, logs = ask(tmp_path, hostile_entry(hostile.url, "body/empty-hits"))
    answered(response)
    assert response.data["bad"] == []
    mine = [e for e in logs if e.get("source_id") == "bad"]
    assert len(mine) <= 2, [e["event"] for e in mine]
    [dropped] = [e for e in mine if e["event"] == "http_source_hits_dropped"]
    assert dropped["page"] == 1
    assert dropped["count"] + dropped["not_read"] == 1_000_000  # past the size asked: unread
    assert 0 < dropped["count"] <= 100
    assert dropped["first_problem"].startswith("hit 0: id is null")
    warned = {w.warning_type: w for w in response.sources_warned if w.source_id == "bad"}
    assert warned["hits_dropped"].count == dropped["count"]


# 3. Credentials an engine quotes back are masked everywhere --------------------------

TOKEN = "tok-9f8e7d6c5b4a39281706"
PASSWORD = "pw-Zq8x7w6v5u4t"
CREDENTIALED = {
    "bearer": ({"auth": {"type": "bearer", "token": TOKEN}}, [TOKEN]),
    "api-key header": ({"headers": {"X-API-Key": TOKEN}}, [TOKEN]),
    "basic": (
        {"auth": {"type": "basic", "username": "ops", "password": PASSWORD}},
        [PASSWORD, base64.b64encode(f"ops:{PASSWORD}".encode()).decode()],
    ),
}


@pytest.mark.parametrize("pad", [0, 150, 190])
@pytest.mark.parametrize("case", list(CREDENTIALED))
def test_a_credential_quoted_back_is_masked_in_errors_readiness_and_logs(
    tmp_path: Path, case: str, pad: int
) -> None:
    options, secrets = CREDENTIALED[case]
    with hostile_server() as hostile:
        bad = hostile_entry(hostile.url, f"echo-401/{pad}", **options)
        response, logs = ask(tmp_path, bad)
        with built(tmp_path, bad) as [source]:
            readiness = Readiness([source], 10.0)
            asyncio.run(readiness.probe_once())
            ready = readiness.failing()["bad"]
    answered(response)
    [error] = response.sources_errored
    assert "answered 401: security_exception" in error.message
    shown = " ".join([error.message, ready, repr(logs)])
    for secret in secrets:
        for piece in (secret, secret[:8], secret[-8:]):  # whole, or cut at a length
            assert piece not in shown, (piece, shown)


def test_an_elasticsearch_api_key_quoted_back_is_masked(tmp_path: Path) -> None:
    key = base64.b64encode(b"VuaCfGcBCdbkQm-e5aOx:ui2lp2axTNmsyakw9tvNnw").decode()
    with hostile_server() as hostile:
        bad = {**es_entry(hostile.url, api_key=key), "id": "bad", "index": "echo-401"}
        bad["url"] = hostile.url
        with (
            built(tmp_path, bad) as [source],
            capture_logs() as logs,
            pytest.raises(HttpSourceError) as caught,
        ):
            search(source, "disk")
    shown = str(caught.value) + repr(logs)
    assert "echo-401" in shown
    for piece in (key, key[:8], "ui2lp2axTNmsyakw9tvNnw", "VuaCfGcBCdbkQm-e5aOx"):
        assert piece not in shown, piece


# 4. Credentials never follow a redirect to another origin ----------------------------


def test_a_credentialed_source_refuses_a_redirect_to_another_origin(tmp_path: Path) -> None:
    with hostile_server() as hostile, hostile_server() as other:
        target = f"{other.url}/retry/500/-/0"
        entry = hostile_entry(
            hostile.url,
            f"redirect-to?u={target}",
            follow_redirects=True,
            headers={"X-API-Key": TOKEN, "X-TYPESENSE-API-KEY": TOKEN},
        )
        with built(tmp_path, entry) as [source], pytest.raises(HttpSourceError) as caught:
            search(source, "disk")
        reached = list(other.heads)
    assert reached == []  # the other host got nothing, let alone the key
    message = str(caught.value)
    assert message.startswith(f"bad: POST {hostile.url}/redirect-to?u=")
    assert f"a redirect to another origin ({other.url})" in message
    assert TOKEN not in message


def test_a_redirect_within_the_origin_or_without_credentials_is_followed(
    tmp_path: Path,
) -> None:
    with hostile_server() as hostile, hostile_server() as other:
        same = hostile_entry(
            hostile.url,
            "redirect-to?u=/retry/500/-/0",
            follow_redirects=True,
            headers={"X-API-Key": TOKEN},
        )
        elsewhere = hostile_entry(
            hostile.url, f"redirect-to?u={other.url}/retry/500/-/0", follow_redirects=True
        )
        with built(tmp_path, same) as [source]:
            assert [r["id"] for r in search(source, "disk")] == ["h1"]
        with built(tmp_path, elsewhere) as [source]:
            assert [r["id"] for r in search(source, "disk")] == ["h1"]
        assert len(other.heads) == 1


# 5. Every other error is the documented one; a bad hit goes alone; pages are kept ------

ERRORS = [
    ("bad-gzip", {}, "disk", r"answered 200 but its gzip body does not decode"),
    ("loop", {"follow_redirects": True}, "disk", r"more than 5 redirects"),
    (
        "retry/500/-/0",
        {"method": "GET", "body": None, "params": {"q": "{{query}}"}},
        "disk " * 20_000,
        r"the request cannot be sent \(InvalidURL",
    ),
    (
        "retry/500/-/0",
        {"method": "GET", "body": None, "params": {"q": "{{query}}"}},
        "disk \ud800",
        r"the request cannot be sent \(UnicodeEncodeError",
    ),
]


@pytest.mark.parametrize(
    ("path", "options", "query", "message"),
    ERRORS,
    ids=["bad-gzip", "redirect-loop", "100-kB-query", "lone-surrogate"],
)
def test_an_error_of_any_kind_is_the_sources_error_naming_the_call(
    tmp_path: Path, path: str, options: dict[str, Any], query: str, message: str
) -> None:
    with hostile_server() as hostile:
        entry = hostile_entry(hostile.url, path, **options)
        entry = {k: v for k, v in entry.items() if v is not None}
        response, _ = ask(tmp_path, entry, query=query)
    [error] = response.sources_errored
    assert error.source_id == "bad" and error.error_type == "HttpSourceError"
    method = options.get("method", "POST")
    assert error.message.startswith(f"bad: {method} {hostile.url}/{path}: "), error.message
    assert re.search(message, error.message), error.message


def test_an_unreadable_retry_after_is_a_back_off(tmp_path: Path) -> None:
    with (
        hostile_server() as hostile,
        built(tmp_path, hostile_entry(hostile.url, "retry/503/%C2%B2/1")) as [source],
    ):
        assert [r["id"] for r in search(source, "disk")] == ["h1"]
        assert len(hostile.paths) == 2


def test_a_hit_whose_mapping_raises_is_dropped_alone(tmp_path: Path) -> None:
    entry = hostile_entry("", "body/object-id")
    entry["response"] = {"hits": "hits.hits", "id": "_id", "title": "abs(_score)"}
    with hostile_server() as hostile:
        entry["url"] = f"{hostile.url}/body/object-id"
        response, logs = ask(tmp_path, entry)
    assert response.sources_errored == []
    assert [r["id"] for r in response.data["bad"]] == ["a", "c"]
    [dropped] = [e for e in logs if e["event"] == "http_source_hits_dropped"]
    assert dropped["count"] == 2


def test_a_huge_integer_score_costs_no_other_hit(tmp_path: Path) -> None:
    with hostile_server() as hostile:
        response, _ = ask(tmp_path, hostile_entry(hostile.url, "body/huge-score"))
    assert response.sources_errored == []
    assert {"a", "b"} <= {r["id"] for r in response.data["bad"]}


def test_a_deadline_on_a_later_page_keeps_the_earlier_pages(tmp_path: Path) -> None:
    entry = hostile_entry("", "then-trickle/1", paging={"by": "offset", "page_size": 2})
    entry["body"] = {"q": "{{query}}", "size": "{{size}}", "from": "{{offset}}"}
    with hostile_server() as hostile:
        entry["url"] = f"{hostile.url}/then-trickle/1"
        response, logs = ask(tmp_path, entry)
    assert response.sources_errored == []
    assert [r["id"] for r in response.data["bad"]] == ["p1-0", "p1-1"]
    warned = {w.warning_type: w for w in response.sources_warned if w.source_id == "bad"}
    assert (
        "page 2" in warned["page_failed"].message
        and "within the deadline" in warned["page_failed"].message
    )
    assert any(e["event"] == "http_source_page_failed" for e in logs)


def test_a_failing_later_page_is_reported_in_sources_warned(tmp_path: Path) -> None:
    entry = hostile_entry("", "then-fail/1", paging={"by": "offset", "page_size": 2})
    entry["body"] = {"q": "{{query}}", "size": "{{size}}", "from": "{{offset}}"}
    with hostile_server() as hostile:
        entry["url"] = f"{hostile.url}/then-fail/1"
        response, _ = ask(tmp_path, entry)
    assert [r["id"] for r in response.data["bad"]] == ["p1-0", "p1-1"]
    warned = {w.warning_type: w for w in response.sources_warned if w.source_id == "bad"}
    assert "answered 500" in warned["page_failed"].message


# 7. Ids that are not numbers -------------------------------------------------------------


def test_nan_and_infinite_ids_are_dropped_with_a_counted_warning(tmp_path: Path) -> None:
    with hostile_server() as hostile:
        response, logs = ask(tmp_path, hostile_entry(hostile.url, "body/nan-ids"))
    assert [r["id"] for r in response.data["bad"]] == ["a", "b"]
    [dropped] = [e for e in logs if e["event"] == "http_source_hits_dropped"]
    assert dropped["count"] == 3
    assert dropped["first_problem"] == "hit 0: id is float 'nan', expected a string or a number"


# 8. Path expressions nested without end -----------------------------------------------


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("(" * 2000 + "a" + ")" * 2000, "response.title: JMESPath longer than 1,000 characters"),
        ("a" + " | a" * 3000, "response.title: JMESPath longer than 1,000 characters"),
        ("a" + "|a" * 300, "response.title: JMESPath nested deeper than 32"),
        ("!" * 900 + "a", "response.title: JMESPath nested deeper than 32"),
    ],
    ids=["parens", "pipes", "short-pipes", "nots"],
)
def test_a_path_nested_without_end_is_refused_when_the_file_is_read(
    tmp_path: Path, path: str, message: str
) -> None:
    entry = hostile_entry("http://127.0.0.1:9", "s")
    entry["response"] = {"hits": "hits.hits", "id": "_id", "title": path}
    write_sources(tmp_path, entry)
    env = plain_environment()
    env["NAUTILUS_DATA_DIR"] = str(tmp_path / "data")
    out = run_nautilus("config", "--strict", "--config", "nautilus.yaml", env=env, cwd=tmp_path)
    assert out.returncode == 1
    assert "Traceback" not in out.stderr and "RecursionError" not in out.stderr
    assert "nautilus.yaml: sources[0] (bad, http): " in out.stderr, out.stderr[-500:]
    assert message in out.stderr, out.stderr[-500:]
