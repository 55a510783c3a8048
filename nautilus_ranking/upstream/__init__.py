"""Our ranking inside the Nautilus broker (``nautilus-rkm``, whose package is ``nautilus``).

One call, on a broker the broker's own ``Broker.from_config`` built::

    from nautilus import Broker
    from nautilus_ranking.upstream import attach_ranking

    broker = Broker.from_config("nautilus.yaml")
    ranking = attach_ranking(broker)          # NAUTILUS_* knobs from the environment
    response = broker.request("agent-alpha", "orders-db disk full", {"purpose": "support"})
    ranking.ranking(response.request_id)      # scores, components, the rows left out

``python -m nautilus_ranking.upstream serve --config nautilus.yaml`` is
``nautilus serve`` with the ranking attached (HTTP, MCP or both), plus
``POST /v1/request/ranked`` and the MCP tool ``nautilus_request_ranked``: the rows in
global rank order (:mod:`.ranked_servers`). See docs/nautilus-broker.md.
"""

from __future__ import annotations

from nautilus_ranking.upstream.attach import (
    AttachedRanking,
    IncompatibleBrokerError,
    attach_ranking,
    attached_ranking,
)
from nautilus_ranking.upstream.outcome import RequestRanking
from nautilus_ranking.upstream.synthesizer import BrokerSynthesizer
from nautilus_ranking.upstream.version import TESTED_BROKER_VERSIONS

__all__ = [
    "TESTED_BROKER_VERSIONS",
    "AttachedRanking",
    "BrokerSynthesizer",
    "IncompatibleBrokerError",
    "RequestRanking",
    "attach_ranking",
    "attached_ranking",
]
