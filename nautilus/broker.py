"""Broker: fan one request out to every source, isolate failures, hash, synthesise.

A failing source never fails the request: an exception, a timeout or a return
that is not a list becomes an ``ErrorRecord`` in ``sources_errored`` and the
other sources' rows are untouched.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import structlog

from nautilus.config import ConfigError, ConfigProblem, NautilusSettings, log_problem
from nautilus.hashing import compute_response_hash
from nautilus.models import AdapterResult, BrokerResponse, ErrorRecord, RankedRow
from nautilus.sources.base import Source
from nautilus.sources.config import DEFAULT_LIMIT, build_sources, bundled_demo_config
from nautilus.synthesis.base import Synthesizer
from nautilus.synthesis.basic import BasicSynthesizer
from nautilus.synthesis.ranking import RankingSynthesizer

logger = structlog.get_logger("nautilus.broker")


class Broker:
    """Sources plus a synthesizer. Build one with :meth:`from_config`."""

    def __init__(self, sources: Sequence[Source], synthesizer: Synthesizer | None = None,
                 limit: int = DEFAULT_LIMIT) -> None:
        self.sources = list(sources)
        self.synthesizer: Synthesizer = synthesizer or BasicSynthesizer()
        self.limit = limit

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
            for problem in problems:
                log_problem(problem)
            if settings.config_strict:
                raise ConfigError(problems)
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
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.arequest(query, context))
        raise RuntimeError("Broker.request() was called inside a running event loop; "
                           "use 'await broker.arequest(...)' instead")

    async def arequest(self, query: str,
                       context: Mapping[str, Any] | None = None) -> BrokerResponse:
        started = time.perf_counter()
        request_id = uuid.uuid4().hex
        ctx = {**(context or {}), "query": query}
        raw = await self._fan_out(query, ctx)
        results = [result for result, _ in raw]
        source_hashes = {result.source_id: compute_response_hash(raw_rows)
                         for result, raw_rows in raw if result.error is None}
        errors = [r.error for r in results if r.error is not None]
        if isinstance(self.synthesizer, RankingSynthesizer):
            data, ranking = self.synthesizer.merge_ranked(results, ctx)
        else:
            data = self.synthesizer.merge(results, ctx)
            flat = [(sid, i + 1, row) for sid, rows in data.items() for i, row in enumerate(rows)]
            ranking = [RankedRow(sid, row, 0.0, place, source_rank)
                       for place, (sid, source_rank, row) in enumerate(flat, start=1)]
        response = BrokerResponse(
            request_id=request_id, data=data, ranking=ranking,
            sources_queried=[s.id for s in self.sources], sources_errored=errors,
            duration_ms=round((time.perf_counter() - started) * 1000),
            response_hash=compute_response_hash(data), source_response_hashes=source_hashes)
        logger.info("request_served", request_id=request_id, sources=len(self.sources),
                    errored=[e.source_id for e in errors], rows=sum(map(len, data.values())),
                    duration_ms=response.duration_ms)
        return response

    async def fetch(self, query: str,
                    context: Mapping[str, Any] | None = None) -> list[AdapterResult]:
        """Every source's result for ``query``, unsynthesised (errors included)."""
        ctx = {**(context or {}), "query": query}
        return [result for result, _ in await self._fan_out(query, ctx)]

    async def _fan_out(self, query: str,
                       ctx: Mapping[str, Any]) -> list[tuple[AdapterResult, Any]]:
        return list(await asyncio.gather(*(self._call(s, query, ctx) for s in self.sources)))

    async def _call(self, source: Source, query: str,
                    ctx: Mapping[str, Any]) -> tuple[AdapterResult, Any]:
        started = time.perf_counter()
        timeout = getattr(source, "timeout_s", 5.0)

        def failed(error_type: str, message: str) -> tuple[AdapterResult, Any]:
            elapsed = round((time.perf_counter() - started) * 1000)
            logger.warning("source_failed", source_id=source.id, error_type=error_type,
                           message=message, duration_ms=elapsed)
            error = ErrorRecord(source.id, error_type, message)
            return AdapterResult(source.id, [], elapsed, error), None

        try:
            rows = await asyncio.wait_for(source.search(query, ctx, self.limit), timeout)
        except TimeoutError:
            return failed("timeout", f"no answer within {timeout:g} s")
        except Exception as exc:  # a source is someone else's code: isolate every failure
            return failed(type(exc).__name__, str(exc)[:500] or type(exc).__name__)
        if not isinstance(rows, list):
            return failed("invalid_response", f"expected a list of rows, got {type(rows).__name__}")
        good = [row for row in rows if isinstance(row, dict)]
        if len(good) != len(rows):
            logger.warning("source_rows_invalid", source_id=source.id,
                           count=len(rows) - len(good), action="rows that are not objects dropped")
        elapsed = round((time.perf_counter() - started) * 1000)
        ranked = getattr(source, "ranked", None)
        return AdapterResult(source.id, good, elapsed,
                             ranked=ranked if isinstance(ranked, bool) else None), rows
