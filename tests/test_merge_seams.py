"""Where features meet: the service's source wrapper, the build deadline, CLI flag checks."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

import pytest

from nautilus_ranking.broker import Broker
from nautilus_ranking.cli import main
from nautilus_ranking.service.metrics import TimedSource


class _Source:
    def __init__(self, source_id: str, ranked: bool | None = None, build_s: float = 0.0) -> None:
        self.id, self.timeout_s, self.ranked, self.build_s = source_id, 0.5, ranked, build_s
        self.prepared = 0

    async def prepare(self) -> None:
        self.prepared += 1
        await asyncio.sleep(self.build_s)

    async def search(
        self, query: str, context: Mapping[str, Any], limit: int
    ) -> list[dict[str, Any]]:
        return [{"id": f"{self.id}-1", "title": "disk full"}]

    def close(self) -> None:
        pass


def test_the_service_wrapper_keeps_a_sources_ranked_word_and_its_build_step() -> None:
    inner = _Source("fts", ranked=True)
    wrapped = TimedSource(inner)  # type: ignore[arg-type]
    assert wrapped.ranked is True
    asyncio.run(wrapped.prepare())
    assert inner.prepared == 1
    result = asyncio.run(Broker([wrapped]).fetch("disk"))[0]
    assert result.ranked is True and inner.prepared == 2  # the broker builds, then asks


def test_a_hung_build_fails_its_source_at_the_build_deadline_and_the_others_answer() -> None:
    hung, good = _Source("hung", build_s=3600), _Source("good")
    broker = Broker([hung, good], prepare_timeout_s=0.2)  # type: ignore[list-item]
    started = time.perf_counter()
    response = broker.request("disk")
    assert time.perf_counter() - started < 2
    assert [(e.source_id, e.error_type) for e in response.sources_errored] == [
        ("hung", "build_timeout")
    ]
    assert [r["id"] for r in response.data["good"]] == ["good-1"]


@pytest.mark.parametrize(
    "argv",
    [
        ["serve", "--port", "99999"],
        ["serve", "--port", "abc"],
        ["serve", "--workers", "-1"],
        ["demo", "--top-k", "0"],
    ],
)
def test_a_bad_flag_value_is_a_usage_error(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert argv[1] in capsys.readouterr().err  # the message names the flag
