"""Readiness: every source answered a probe recently.

A background task probes each source every ``NAUTILUS_SERVE_PROBE_INTERVAL_S``
with a one-row search under the source's own timeout (or the source's own ``probe()``,
when it has one: an HTTP source's ``health_url``); whatever a probe raises
(``CancelledError``, ``SystemExit`` and ``GeneratorExit`` included) is that source's
failure, and the prober goes on. ``/readyz`` only reads
the results (it never waits on a source), and a source is ready while its last
success is younger than three intervals — one slow probe does not flap the pod.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from nautilus_ranking.broker import PREPARE_TIMEOUT_S
from nautilus_ranking.fanout.contain import contained, error_type
from nautilus_ranking.log import get_logger
from nautilus_ranking.sources.base import Source, preparer, prober

logger = get_logger("nautilus_ranking.service")

PROBE_QUERY = "readiness probe"


@dataclass
class SourceHealth:
    last_ok: float | None = None
    last_error: str = "not probed yet"


@dataclass
class Readiness:
    sources: Sequence[Source]
    interval_s: float
    health: dict[str, SourceHealth] = field(default_factory=dict)
    #: What the server still loads before it is ready (the embedding model), or None.
    loading: str | None = None

    def __post_init__(self) -> None:
        self.health = {s.id: SourceHealth() for s in self.sources}

    async def probe_once(self) -> None:
        await asyncio.gather(*(self._probe(s) for s in self.sources))

    async def _probe(self, source: Source) -> None:
        health = self.health[source.id]
        me = asyncio.current_task()
        try:
            # Deadlines as scopes on this task, not wait_for: on 3.11 wait_for runs the
            # call in a task of its own, whose SystemExit would stop the loop.
            prepare = preparer(source)
            if prepare is not None:  # a source whose data cannot be built is not ready
                async with asyncio.timeout(PREPARE_TIMEOUT_S):
                    await prepare()
            probe = prober(source)  # the source's own check, if it has one
            async with asyncio.timeout(source.timeout_s):
                if probe is not None:
                    await probe()
                    rows: object = []
                else:
                    rows = await source.search(PROBE_QUERY, {"query": PROBE_QUERY}, 1)
        except TimeoutError:
            health.last_error = f"timeout: no answer within {source.timeout_s:g} s"
        except BaseException as exc:  # a source is someone else's code, whatever it raises
            if not contained(exc, me):  # the prober is being stopped
                raise
            health.last_error = f"{error_type(exc)}: {_text(exc)}"
        else:
            if isinstance(rows, list):
                health.last_ok, health.last_error = time.monotonic(), ""
                return
            health.last_error = f"invalid_response: {type(rows).__name__}"
        logger.warning("source_probe_failed", source_id=source.id, error=health.last_error)

    async def run(self) -> None:
        """Probe forever (cancelled at shutdown)."""
        while True:
            await self.probe_once()
            await asyncio.sleep(self.interval_s)

    def failing(self) -> dict[str, str]:
        """``{source_id: why}`` for every source that has not answered recently."""
        now = time.monotonic()
        stale = 3 * self.interval_s
        out = {}
        for source_id, health in self.health.items():
            if health.last_ok is None or now - health.last_ok > stale:
                out[source_id] = health.last_error or f"no answer for {stale:g} s"
        return out


def _text(exc: BaseException) -> str:
    try:
        return str(exc)[:200]
    except Exception:
        return "?"
