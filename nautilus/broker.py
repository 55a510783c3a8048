"""Broker: fan one request out to every source, isolate failures, hash, synthesise.

A failing source never fails the request: an exception, a timeout or a return
that is not a list becomes an ``ErrorRecord`` in ``sources_errored`` and the
other sources' rows are untouched. A bad row never fails its source: a row that is
not an object or has no canonical JSON form (so it could be neither hashed nor
printed) is dropped with one warning per source, reported in ``sources_warned``.
"""

from __future__ import annotations

import asyncio
import operator
import threading
import time
import uuid
from collections.abc import Callable, Coroutine, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from nautilus.config import ConfigError, ConfigProblem, NautilusSettings, log_problem
from nautilus.hashing import compute_response_hash
from nautilus.log import get_logger
from nautilus.models import AdapterResult, BrokerResponse, ErrorRecord, RankedRow, SourceWarning
from nautilus.rows import screen_rows
from nautilus.sources.base import Source
from nautilus.sources.config import DEFAULT_LIMIT, build_sources, bundled_demo_config
from nautilus.synthesis.base import Synthesizer
from nautilus.synthesis.basic import BasicSynthesizer
from nautilus.synthesis.ranking import RankingSynthesizer

logger = get_logger("nautilus.broker")

P = ParamSpec("P")
T = TypeVar("T")

#: How long a source may take to build or refresh its data (``prepare``) before a
#: request gives up on it: a build is not cut off by the query's ``timeout_s``, but a
#: hung one must not hang the request.
PREPARE_TIMEOUT_S = 300.0
#: How many dropped rows a warning describes one by one.
_REASONS_SHOWN = 3


class Broker:
    """Sources plus a synthesizer. Build one with :meth:`from_config`."""

    def __init__(self, sources: Sequence[Source], synthesizer: Synthesizer | None = None,
                 limit: int = DEFAULT_LIMIT,
                 prepare_timeout_s: float = PREPARE_TIMEOUT_S) -> None:
        self.sources = list(sources)
        self.synthesizer: Synthesizer = synthesizer or BasicSynthesizer()
        self.limit = limit
        self.prepare_timeout_s = prepare_timeout_s

    @classmethod
    def from_config(cls, path: str | Path | None = None,
                    settings: NautilusSettings | None = None) -> Broker:
        """Sources from ``path``, else ``NAUTILUS_CONFIG``, else the bundled demo config.

        Ranking comes from the settings: every ranking knob unset gives
        ``BasicSynthesizer`` (an exact passthrough). A boost naming no source is
        warned about and dropped (a :class:`ConfigError` in strict mode).
        """
        settings = settings if settings is not None else NautilusSettings()
        config_path = Path(path or settings.config or bundled_demo_config()).expanduser()
        sources, limit = build_sources(config_path, settings.data_dir, settings.embedder,
                                       settings.embedder_cache_size)
        known = {s.id.lower() for s in sources}
        unknown = [sid for sid in settings.source_boosts if sid not in known]
        if unknown:
            problems = tuple(
                ConfigProblem("NAUTILUS_SOURCE_BOOSTS", sid, f"no source has id {sid!r}",
                              ", ".join(s.id for s in sources)) for sid in unknown)
            if settings.config_strict:  # the error lists them: no warning each as well
                raise ConfigError(problems)
            for problem in problems:
                log_problem(problem)
            kept = {k: v for k, v in settings.source_boosts.items() if k in known}
            settings = settings.model_copy(update={"source_boosts": kept})
        synthesizer: Synthesizer = (RankingSynthesizer.from_settings(settings)
                                    if settings.ranking_enabled else BasicSynthesizer())
        logger.debug("broker_ready", sources=[s.id for s in sources],
                     synthesizer=type(synthesizer).__name__)
        return cls(sources, synthesizer, limit)

    def close(self) -> None:
        """Release every source (a failing ``close`` is logged, never raised)."""
        for source in self.sources:
            try:
                source.close()
            except Exception as exc:
                logger.warning("source_close_failed", source_id=source.id,
                               error_type=type(exc).__name__, error=str(exc)[:200])

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
        return run_sync(self.arequest(query, context), "Broker.request()",
                        "await broker.arequest(...)")

    async def arequest(self, query: str,
                       context: Mapping[str, Any] | None = None) -> BrokerResponse:
        if not isinstance(query, str):
            raise TypeError(f"query must be a string, got {type(query).__name__}")
        started = time.perf_counter()
        request_id = uuid.uuid4().hex
        ctx = _request_context(query, context)
        raw = await self._fan_out(query, ctx)
        results = [result for result, _, _ in raw]
        source_hashes = {result.source_id: raw_hash
                         for result, raw_hash, _ in raw if result.error is None}
        errors = [r.error for r in results if r.error is not None]
        warnings = [warning for _, _, warning in raw if warning is not None]
        if isinstance(self.synthesizer, RankingSynthesizer):
            data, ranking = self.synthesizer.merge_ranked(results, ctx)
        else:
            data = self.synthesizer.merge(results, ctx)
            ranking = _passthrough_ranking(results, data)
        response = BrokerResponse(
            request_id=request_id, data=data, ranking=ranking,
            sources_queried=[s.id for s in self.sources], sources_errored=errors,
            duration_ms=round((time.perf_counter() - started) * 1000),
            response_hash=compute_response_hash(data), source_response_hashes=source_hashes,
            sources_warned=warnings)
        logger.info("request_served", request_id=request_id, sources=len(self.sources),
                    errored=[e.source_id for e in errors], rows=sum(map(len, data.values())),
                    warned=[w.source_id for w in warnings], duration_ms=response.duration_ms)
        return response

    async def fetch(self, query: str,
                    context: Mapping[str, Any] | None = None) -> list[AdapterResult]:
        """Every source's result for ``query``, unsynthesised (errors included; rows
        without a canonical form dropped, as in :meth:`arequest`)."""
        ctx = _request_context(query, context)
        return [result for result, _, _ in await self._fan_out(query, ctx)]

    def fetch_sync(self, query: str,
                   context: Mapping[str, Any] | None = None) -> list[AdapterResult]:
        """Synchronous :meth:`fetch`, returning at the sources' deadlines like :meth:`request`."""
        return run_sync(self.fetch(query, context), "Broker.fetch_sync()",
                        "await broker.fetch(...)")

    async def _fan_out(self, query: str, ctx: Mapping[str, Any],
                       ) -> list[tuple[AdapterResult, str, SourceWarning | None]]:
        return list(await asyncio.gather(*(self._call(s, query, ctx) for s in self.sources)))

    async def _call(self, source: Source, query: str, ctx: Mapping[str, Any],
                    ) -> tuple[AdapterResult, str, SourceWarning | None]:
        """(the source's result, the hash of its raw rows, what was dropped from them)."""
        started = time.perf_counter()
        timeout = getattr(source, "timeout_s", 5.0)

        def failed(error_type: str, message: str,
                   ) -> tuple[AdapterResult, str, SourceWarning | None]:
            elapsed = round((time.perf_counter() - started) * 1000)
            logger.warning("source_failed", source_id=source.id, error_type=error_type,
                           message=message, duration_ms=elapsed)
            error = ErrorRecord(source.id, error_type, message)
            return AdapterResult(source.id, [], elapsed, error), "", None

        prepare = getattr(source, "prepare", None)
        if prepare is not None:  # building data (a SQLite seed) is not answering: it gets
            try:                 # its own, generous deadline, not the query's timeout_s
                await asyncio.wait_for(prepare(), self.prepare_timeout_s)
            except TimeoutError:
                return failed("build_timeout",
                              f"data not built within {self.prepare_timeout_s:g} s")
            except Exception as exc:
                return failed(type(exc).__name__, _message(exc))
        try:
            rows = await asyncio.wait_for(source.search(query, ctx, self.limit), timeout)
        except TimeoutError:
            return failed("timeout", f"no answer within {timeout:g} s")
        except Exception as exc:  # a source is someone else's code: isolate every failure
            return failed(type(exc).__name__, _message(exc))
        if not isinstance(rows, list):
            return failed("invalid_response", f"expected a list of rows, got {type(rows).__name__}")
        good, raw_hash, dropped = screen_rows(rows)
        warning, source_ranks = None, None
        if dropped:
            positions = tuple(position for position, _ in dropped)
            reasons = [f"row {position}: {reason}" for position, reason in dropped]
            shown = "; ".join(reasons[:_REASONS_SHOWN])
            more = len(reasons) - _REASONS_SHOWN
            message = f"{len(dropped)} row(s) dropped: {shown}" + (f"; and {more} more"
                                                                    if more > 0 else "")
            warning = SourceWarning(source.id, "rows_dropped", message, len(dropped), positions)
            gone = set(positions)  # the kept rows keep their place in the source's answer
            source_ranks = tuple(p for p in range(1, len(rows) + 1) if p not in gone)
            logger.warning("source_rows_invalid", source_id=source.id, count=len(dropped),
                           positions=list(positions[:20]), reasons=reasons[:_REASONS_SHOWN],
                           action="dropped; the source's other rows are used")
        elapsed = round((time.perf_counter() - started) * 1000)
        ranked = getattr(source, "ranked", None)  # the source's word on its own order
        result = AdapterResult(source.id, good, elapsed,
                               ranked=ranked if isinstance(ranked, bool) else None,
                               source_ranks=source_ranks)
        return result, raw_hash, warning


def _passthrough_ranking(results: list[AdapterResult],
                         data: dict[str, list[dict[str, Any]]]) -> list[RankedRow]:
    """The merged rows in order, unscored, each at its position in its source's own
    answer (``AdapterResult.source_ranks``: rows after a dropped one keep their place);
    a synthesizer that did not keep a source's rows as given numbers them in ``data``."""
    given: dict[str, tuple[list[dict[str, Any]], list[int]]] = {}
    for result in results:
        if result.error is None:
            rows, ranks = given.setdefault(result.source_id, ([], []))
            start = ranks[-1] if ranks else 0  # a source id twice: its ranks continue
            ranks.extend(start + rank for rank in (result.source_ranks
                                                   or range(1, len(result.rows) + 1)))
            rows.extend(result.rows)
    ranking: list[RankedRow] = []
    for sid, rows in data.items():
        kept, ranks = given.get(sid, ([], []))
        as_given = len(kept) == len(rows) and all(map(operator.is_, kept, rows))
        for i, row in enumerate(rows):
            ranking.append(RankedRow(sid, row, 0.0, len(ranking) + 1,
                                     ranks[i] if as_given else i + 1))
    return ranking


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


class _AbandoningExecutor(ThreadPoolExecutor):
    """Runs each call in its own daemon thread, and never waits for one at shutdown.

    ``asyncio.run`` joins the loop's worker threads before it returns, so a source
    stuck in a blocking call (a long SQLite query) held ``request()`` far past its
    deadline although the fan-out had given up on it. Here a timed-out call is
    abandoned: its thread finishes (or the process exits) on its own, its result is
    discarded, and the next request runs on a fresh loop and fresh threads.
    """

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        future: Future[T] = Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:  # handed to the awaiting task, like the stock pool
                future.set_exception(exc)
            else:
                future.set_result(result)

        threading.Thread(target=run, name="nautilus-worker", daemon=True).start()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Nothing to join: abandoned calls end on their own."""


def _new_loop() -> asyncio.AbstractEventLoop:
    loop = asyncio.new_event_loop()
    loop.set_default_executor(_AbandoningExecutor())
    return loop


def run_sync(coroutine: Coroutine[Any, Any, T], name: str, instead: str) -> T:
    """Run ``coroutine`` to completion on a fresh event loop whose worker threads are
    never waited for (see :class:`_AbandoningExecutor`). Inside a running loop this
    raises ``RuntimeError`` (as ``asyncio.run`` does) naming the awaitable to use."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        with asyncio.Runner(loop_factory=_new_loop) as runner:
            return runner.run(coroutine)
    coroutine.close()
    raise RuntimeError(f"{name} was called inside a running event loop; use '{instead}' instead")
