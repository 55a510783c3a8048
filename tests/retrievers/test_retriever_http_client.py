"""The retrievers' HTTP client against a hostile server on loopback (tools/hostile_http.py):
``timeout_s`` bounds the whole call however slowly the bytes come, an answer too large is
refused as it streams in, and every kind of bad answer is the documented ``ServiceError``,
from the sync and the async call alike."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from nautilus_ranking.retrievers.source import MAX_ANSWER_BYTES, HitSource, ServiceError
from tools.hostile_http import BODIES, HUGE_BYTES, Hostile, hostile_server


@pytest.fixture(scope="module")
def server() -> Iterator[Hostile]:
    with hostile_server() as hostile:
        yield hostile


def call(url: str, how: str, timeout_s: float = 30.0) -> ServiceError:
    source = HitSource(url=url, timeout_s=timeout_s)
    with pytest.raises(ServiceError) as caught:
        if how == "sync":
            source.hits("disk full")
        else:
            asyncio.run(source.ahits("disk full"))
    return caught.value


@pytest.mark.parametrize("how", ["sync", "async"])
@pytest.mark.parametrize("mode", ["trickle", "slow-headers"])
def test_timeout_s_bounds_the_whole_call(server: Hostile, mode: str, how: str) -> None:
    # A byte every 0.3 s never trips a per-read timeout of 1 s; only a deadline ends it.
    started = time.monotonic()
    error = call(f"{server.url}/{mode}", how, timeout_s=1.0)
    took = time.monotonic() - started
    assert "within timeout_s=1 s" in str(error)
    assert took < 4.0, took  # the deadline, not the server (which would go on for ever)


@pytest.mark.parametrize("how", ["sync", "async"])
@pytest.mark.parametrize("mode", ["huge", "huge-declared"])
def test_an_answer_too_large_is_refused_unread(server: Hostile, mode: str, how: str) -> None:
    before = len(server.sent)
    error = call(f"{server.url}/{mode}", how)
    assert f"larger than max_answer_bytes={MAX_ANSWER_BYTES:,}" in str(error)
    deadline = time.monotonic() + 10
    while len(server.sent) == before and time.monotonic() < deadline:
        time.sleep(0.05)
    # The client hung up: the server could not send its 64 MiB.
    assert server.sent[-1] < HUGE_BYTES, server.sent


@pytest.mark.parametrize("how", ["sync", "async"])
@pytest.mark.parametrize("name", sorted(BODIES))
def test_every_bad_answer_is_a_service_error(server: Hostile, name: str, how: str) -> None:
    error = call(f"{server.url}/body/{name}", how)
    message = str(error)
    assert message.startswith(
        f"{server.url}/body/{name}/v1/query: the answer is"
    ) or message.startswith("nautilus-ranking serve answered 500"), message
    assert len(message) < 600, message


def test_a_sync_call_inside_a_running_loop_still_has_its_deadline(server: Hostile) -> None:
    async def inside() -> ServiceError:
        return call(f"{server.url}/trickle", "sync", timeout_s=1.0)

    assert "within timeout_s=1 s" in str(asyncio.run(inside()))
