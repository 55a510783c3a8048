"""One traced request in-process: the request span under the caller's, a span per source
(rows, type, error type as the status for a timeout and a raise), one ranking span whose
attributes say what each stage kept; no query text unless asked; log lines carry ids."""

from __future__ import annotations

import asyncio
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeSource
from opentelemetry import trace
from opentelemetry.trace import SpanKind, StatusCode
from tracing_support import P, by_name, exported_text, recorded

from nautilus_ranking import Broker, NautilusSettings
from nautilus_ranking.log import configure_logging
from nautilus_ranking.request.answer import answer, answer_sync
from nautilus_ranking.request.engine import Engine
from nautilus_ranking.request.model import parse_request
from nautilus_ranking.synthesis.ranking import RankingSynthesizer

QUERY = "orders-db disk full"


def demo_engine(**env: Any) -> Engine:
    return Engine.assemble(NautilusSettings(_env_file=None, **env))  # type: ignore[call-arg]


def test_a_request_is_a_request_span_with_each_source_and_the_ranking_under_it() -> None:
    engine = demo_engine(ranking_top_k=5, source_boosts="runbooks:high", ranking_max_tokens=300)
    with recorded() as exporter:
        tracer = trace.get_tracer("caller")
        with tracer.start_as_current_span("caller", kind=SpanKind.SERVER) as caller:
            result = answer_sync(engine, parse_request({"query": QUERY}))
        spans = exporter.get_finished_spans()
    engine.broker.close()
    named = by_name(spans)
    request = named[f"{P}request"]
    assert request.parent is not None
    assert request.parent.span_id == caller.get_span_context().span_id
    sources = {n: s for n, s in named.items() if n.startswith(f"{P}source ")}
    assert sorted(sources) == sorted(f"{P}source {sid}" for sid in engine.source_ids)
    ranking = named[f"{P}ranking"]
    for span in [*sources.values(), ranking]:
        assert span.parent is not None and span.parent.span_id == request.context.span_id
        assert span.context.trace_id == caller.get_span_context().trace_id
    runbooks = sources[f"{P}source runbooks"].attributes or {}
    assert runbooks[f"{P}source.type"] == "sqlite_fts"
    assert runbooks["db.system.name"] == "sqlite"
    assert runbooks[f"{P}source.rows"] > 0
    a = ranking.attributes or {}
    assert list(a[f"{P}ranking.stages"]) == [
        "fusion",
        "copies",
        "top_k",
        "confidence",
        "page",
        "budget",
    ]
    # Fusion scores every row the sources returned; page 1 of K=5 ranks 5·1+1 rows.
    returned = sum(s.attributes[f"{P}source.rows"] for s in sources.values())  # type: ignore[index]
    assert a[f"{P}ranking.fusion.rows_in"] == returned
    assert list(a[f"{P}ranking.fusion.boosted_sources"]) == ["runbooks:high"]
    assert (a[f"{P}ranking.top_k.k"], a[f"{P}ranking.top_k.rows_out"]) == (6, 6)
    found = result.response.confidence or {}
    assert a[f"{P}ranking.confidence.value"] == found["value"]
    assert (a[f"{P}ranking.confidence.rows_in"], a[f"{P}ranking.confidence.rows_out"]) == (6, 6)
    assert (a[f"{P}ranking.page.rows_in"], a[f"{P}ranking.page.rows_out"]) == (6, 5)
    rows = sum(len(v) for v in result.response.data.values())
    budget = result.response.budget or {}
    assert a[f"{P}ranking.budget.rows_in"] == 5
    assert a[f"{P}ranking.budget.rows_out"] == rows
    assert a[f"{P}ranking.budget.tokens_used"] == budget["tokens_used"]
    assert a[f"{P}ranking.budget.rows_left_out"] == budget["rows_left_out"] == 5 - rows
    assert (request.attributes or {})[f"{P}response.rows"] == rows
    # the ranking span runs from the ranking's start to its last stage, inside the request
    assert request.start_time <= ranking.start_time <= ranking.end_time <= request.end_time  # type: ignore[operator]


def test_a_timed_out_and_a_raising_source_are_spans_with_their_error_type() -> None:
    broker = Broker(
        [
            FakeSource("ok", [{"id": "a", "text": "orders-db disk full"}, "not a row"]),
            FakeSource("stuck", hang=True, timeout_s=0.05),
            FakeSource("broken", raises=ConnectionResetError("peer hung up on secret-host")),
        ],
        RankingSynthesizer(top_k=3),
    )
    with recorded() as exporter:
        result = answer_sync(Engine.of(broker), parse_request({"query": QUERY}))
        spans = exporter.get_finished_spans()
    named = by_name(spans)
    assert sorted(e.source_id for e in result.response.sources_errored) == ["broken", "stuck"]
    stuck, broken = named[f"{P}source stuck"], named[f"{P}source broken"]
    assert (stuck.status.status_code, stuck.status.description) == (StatusCode.ERROR, "timeout")
    assert (stuck.attributes or {})["error.type"] == "timeout"
    assert broken.status.status_code == StatusCode.ERROR
    assert (broken.attributes or {})["error.type"] == "ConnectionResetError"
    assert (broken.attributes or {})[f"{P}source.rows"] == 0
    ok = named[f"{P}source ok"]
    assert ok.status.status_code == StatusCode.UNSET
    assert (ok.attributes or {})[f"{P}source.rows"] == 1
    assert (ok.attributes or {})[f"{P}source.rows_dropped"] == 1
    assert (named[f"{P}request"].attributes or {})[f"{P}sources.errored"] == ("broken", "stuck")
    # the error's message (a host name, a row, a query) is the log's, never the span's
    assert "secret-host" not in exported_text(spans)


def test_the_query_text_is_recorded_only_when_the_operator_turns_it_on() -> None:
    query = "zebra-7731 password reset for alice@example.com"
    for on in (False, True):
        engine = demo_engine(ranking_top_k=3, trace_query_text=on)
        with recorded() as exporter:
            answer_sync(engine, parse_request({"query": query}))
            text = exported_text(exporter.get_finished_spans())
            request = by_name(exporter.get_finished_spans())[f"{P}request"]
        engine.broker.close()
        assert ("zebra-7731" in text) is on
        assert "alice@example.com" in text if on else "alice" not in text
        assert (request.attributes or {})[f"{P}query.chars"] == len(query)


def test_a_broker_called_alone_writes_its_own_ranking_span_under_the_callers() -> None:
    """A library call of ``Broker.arequest`` (as inside a host broker's synthesis span):
    the sources' spans and the ranking span are children of the caller's span."""
    broker = Broker(
        [FakeSource("a", [{"id": str(i), "text": f"disk {i}"} for i in range(4)])],
        RankingSynthesizer(top_k=2),
    )
    with recorded() as exporter:
        with trace.get_tracer("host").start_as_current_span("synthesis") as host:
            response = broker.request(QUERY)
        named = by_name(exporter.get_finished_spans())
    assert set(named) == {"synthesis", f"{P}source a", f"{P}ranking"}
    for name in (f"{P}source a", f"{P}ranking"):
        assert named[name].parent.span_id == host.get_span_context().span_id  # type: ignore[union-attr]
    a = named[f"{P}ranking"].attributes or {}
    assert a[f"{P}ranking.top_k.rows_out"] == len(response.ranking) == 2


def test_log_lines_inside_a_traced_request_carry_its_trace_and_span_ids() -> None:
    out = io.StringIO()
    configure_logging("warning", "json", out)
    broker = Broker([FakeSource("broken", raises=RuntimeError("no"))], RankingSynthesizer(top_k=3))
    with recorded() as exporter:
        asyncio.run(answer(Engine.of(broker), parse_request({"query": QUERY})))
        named = by_name(exporter.get_finished_spans())
    [line] = [json.loads(x) for x in out.getvalue().splitlines() if '"source_failed"' in x]
    span = named[f"{P}source broken"].context
    assert line["trace_id"] == format(span.trace_id, "032x")
    assert line["span_id"] == format(span.span_id, "016x")
    outside = io.StringIO()
    configure_logging("warning", "json", outside)
    broker.request(QUERY)  # tracing off: no ids
    assert "trace_id" not in outside.getvalue() and "source_failed" in outside.getvalue()


def _run(code: str, cwd: Path) -> Any:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=cwd
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_off_a_request_makes_no_span_object_even_with_the_api_loaded(tmp_path: Path) -> None:
    """The API imported (as FastAPI and the MCP SDK import it) but no SDK: nautilus asks
    for no tracer and makes no span, not even a non-recording one."""
    code = (
        "import json, opentelemetry.trace as t\n"
        "made = []\n"
        "for cls in (t.NonRecordingSpan, t.ProxyTracer, t.NoOpTracer):\n"
        "    init = cls.__init__\n"
        "    def counted(self, *a, _init=init, **k):\n"
        "        made.append(type(self).__name__); _init(self, *a, **k)\n"
        "    cls.__init__ = counted\n"
        "from nautilus_ranking.request.engine import Engine\n"
        "from nautilus_ranking.request.answer import answer_sync\n"
        "from nautilus_ranking.request.model import parse_request\n"
        "engine = Engine.assemble()\n"
        "answer_sync(engine, parse_request({'query': 'orders-db disk full', 'top_k': 3}))\n"
        "print(json.dumps(made))\n"
    )
    assert _run(code, tmp_path) == []


def test_the_trace_context_crosses_to_a_background_loop() -> None:
    """The broker's loop in the service, the HTTP and PostgreSQL loops: a coroutine run
    there sees the caller's span as current."""
    from nautilus_ranking.fanout.background_loop import BackgroundLoop

    async def current() -> int:
        return trace.get_current_span().get_span_context().span_id

    loop = BackgroundLoop("nautilus-test-trace")
    try:
        with (
            recorded(),
            trace.get_tracer("caller").start_as_current_span("caller") as caller,
        ):
            seen = asyncio.run(loop.run(current()))
            submitted = loop.submit(current()).result(timeout=5)
        assert seen == submitted == caller.get_span_context().span_id
        assert asyncio.run(loop.run(current())) == 0  # off: nothing carried
    finally:
        loop.stop()


def test_a_refused_request_is_not_an_error_span_and_a_failed_one_is() -> None:
    import pytest

    from nautilus_ranking.request.errors import ProblemError

    engine = demo_engine(ranking_top_k=3)
    with recorded() as exporter:
        with pytest.raises(ProblemError) as refused:
            answer_sync(engine, parse_request({"query": QUERY, "sources": ["nope"]}))
        request = by_name(exporter.get_finished_spans())[f"{P}request"]
    engine.broker.close()
    assert refused.value.status == 422
    assert request.status.status_code == StatusCode.UNSET
    assert (request.attributes or {})[f"{P}problem"] == refused.value.slug

    async def past_the_deadline(call: Any) -> Any:  # as the service's runner says it
        call.close()
        raise ProblemError(504, "deadline", "Deadline exceeded", "no answer within 10 s")

    broker = Broker([FakeSource("a", [{"id": "1", "text": "disk"}])], RankingSynthesizer(top_k=3))
    with recorded() as exporter:
        with pytest.raises(ProblemError):
            asyncio.run(
                answer(Engine.of(broker), parse_request({"query": QUERY}), run=past_the_deadline)
            )
        request = by_name(exporter.get_finished_spans())[f"{P}request"]
    assert (request.status.status_code, request.status.description) == (
        StatusCode.ERROR,
        "deadline",
    )
    assert (request.attributes or {})["error.type"] == "deadline"


def test_the_profile_that_ranked_a_request_is_on_its_span(
    monkeypatch: Any,
) -> None:
    monkeypatch.setenv("NAUTILUS_PROFILES__SUPPORT__RANKING_TOP_K", "2")
    monkeypatch.setenv("NAUTILUS_PROFILES__SUPPORT__SOURCE_BOOSTS", "runbooks:high")
    engine = Engine.assemble()
    with recorded() as exporter:
        result = answer_sync(engine, parse_request({"query": QUERY}), profile="support")
        named = by_name(exporter.get_finished_spans())
    engine.broker.close()
    assert result.profile == "support"
    assert (named[f"{P}request"].attributes or {})[f"{P}profile"] == "support"
    ranking = named[f"{P}ranking"].attributes or {}
    assert list(ranking[f"{P}ranking.fusion.boosted_sources"]) == ["runbooks:high"]
    assert ranking[f"{P}ranking.top_k.rows_out"] == 3  # page 1 of 2: K + 1


def test_a_half_imported_opentelemetry_module_means_no_tracer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The MCP SDK imports OpenTelemetry in a thread while the first requests are served:
    a request that meets the module half imported is answered untraced, never failed."""
    import importlib.machinery
    import types

    from nautilus_ranking.tracing import spans

    half = types.ModuleType("opentelemetry.trace")
    half.__spec__ = importlib.machinery.ModuleSpec("opentelemetry.trace", None)
    half.__spec__._initializing = True  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "opentelemetry.trace", half)
    assert spans.tracer() is None
    half.__spec__._initializing = False  # type: ignore[attr-defined]
    assert spans.tracer() is None  # no get_tracer_provider yet: still no tracer


def test_the_ranking_span_says_how_many_long_rows_were_read_as_passages() -> None:
    """With the model, rows past its window are read as passages: the ranking span's
    ``passages`` stage says how many rows, and the passages scored by words and by the
    model; rows within the window add nothing to it."""
    pytest.importorskip("onnxruntime")
    from nautilus_ranking.embedders.onnx import OnnxEmbedder
    from nautilus_ranking.synthesis.passages import PASSAGES_A_ROW
    from nautilus_ranking.text.passage_windows import windows

    filler = " ".join(
        f"The committee reviewed quarterly figures number {i} and staffing plans again."
        for i in range(60)
    )
    answer = "To restart the payments service drain the queue then run the failover script."
    long_texts = [filler + " " + answer, answer + " " + filler]
    rows = [{"id": f"long{i}", "text": t} for i, t in enumerate(long_texts)]
    rows.append({"id": "short", "text": "Office plants need watering twice a week."})
    model = OnnxEmbedder()
    broker = Broker([FakeSource("docs", rows)], RankingSynthesizer(idf=True, embedder=model))
    with recorded() as exporter:
        response = broker.request("restart payments service failover")
        named = by_name(exporter.get_finished_spans())
    a = named[f"{P}ranking"].attributes or {}
    assert list(a[f"{P}ranking.stages"])[:2] == ["passages", "fusion"]
    assert (a[f"{P}ranking.passages.rows_in"], a[f"{P}ranking.passages.rows_out"]) == (3, 3)
    assert a[f"{P}ranking.passages.long_rows"] == 2
    # every window of each long row's text (its string values: the id, then the text)
    read = [f"{r['id']} {r['text']}" for r in rows[:2]]
    assert a[f"{P}ranking.passages.by_words"] == sum(len(windows(t)) for t in read)
    assert a[f"{P}ranking.passages.by_model"] == 2 * PASSAGES_A_ROW
    assert sum(r.passage is not None for r in response.ranking) == 2
    assert f"{P}ranking.budget.rows_in_part" not in a  # no budget: every row whole
    # under a budget too small for a long row: the budget says how many went in part,
    # as a library call and through the request core
    budgeted = Broker([FakeSource("docs", rows)], broker.synthesizer, max_tokens=300)
    with recorded() as exporter:
        fitted = budgeted.request("restart payments service failover")
        answered = answer_sync(
            Engine.of(broker),
            parse_request({"query": "restart payments service failover", "max_tokens": 300}),
        )
        spans = [s for s in exporter.get_finished_spans() if s.name == f"{P}ranking"]
    parts = [
        sum(r.passage is not None and "handle" in r.passage for r in found)
        for found in (fitted.ranking, answered.response.ranking)
    ]
    assert parts == [2, 2]
    for span in spans:
        assert (span.attributes or {})[f"{P}ranking.budget.rows_in_part"] == 2
    assert len(spans) == 2
    # short rows only: no passages stage
    short = Broker([FakeSource("docs", rows[2:])], RankingSynthesizer(idf=True, embedder=model))
    with recorded() as exporter:
        short.request("restart payments service failover")
        named = by_name(exporter.get_finished_spans())
    assert "passages" not in list((named[f"{P}ranking"].attributes or {})[f"{P}ranking.stages"])
