"""Inside the broker, with ``NAUTILUS_FEEDBACK`` on: the ranked answer made citable.

The ranked route's and tool's ``rows`` (ours, beside the broker's attested rows) gain
each row's ``position`` and ``cite``, and the answer its ``ranking_id`` (the broker's
``request_id``); the attested ``data`` of the stock route and the attestation are
never touched. The handle is the one ``serve`` gives (``feedback/cites.py``), made for
the request's agent (a keyed hash of its id), and the answer's query record and
impressions are queued for the feedback log as ``serve``'s are. Off, the answer is
exactly what it is without this module.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from nautilus_ranking.feedback.cites import Cite, make_cite
from nautilus_ranking.feedback.identity import keyed_hash, object_id
from nautilus_ranking.feedback.recorder import record_answer
from nautilus_ranking.feedback.records import HandedOver
from nautilus_ranking.request.cursor_keys import CursorKeys, cursor_keys
from nautilus_ranking.settings.model import NautilusSettings
from nautilus_ranking.upstream.outcome import RequestRanking


@dataclass(frozen=True)
class BrokerCiting:
    """The process settings and keys a ranked answer is made citable with."""

    settings: NautilusSettings
    keys: CursorKeys

    @classmethod
    def of(cls, settings: NautilusSettings) -> BrokerCiting | None:
        """None with feedback off (the answer is left as it is)."""
        return cls(settings, cursor_keys(settings)) if settings.feedback else None

    def cite(
        self, answer: dict[str, Any], outcome: RequestRanking | None, agent_id: str
    ) -> dict[str, Any]:
        """``answer`` (a ranked answer) with its ranking id and its rows' positions and
        cites, its records queued; a passthrough answer is returned as it is."""
        if outcome is None or not answer.get("ranking", {}).get("ranked"):
            return answer
        ranking_id = str(answer["request_id"])
        client = agent_client(self.keys, agent_id)
        now = time.time()
        rows = [
            {
                **entry,
                "position": index + 1,
                "cite": make_cite(
                    self.keys,
                    Cite(
                        ranking_id,
                        1,
                        index + 1,
                        entry["source"],
                        object_id(entry["row"]),
                        outcome.profile,
                        client,
                        int(now),
                    ),
                ),
            }
            for index, entry in enumerate(answer["rows"])
        ]
        confidence = outcome.confidence.get("value") if outcome.confidence else None
        abstained = bool(outcome.abstain["abstained"]) if outcome.abstain else False
        handed = HandedOver(
            ranking_id,
            client,
            outcome.query,
            outcome.profile,
            1,
            self.settings,
            list(outcome.ranking[: len(rows)]),
            confidence,
            abstained,
            now,
        )
        record_answer(self.settings, self.keys, handed)
        return {"ranking_id": ranking_id, **answer, "rows": rows}


def agent_client(keys: CursorKeys, agent_id: str) -> str:
    """The client a cite made inside the broker names: a keyed hash of the agent the
    answer was made for (the broker binds credentials to agents); feedback on the cite
    is accepted only as that agent."""
    return keyed_hash(keys, "agent", agent_id)
