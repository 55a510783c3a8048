"""Inside the Nautilus broker, a request is ranked by its agent's profile (the parts,
with a stand-in broker: what ``attach_ranking`` uses of one). The real broker in real
processes is ``inside/test_inside.py``'s, run by ``test_nautilus_broker.py``."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from structlog.testing import capture_logs
from test_upstream_parts import FakeBroker

from nautilus_ranking.settings.model import ConfigError, NautilusSettings
from nautilus_ranking.upstream import attach_ranking

QUERY = "disk full on orders-db"


def first_ids(response: Any) -> list[str]:
    return [r["id"] for rows in response.data.values() for r in rows]


def test_two_agents_at_once_each_ranked_by_its_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NAUTILUS_PROFILES__ONCALL__SOURCE_BOOSTS", "runbooks:high,tickets:-high")
    monkeypatch.setenv("NAUTILUS_PROFILES__ONCALL__RANKING_TOP_K", "1")
    monkeypatch.setenv("NAUTILUS_PROFILES__ONCALL__AGENTS", "oncall-bot")
    monkeypatch.setenv("NAUTILUS_PROFILES__AUDIT__RANKING_TOP_K", "3")
    monkeypatch.setenv("NAUTILUS_PROFILES__AUDIT__AGENTS", "auditor")
    broker = FakeBroker(["r1", "r2", "r3"])
    with capture_logs():  # the broker is not installed here: the version warning
        attached = attach_ranking(broker, NautilusSettings(ranking_top_k=1))
    assert attached.enabled

    async def three() -> list[Any]:
        return list(
            await asyncio.gather(
                broker.arequest("oncall-bot", QUERY),
                broker.arequest("auditor", QUERY),
                broker.arequest("someone-else", QUERY),
            )
        )

    oncall, audit, other = asyncio.run(three())
    assert first_ids(oncall) == ["RB-2"]  # runbooks favoured, tickets held back
    assert first_ids(audit)[0] == "T-1" and len(first_ids(audit)) == 3  # unboosted, K 3
    assert first_ids(other) == ["T-1"]  # no profile lists it: the global knobs
    rankings = [attached.ranking(r) for r in ("r1", "r2", "r3")]
    assert [r.profile if r else "?" for r in rankings] == ["oncall", "audit", None]
    assert rankings[0] is not None and rankings[0].to_dict()["profile"] == "oncall"
    assert rankings[2] is not None and "profile" not in rankings[2].to_dict()


def test_an_agent_s_profile_that_ranks_nothing_returns_the_brokers_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NAUTILUS_PROFILES__RAW__AGENTS", "raw-bot")
    monkeypatch.setenv("NAUTILUS_PROFILES__RAW__RANKING_LEXICAL", "cosine")  # ranks nothing
    # empty: the global top K unset in this profile (a profile may unset a knob)
    monkeypatch.setenv("NAUTILUS_PROFILES__RAW__RANKING_TOP_K", "")
    broker = FakeBroker(["r1"])
    with capture_logs():
        attached = attach_ranking(broker, NautilusSettings(ranking_top_k=1))
    response = asyncio.run(broker.arequest("raw-bot", QUERY))
    assert first_ids(response) == ["RB-1", "RB-2", "T-1", "T-2"]
    assert attached.ranking("r1") is None


def test_a_profile_boost_naming_no_broker_source_is_dropped_or_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NAUTILUS_PROFILES__ONCALL__SOURCE_BOOSTS", "wiki:-high,runbooks:high")
    monkeypatch.setenv("NAUTILUS_PROFILES__ONCALL__AGENTS", "oncall-bot")
    with capture_logs() as logs:
        attach_ranking(FakeBroker([]), NautilusSettings())
    skipped = [e for e in logs if e["event"] == "source_boost_skipped"]
    assert [e["value"] for e in skipped] == ["wiki"]
    assert skipped[0]["variable"] == "NAUTILUS_PROFILES__ONCALL__SOURCE_BOOSTS"
    with capture_logs(), pytest.raises(ConfigError, match="no source has id 'wiki'"):
        attach_ranking(FakeBroker([]), NautilusSettings(config_strict=True))
