"""Each worker's broker runs on an event loop of its own, in one background thread.

Ranking is CPU work that ``Broker.arequest`` does on the loop that awaits it. On the
HTTP loop it would stall everything else: requests would wait unparsed (so the
concurrency limit never sees them and cannot shed load) and ``/healthz`` would
answer late under load — exactly how a busy pod gets killed by its liveness probe.
On its own loop the broker keeps its concurrency (sources fan out as before) and
the HTTP loop stays free to parse, refuse, probe and scrape; numpy releases the GIL
for the heavy part.
"""

from __future__ import annotations

from nautilus_ranking.fanout.background_loop import BackgroundLoop


class BrokerLoop(BackgroundLoop):
    """The broker's loop: ``await run(coro)`` from the HTTP loop (or the MCP server's)."""

    def __init__(self) -> None:
        super().__init__("nautilus-broker")
