"""The protocols callers rely on: every synthesizer answers ``merge_ranked``,
``ranking_enabled`` and ``embedder``; every source ``ranked`` and ``prepare`` — the
package's own directly, a caller's older or duck-typed object through the protocol's
defaults."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from fakes import write_jsonl

from nautilus_ranking import AdapterResult, BasicSynthesizer, RankingSynthesizer, Synthesizer
from nautilus_ranking.broker import Broker
from nautilus_ranking.sources.base import ForwardingSource, Source, declared_order, preparer
from nautilus_ranking.sources.sqlite.table import SqliteTableSource


class ReversingMerge:
    """A synthesizer written against the older protocol: ``merge`` only."""

    def merge(
        self, results: list[AdapterResult], context: Mapping[str, Any] | None = None
    ) -> dict[str, list[dict[str, Any]]]:
        return {r.source_id: list(reversed(r.rows)) for r in results if r.error is None}


class RowsOnly:
    """A source with only what the oldest protocol asked: no ``ranked``, no ``prepare``."""

    id = "plain"
    timeout_s = 2.0

    async def search(self, query: str, context: Mapping[str, Any], limit: int) -> list[Any]:
        return [{"t": "disk full"}, {"t": "cpu hot"}]

    def close(self) -> None:
        pass


def test_the_package_synthesizers_have_the_whole_protocol() -> None:
    basic, ranking = BasicSynthesizer(), RankingSynthesizer()
    assert isinstance(basic, Synthesizer) and isinstance(ranking, Synthesizer)
    assert (basic.ranking_enabled, basic.embedder) == (False, None)
    assert ranking.ranking_enabled and ranking.embedder is not None


def test_a_merge_only_synthesizer_is_refused_naming_the_protocol() -> None:
    with pytest.raises(
        TypeError, match="ReversingMerge is not a Synthesizer: it needs merge, merge_ranked"
    ):
        Broker([RowsOnly()], ReversingMerge())  # type: ignore[arg-type]
    broker = Broker([RowsOnly()])
    with pytest.raises(TypeError, match="not a Synthesizer"):
        broker.synthesizer = ReversingMerge()  # type: ignore[assignment]


def test_a_duck_typed_source_reads_as_the_defaults_say() -> None:
    source = RowsOnly()
    assert declared_order(source) is None and preparer(source) is None
    result = asyncio.run(Broker([source]).fetch("disk"))[0]
    assert result.error is None and result.ranked is None and len(result.rows) == 2


def test_a_forwarding_source_forwards_order_build_search_and_close(tmp_path: Path) -> None:
    seed = tmp_path / "t.jsonl"
    write_jsonl(seed, [{"id": 1, "title": "disk full on orders-db"}])
    inner = SqliteTableSource("t", tmp_path / "t.db", seed, "t", ["title"])
    closed: list[bool] = []

    class Counting(ForwardingSource):
        def close(self) -> None:
            closed.append(True)
            super().close()

    wrapped = Counting(inner)
    assert isinstance(wrapped, Source) and isinstance(inner, Source)
    assert (wrapped.id, wrapped.timeout_s, wrapped.ranked) == ("t", inner.timeout_s, False)
    assert not (tmp_path / "t.db").exists()
    asyncio.run(wrapped.prepare())  # the inner source's build step runs
    assert (tmp_path / "t.db").exists()
    rows = asyncio.run(wrapped.search("disk", {"query": "disk"}, 5))
    assert [row["title"] for row in rows] == ["disk full on orders-db"]
    wrapped.close()
    assert closed == [True]


def test_callers_ask_the_protocol_not_the_class() -> None:
    """Only the protocol modules read optional members; nobody tests for the ranker's class."""
    import re

    package = Path(__file__).resolve().parents[1] / "nautilus_ranking"
    protocol = {package / "sources" / "base.py", package / "synthesis" / "base.py"}
    asks_class = re.compile(r"isinstance\([^)]*RankingSynthesizer")
    reads_member = re.compile(r"getattr\((source|src|s|self\.source), ")
    offenders = [
        f"{path.relative_to(package)}:{number}"
        for path in sorted(package.rglob("*.py"))
        if path not in protocol
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if asks_class.search(line) or reads_member.search(line)
    ]
    assert offenders == []


def test_callers_read_the_synthesizer_through_its_protocol() -> None:
    """No caller probes a synthesizer for an undeclared member or tests its class: what
    they use (``merge_ranked``'s result, ``max_candidates``) is declared."""
    import re

    package = Path(__file__).resolve().parents[1] / "nautilus_ranking"
    probes = re.compile(
        r"getattr\(\s*(self\.)?synthesizer\s*,\s*\"|type\([^)]*synthesizer\)\s*(in|is|==)"
    )
    offenders = [
        f"{path.relative_to(package)}:{number}"
        for path in sorted(package.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if probes.search(line)
    ]
    assert offenders == []


def test_a_ranking_says_what_it_found_in_the_result_it_returns() -> None:
    """The confidence and what time did come back in ``merge_ranked``'s result: a
    second ranking in the same context never hands its notes to the first's caller."""
    rows = [
        AdapterResult("a", [{"t": "disk full on orders", "at": "2024-01-01"}]),
        AdapterResult("b", [{"t": "cpu hot", "at": "2024-02-01"}]),
    ]
    timed = RankingSynthesizer(recency="half_life:30d", time_fields={"a": "at", "b": "at"})
    found = timed.merge_ranked(rows, {"query": "disk full"})
    RankingSynthesizer().merge_ranked(rows, {"query": "cpu"})  # a later ranking
    assert found.confidence is not None and found.time is not None
    assert found.time["reference"] == "2024-02-01"
    assert found.rows_unchanged and found.cut is None and found.embedding is None
    basic = BasicSynthesizer().merge_ranked(rows)
    assert (basic.confidence, basic.time, basic.abstain, basic.nearest) == (None, None, None, [])
    assert BasicSynthesizer().max_candidates is None
