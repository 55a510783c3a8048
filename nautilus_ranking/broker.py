"""Broker: fan one request out to every source, isolate failures, hash, synthesise.

A failing source never fails the request: an exception, a timeout or a return
that is not a list becomes an ``ErrorRecord`` in ``sources_errored`` and the
other sources' rows are untouched. A bad row never fails its source: a row that is
not an object or has no canonical JSON form (so it could be neither hashed nor
printed) is dropped with one warning per source, reported in ``sources_warned``.

One concept, one request's life from its context to its response: the fan-out, the
isolation of each source, the hashes and the synthesis. The helpers below it serve
only that and stay beside it; what other modules share (the synchronous loop, the
hash of the rows as given) lives in ``fanout/thread_loop.py`` and
``response_hash.py``.
"""

from __future__ import annotations

import asyncio
import copy
import time
import uuid
import weakref
from collections.abc import Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Any

from nautilus_ranking.confidence_fit_check import fit_problems
from nautilus_ranking.embedders import Embedder
from nautilus_ranking.fanout.contain import contained, error_type
from nautilus_ranking.fanout.thread_loop import run_sync
from nautilus_ranking.fanout.workers import current_owner
from nautilus_ranking.log import get_logger
from nautilus_ranking.records import (
    AdapterResult,
    BrokerResponse,
    ErrorRecord,
    RankedRow,
    SourceWarning,
    source_warnings,
)
from nautilus_ranking.response_hash import response_hash_of
from nautilus_ranking.rows import screen_rows
from nautilus_ranking.selection.budget import apply_budget, entry_text
from nautilus_ranking.settings.model import ConfigError, NautilusSettings, log_problem
from nautilus_ranking.source_settings import (
    applied_settings,
    boost_problems,
    config_path,
    named_source_problems,
)
from nautilus_ranking.sources.base import (
    Source,
    declared_order,
    id_of,
    mapped_path,
    preparer,
    timeout_of,
    type_of,
)
from nautilus_ranking.sources.factory import DEFAULT_LIMIT, build_sources
from nautilus_ranking.synthesis.base import Merged, Synthesizer
from nautilus_ranking.synthesis.basic import BasicSynthesizer
from nautilus_ranking.synthesis.closing import close_ranking
from nautilus_ranking.synthesis.ranking import RankingSynthesizer
from nautilus_ranking.synthesis.ranking_result import RankingResult
from nautilus_ranking.tracing import RankingScope, ranking_begin, ranking_end, tracer
from nautilus_ranking.tracing.carry import current_trace_id
from nautilus_ranking.tracing.facts import (
    budget_stage,
    cut_stage,
    in_source_span,
)

logger = get_logger("nautilus_ranking.broker")

#: How long a source may take to build or refresh its data (``prepare``) before a
#: request gives up on it: a build is not cut off by the query's ``timeout_s``, but a
#: hung one must not hang the request.
PREPARE_TIMEOUT_S = 300.0
#: How many dropped rows a warning describes one by one.
_REASONS_SHOWN = 3
#: Sources already warned about for rows without an id: once a process, not per request
#: (a per-request broker shares its sources with the service's).
_WARNED_WITHOUT_ID: weakref.WeakSet[Any] = weakref.WeakSet()


class Broker:
    """Sources plus a synthesizer. Build one with :meth:`from_config`."""

    def __init__(
        self,
        sources: Sequence[Source],
        synthesizer: Synthesizer | None = None,
        limit: int = DEFAULT_LIMIT,
        prepare_timeout_s: float = PREPARE_TIMEOUT_S,
        max_tokens: int | None = None,
        min_confidence: float | None = None,
        budget_passages: bool = True,
    ) -> None:
        self.sources = list(sources)
        self.synthesizer = synthesizer or BasicSynthesizer()
        self.limit = limit
        self.prepare_timeout_s = prepare_timeout_s
        if max_tokens is not None and (
            isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1
        ):
            raise ValueError(f"max_tokens must be an integer >= 1 or None, got {max_tokens!r}")
        #: The token budget of every response (nautilus_ranking/selection/budget.py); None: none.
        self.max_tokens = max_tokens
        #: Under the budget, a row too large for it is handed over as its passage.
        self.budget_passages = budget_passages
        if min_confidence is not None and (
            isinstance(min_confidence, bool)
            or not isinstance(min_confidence, int | float)
            or not 0 <= min_confidence <= 1
        ):
            raise ValueError(
                f"min_confidence must be a number in [0, 1] or None, got {min_confidence!r}"
            )
        #: Below this confidence an answer abstains (selection/confidence.py); None: never.
        self.min_confidence = min_confidence

    @classmethod
    def from_config(
        cls, path: str | Path | None = None, settings: NautilusSettings | None = None
    ) -> Broker:
        """Sources from ``path``, else ``NAUTILUS_CONFIG``, else the bundled demo config.

        Ranking comes from the settings: every ranking knob unset gives
        ``BasicSynthesizer`` (an exact passthrough). A boost or a canonical source
        naming no source is warned about (a :class:`ConfigError` in strict mode).
        """
        settings = settings if settings is not None else NautilusSettings()
        refused = fit_problems(settings, config_path(settings, path))
        if refused:  # never a silent fallback to the shipped fit, strict mode or not
            raise ConfigError(tuple(refused))
        sources, limit = build_sources(
            config_path(settings, path),
            settings.data_dir,
            settings.vector_embedder,
            settings.embedder_cache_size,
            settings.embedder_disk_cache_mb,
        )
        ids = [s.id for s in sources]
        problems = boost_problems(settings, ids) + named_source_problems(settings, ids)
        if problems:
            if settings.config_strict:  # the error lists them: no warning each as well
                raise ConfigError(problems)
            for problem in problems:
                log_problem(problem)
            settings = applied_settings(settings, ids)
        synthesizer = synthesizer_for(settings)
        logger.debug(
            "broker_ready", sources=[s.id for s in sources], synthesizer=type(synthesizer).__name__
        )
        return cls(
            sources,
            synthesizer,
            limit,
            max_tokens=settings.ranking_max_tokens,
            min_confidence=settings.ranking_min_confidence,
            budget_passages=settings.ranking_budget_passages,
        )

    @property
    def synthesizer(self) -> Synthesizer:
        return self._synthesizer

    @synthesizer.setter
    def synthesizer(self, synthesizer: Synthesizer) -> None:
        if not isinstance(synthesizer, Synthesizer):
            raise TypeError(
                f"{type(synthesizer).__name__} is not a Synthesizer: it needs "
                "merge, merge_ranked, ranking_enabled, embedder, max_candidates and "
                "ranker_values "
                "(nautilus_ranking.synthesis.base)"
            )
        self._synthesizer = synthesizer

    def close(self) -> None:
        """Release every source (a failing ``close`` is logged, never raised)."""
        for source in self.sources:
            try:
                source.close()
            except BaseException as exc:
                # (a synchronous call: a GeneratorExit in it is the source's own)
                if not (isinstance(exc, GeneratorExit) or contained(exc)):
                    raise
                logger.warning(
                    "source_close_failed",
                    source_id=source.id,
                    error_type=error_type(exc),
                    error=str(exc)[:200],
                )

    def __enter__(self) -> Broker:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def request(self, query: str, context: Mapping[str, Any] | None = None) -> BrokerResponse:
        """Synchronous :meth:`arequest`.

        Inside a running event loop this raises ``RuntimeError`` (as
        ``asyncio.run`` does) rather than block the loop: call
        ``await broker.arequest(...)`` there.
        """
        return run_sync(
            self.arequest(query, context), "Broker.request()", "await broker.arequest(...)"
        )

    async def arequest(
        self, query: str, context: Mapping[str, Any] | None = None
    ) -> BrokerResponse:
        if not isinstance(query, str):
            raise TypeError(f"query must be a string, got {type(query).__name__}")
        started = time.perf_counter()
        request_id = uuid.uuid4().hex
        ctx = _request_context(query, context)
        raw = await self._fan_out(query, ctx)
        results = [result for result, _, _, _ in raw]
        _warn_rows_without_id(self.sources, results)
        source_hashes = {
            result.source_id: raw_hash for result, raw_hash, _, _ in raw if result.error is None
        }
        errors = [r.error for r in results if r.error is not None]
        warnings = [warning for _, _, warned, _ in raw for warning in warned]
        traced = ranking_begin()  # None unless an SDK records spans
        try:
            found = self._synthesize(results, ctx, traced, errors)
        finally:
            ranking_end(traced, bool(self.synthesizer.ranking_enabled))
        data, ranking = found.data, found.ranking
        # The built-in synthesizers keep the sources' row objects as they are: the
        # response hash is made of the texts each row was hashed with already.
        texts = (
            [(result.rows, row_texts) for result, _, _, row_texts in raw]
            if found.rows_unchanged
            else []
        )
        response = BrokerResponse(
            request_id=request_id,
            data=data,
            ranking=ranking,
            sources_queried=[_id_text(id_of(s)) for s in self.sources],
            sources_errored=errors,
            duration_ms=round((time.perf_counter() - started) * 1000),
            response_hash=response_hash_of(data, texts),
            source_response_hashes=source_hashes,
            sources_warned=warnings,
            budget=found.budget,
            cut=found.cut,
            embedding=found.embedding,
            confidence=found.confidence.as_dict() if found.confidence is not None else None,
            abstain=found.abstain,
            nearest=found.nearest,
            time=found.time,
        )
        logger.info(
            "request_served",
            request_id=request_id,
            sources=len(self.sources),
            errored=[e.source_id for e in errors],
            rows=sum(map(len, data.values())),
            warned=[w.source_id for w in warnings],
            duration_ms=response.duration_ms,
        )
        return response

    def _synthesize(
        self,
        results: list[AdapterResult],
        ctx: Mapping[str, Any],
        traced: RankingScope | None,
        errors: list[ErrorRecord],
    ) -> RankingResult:
        """The ranking of ``results``, closed: the abstain decided, the rows it holds
        back, and the budget (nautilus_ranking/synthesis/closing.py)."""
        found = self.synthesizer.merge_ranked(results, ctx)
        if traced is not None and found.cut is not None:
            cut_stage(traced.stages, len(found.ranking), found.cut)
        fit = None
        if self.max_tokens is not None:  # the rows that fit, in rank order
            max_tokens = self.max_tokens
            scored = bool(self.synthesizer.ranking_enabled)  # a passthrough's are null

            def fit(
                data: Merged, ranking: list[RankedRow]
            ) -> tuple[Merged, list[RankedRow], dict[str, Any]]:
                data, ranking, fitted = apply_budget(
                    data,
                    ranking,
                    max_tokens,
                    lambda r: entry_text(r, scored=scored),
                    passages=self.budget_passages,
                )
                if traced is not None:
                    budget_stage(traced.stages, fitted, ranking)
                return data, ranking, fitted.as_dict()

        stages = traced.stages if traced is not None else None
        return close_ranking(found, self.min_confidence, len(errors), fit, stages)

    async def fetch(
        self, query: str, context: Mapping[str, Any] | None = None
    ) -> list[AdapterResult]:
        """Every source's result for ``query``, unsynthesised (errors included; rows
        without a canonical form dropped, as in :meth:`arequest`)."""
        ctx = _request_context(query, context)
        return [result for result, _, _, _ in await self._fan_out(query, ctx)]

    def fetch_sync(
        self, query: str, context: Mapping[str, Any] | None = None
    ) -> list[AdapterResult]:
        """Synchronous :meth:`fetch`, returning at the sources' deadlines like :meth:`request`."""
        return run_sync(
            self.fetch(query, context), "Broker.fetch_sync()", "await broker.fetch(...)"
        )

    async def _fan_out(self, query: str, ctx: Mapping[str, Any]) -> list[_Answer]:
        barrier = _Barrier(len(self.sources))
        return list(
            await asyncio.gather(*(self._traced(s, query, ctx, barrier) for s in self.sources))
        )

    def _traced(
        self, source: Source, query: str, ctx: Mapping[str, Any], barrier: _Barrier
    ) -> Coroutine[Any, Any, _Answer]:
        """The source's call, in a span of its own when an SDK records spans."""
        call = self._call(source, query, ctx, barrier)
        if tracer() is None:
            return call
        return in_source_span(type_of(source), _id_text(id_of(source)), timeout_of(source), call)

    async def _call(
        self, source: Source, query: str, ctx: Mapping[str, Any], barrier: _Barrier
    ) -> _Answer:
        """(the source's result, the hash of its raw rows, what was dropped from them,
        the canonical text of each kept row).

        Deadlines are ``asyncio.timeout`` scopes on this task (no task per call); what
        the source raises is its own failure, ``SystemExit`` and a ``CancelledError``
        that is not this task being cancelled included (``fanout/contain.py``). The
        source gets its own copy of the context: what it writes there is seen by
        neither the other sources nor the synthesizer.
        """
        started = time.perf_counter()
        me = asyncio.current_task()  # tells a source's GeneratorExit from a close()
        timeout = timeout_of(source)
        raw_id = id_of(source)
        source_id = _id_text(raw_id)

        def failed(error_type: str, message: str) -> _Answer:
            elapsed = round((time.perf_counter() - started) * 1000)
            logger.warning(
                "source_failed",
                source_id=source_id,
                error_type=error_type,
                message=message,
                duration_ms=elapsed,
            )
            error = ErrorRecord(source_id, error_type, message, current_trace_id())
            return AdapterResult(source_id, [], elapsed, error), "", [], []

        with barrier:
            if not isinstance(raw_id, str):
                return failed(
                    "invalid_source", f"a source id must be a string, got {type(raw_id).__name__}"
                )
            current_owner.set(source)  # this task's own context: to_thread counts for it
            prepare = preparer(source)
            if prepare is not None:  # building data (a SQLite seed) is not answering: it
                try:  # gets its own, generous deadline, not timeout_s
                    async with asyncio.timeout(self.prepare_timeout_s):
                        await prepare()
                except TimeoutError:
                    return failed(
                        "build_timeout", f"data not built within {self.prepare_timeout_s:g} s"
                    )
                except BaseException as exc:  # the source's own, whatever it is
                    if not contained(exc, me):
                        raise
                    return failed(error_type(exc), _message(exc))
        await barrier.passed
        scope = asyncio.timeout(timeout)
        try:
            async with scope:
                rows = await source.search(query, _own_copy(ctx), self.limit)
        except TimeoutError as exc:
            # One type whichever deadline fired: ours, or the source's own (an HTTP
            # source's ends just before ours and says what the call was doing).
            own = not scope.expired() and str(exc)
            return failed("timeout", _message(exc) if own else f"no answer within {timeout:g} s")
        except BaseException as exc:  # a source is someone else's code: isolate every failure
            if not contained(exc, me):  # the request (or the process) is being stopped
                raise
            return failed(error_type(exc), _message(exc))
        if not isinstance(rows, list):
            return failed("invalid_response", f"expected a list of rows, got {type(rows).__name__}")
        good, raw_hash, dropped, texts = screen_rows(rows)
        warned = source_warnings(rows, source_id)
        source_ranks = None
        if dropped:
            positions = tuple(position for position, _ in dropped)
            reasons = [f"row {position}: {reason}" for position, reason in dropped]
            shown = "; ".join(reasons[:_REASONS_SHOWN])
            more = len(reasons) - _REASONS_SHOWN
            message = f"{len(dropped)} row(s) dropped: {shown}" + (
                f"; and {more} more" if more > 0 else ""
            )
            warned.append(
                SourceWarning(source_id, "rows_dropped", message, len(dropped), positions)
            )
            gone = set(positions)  # the kept rows keep their place in the source's answer
            source_ranks = tuple(p for p in range(1, len(rows) + 1) if p not in gone)
            logger.warning(
                "source_rows_invalid",
                source_id=source_id,
                count=len(dropped),
                positions=list(positions[:20]),
                reasons=reasons[:_REASONS_SHOWN],
                action="dropped; the source's other rows are used",
            )
        elapsed = round((time.perf_counter() - started) * 1000)
        result = AdapterResult(
            source_id,
            good,
            elapsed,
            ranked=declared_order(source),
            source_ranks=source_ranks,
            time_field=mapped_path(source, "time_field"),
            document_key=mapped_path(source, "document_key"),
        )
        return result, raw_hash, warned, texts


def _warn_rows_without_id(sources: Sequence[Source], results: Sequence[AdapterResult]) -> None:
    """One ``source_rows_without_id`` warning for each source (once a process) whose rows
    come without an ``id``: their id is null in every answer, which ``config`` alone said."""
    for source, result in zip(sources, results, strict=True):
        if result.error is not None or not result.rows:
            continue
        missing = sum(
            1 for row in result.rows if not isinstance(row, Mapping) or row.get("id") is None
        )
        if not missing:
            continue
        try:
            if source in _WARNED_WITHOUT_ID:
                continue
            _WARNED_WITHOUT_ID.add(source)
        except TypeError:  # a source that cannot be weakly referenced: warned each time
            pass
        logger.warning(
            "source_rows_without_id",
            source_id=result.source_id,
            count=missing,
            rows=len(result.rows),
            action="their id is null in every answer; set id_field in the sources file "
            "to the field that holds it (nautilus-ranking config names candidates)",
        )


#: What the broker keeps of one source's call: its result, the hash of its raw rows,
#: what was left out of them (the source's own warnings, then rows dropped here), and
#: the canonical text of each kept row.
_Answer = tuple[AdapterResult, str, list[SourceWarning], list[str]]


def synthesizer_for(settings: NautilusSettings, embedder: Embedder | None = None) -> Synthesizer:
    """What a broker ranks with under these settings: the ranker when any ranking knob is
    set (with ``embedder``, else the one the settings name), else the exact passthrough."""
    if not settings.ranking_enabled:
        return BasicSynthesizer()
    return RankingSynthesizer.from_settings(settings, embedder=embedder)


def _request_context(query: Any, context: Any) -> dict[str, Any]:
    """The context the sources and the synthesizer see; a bad query or context is one
    clear error here, before any source is called."""
    if not isinstance(query, str):
        raise TypeError(f"query must be a string, got {type(query).__name__}: {query!r:.80}")
    if context is not None and not isinstance(context, Mapping):
        raise TypeError(f"context must be a mapping (or None), got {type(context).__name__}")
    return {**(context or {}), "query": query}


def _message(exc: BaseException) -> str:
    """An exception's message for an ``ErrorRecord`` (its type if it has none or it fails)."""
    try:
        return str(exc)[:500] or type(exc).__name__
    except Exception:
        return type(exc).__name__


class _Barrier:
    """Searches start once every source's ``prepare`` is done (a ``with`` block each).

    A source with nothing to build checks that on the loop (a few ``stat`` calls, which
    release the GIL); run while the first searches hold the GIL in their workers, each
    check waited up to a switch interval (5 ms) for it. Builds still run concurrently.
    """

    def __init__(self, count: int) -> None:
        self.left = count
        self.passed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc_info: object) -> None:
        self.left -= 1
        if self.left == 0 and not self.passed.done():
            self.passed.set_result(None)


_ATOMS = (str, int, float, bool, bytes, type(None))


def _own_copy(ctx: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of the request context for one source: a flat copy when every value is
    immutable (the usual ``{"query": ...}``), else a deep one; a value that cannot be
    copied is shared (the context's keys are still the source's own)."""
    if all(type(value) in _ATOMS for value in ctx.values()):
        return dict(ctx)
    try:
        return copy.deepcopy(dict(ctx))
    except Exception:
        return dict(ctx)


def _id_text(source_id: Any) -> str:
    """A source's id as it appears in a response: itself when it is a string, else a
    description of it (``<int 7>``) for its error record."""
    if isinstance(source_id, str):
        return source_id
    try:
        shown = repr(source_id)[:60]
    except Exception:
        shown = "?"
    return f"<{type(source_id).__name__} {shown}>"
