"""What a server process builds once and every request shares — the HTTP service and the
MCP server alike: the engine (its sources timed for the metrics), the concurrency limit,
the readiness prober, the broker's own loop, the API keys.

:meth:`ServerState.answer` is the one serving path: a request runs on the broker loop
under ``NAUTILUS_SERVE_REQUEST_TIMEOUT_S`` and ``NAUTILUS_SERVE_MAX_CONCURRENCY``, and
is counted in the same Prometheus series whichever protocol carried it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass
from typing import Any

from nautilus_ranking.embedders.warm_up import needs_warm_up, warm_up
from nautilus_ranking.fanout.blas import limit_blas_threads
from nautilus_ranking.log import get_logger
from nautilus_ranking.records import BrokerResponse
from nautilus_ranking.request.answer import Answer, RowText, answer, response_row_text
from nautilus_ranking.request.cursor_keys import cursor_keys
from nautilus_ranking.request.engine import Engine
from nautilus_ranking.request.errors import ProblemError
from nautilus_ranking.request.model import QueryRequest
from nautilus_ranking.request.plan import cap_ranked_rows
from nautilus_ranking.request.profile_choice import PLAIN, Grant
from nautilus_ranking.service import metrics
from nautilus_ranking.service.limits import ConcurrencyLimit
from nautilus_ranking.service.readiness import Readiness
from nautilus_ranking.service.runner import BrokerLoop
from nautilus_ranking.settings.model import ConfigError, NautilusSettings
from nautilus_ranking.source_settings import config_path
from nautilus_ranking.sources.base import Source
from nautilus_ranking.sources.factory import load_sources
from nautilus_ranking.startup.key_grants import key_grants, refusals
from nautilus_ranking.startup.keys_file import load_api_keys, read_key_lines

logger = get_logger("nautilus_ranking.service")


@dataclass
class ServerState:
    """A server's shared state; build it with :meth:`build`, serve inside :meth:`running`."""

    engine: Engine
    raw_sources: list[Source]
    limit: ConcurrencyLimit
    readiness: Readiness
    runner: BrokerLoop
    api_keys: tuple[bytes, ...]
    #: Each source's type in the sources file (what ``list_sources`` says it is).
    source_types: dict[str, str]
    #: Each key's ranking profiles (``startup/key_grants.py``); empty without profiles.
    grants: dict[bytes, Grant]

    @property
    def settings(self) -> NautilusSettings:
        return self.engine.settings

    @classmethod
    def build(cls, settings: NautilusSettings) -> ServerState:
        """Everything from the settings; a bad sources file, API keys file (a grant that
        cannot be honoured among them), cursor key file or a strict-mode problem raises
        :class:`~nautilus_ranking.config.ConfigError` here, before anything is served."""
        api_keys = load_api_keys(settings.serve_api_keys_file)
        cursor_keys(settings)  # read (or refused) now: no request reads the file on the loop
        engine = Engine.assemble(settings)
        # the shared rankings, too (the server's and each profile's), rank at most the
        # ceiling of rows a request
        for shared in (engine, *engine.by_profile.values()):
            cap_ranked_rows(shared.broker.synthesizer, settings.serve_max_ranked_rows)
        raw = list(engine.broker.sources)
        engine.use_sources([metrics.TimedSource(s) for s in raw])
        grants: dict[bytes, Grant] = {}
        if settings.serve_api_keys_file is not None:  # a grant never fails open
            lines = read_key_lines(settings.serve_api_keys_file)
            refused = refusals(lines, engine.profiles, settings.serve_api_keys_file)
            if refused:
                engine.broker.close()
                raise ConfigError(tuple(refused))
            if engine.profiles:
                grants = key_grants(lines, engine.profiles, settings.serve_api_keys_file)[0]
        return cls(
            engine,
            raw,
            ConcurrencyLimit(settings.serve_max_concurrency),
            Readiness(raw, settings.serve_probe_interval_s),
            BrokerLoop(),
            api_keys,
            {spec.id: spec.type for spec in load_sources(config_path(settings)).specs},
            grants,
        )

    @contextlib.asynccontextmanager
    async def running(self, kind: str) -> AsyncIterator[ServerState]:
        """Probe the sources in the background while serving; release everything after
        (``kind``: ``serve`` or ``mcp``, in the ``<kind>_ready``/``<kind>_stopped`` logs)."""
        # This process is ours: one BLAS thread, so concurrent requests do not contend
        # with BLAS's own threads (nautilus_ranking.fanout.blas; threadpoolctl is in the extra).
        limit_blas_threads(1)
        metrics.start(
            [s.id for s in self.raw_sources], len(self.engine.problems), self.engine.profiles.names
        )
        prober = asyncio.create_task(self.readiness.run())
        loader = self._load_model()
        logger.info(
            f"{kind}_ready",
            sources=self.engine.source_ids,
            synthesizer=type(self.engine.broker.synthesizer).__name__,
            config_problems=len(self.engine.problems),
            **({"profiles": list(self.engine.profiles.names)} if self.engine.profiles else {}),
        )
        try:
            yield self
        finally:
            for task in (prober, loader):
                if task is not None:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
            self.runner.stop()  # the server has drained the in-flight requests by now
            self.engine.broker.close()
            logger.info(f"{kind}_stopped")

    def _load_model(self) -> asyncio.Task[bool] | None:
        """Load the embedding model in a thread while the server starts (``/readyz``
        says not ready until it is); None when the engine has no model to load."""
        embedder = self.engine.embedder
        if not needs_warm_up(embedder):
            return None
        self.readiness.loading = f"the embedding model {getattr(embedder, 'model_id', '')}"

        async def load() -> bool:
            try:
                return await asyncio.to_thread(warm_up, embedder)
            finally:
                self.readiness.loading = None

        return asyncio.create_task(load())

    async def answer(
        self,
        request: QueryRequest,
        request_id: str | None = None,
        row_text: RowText = response_row_text,
        profile: str | None = None,
        key: bytes | None = None,
    ) -> Answer:
        """The request answered as every protocol serves it (see the module docstring);
        ``row_text``: how the protocol hands a row over (what a token budget counts);
        ``profile``: the profile the request names; ``key``: the API key it came with."""
        settings = self.settings
        result = await answer(
            self.engine,
            request,
            allow_overrides=settings.serve_allow_overrides,
            max_query_chars=settings.serve_max_query_chars,
            max_ranked_rows=settings.serve_max_ranked_rows,
            run=self._run,
            request_id=request_id,
            row_text=row_text,
            profile=profile,
            grant=self.grant(key),
            api_key=key,
        )
        metrics.record_response(result.response)
        if result.profiled:
            metrics.record_profile(result.profile)
            # the id the answer carries: the caller's (HTTP) or the broker's (MCP)
            logger.info(
                "query_profile", profile=result.profile, request_id=result.response.request_id
            )
        return result

    def grant(self, key: bytes | None) -> Grant | None:
        """What the caller with ``key`` may use (None without API keys: any profile)."""
        if not self.api_keys:
            return None
        return self.grants.get(key, PLAIN) if key is not None else PLAIN

    async def _run(self, call: Coroutine[Any, Any, BrokerResponse]) -> BrokerResponse:
        try:
            self.limit.acquire()
        except ProblemError:
            call.close()
            raise
        metrics.IN_FLIGHT.inc()
        deadline = self.settings.serve_request_timeout_s
        try:
            return await asyncio.wait_for(self.runner.run(call), deadline)
        except TimeoutError:
            metrics.REJECTED.labels("deadline").inc()
            raise ProblemError(
                504,
                "deadline",
                "Deadline exceeded",
                f"no answer within {deadline:g} s (NAUTILUS_SERVE_REQUEST_TIMEOUT_S)",
            ) from None
        finally:
            self.limit.release()
            metrics.IN_FLIGHT.dec()
