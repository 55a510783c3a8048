"""The budget and the cut where the library applies them: ``Broker`` (the budget, from
``NAUTILUS_RANKING_MAX_TOKENS``) and ``RankingSynthesizer`` (the cut, from
``NAUTILUS_RANKING_CUT``) — on the demo through the real CLI, and on fake sources."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
import toktok
from cli_process import run_nautilus
from fakes import FakeSource
from plain_environment import plain_environment

from nautilus_ranking import AdapterResult, Broker, NautilusSettings, RankingSynthesizer
from nautilus_ranking.selection import RelevanceCut, apply_budget, entry_text, relevance_cut

QUERY = "users keep getting logged out of their sessions"


def query_json(env: dict[str, str]) -> dict[str, Any]:
    done = run_nautilus("query", QUERY, "--json", env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def handed_over(out: dict[str, Any]) -> list[str]:
    """Each ranking entry with its row, as the default text a row is counted as — rebuilt
    here from the CLI's JSON output, not taken from nautilus_ranking."""
    seen: dict[str, int] = {}
    texts = []
    for entry in out["ranking"]:
        sid = entry["source_id"]
        row = out["data"][sid][seen.get(sid, 0)]
        seen[sid] = seen.get(sid, 0) + 1
        texts.append(json.dumps({**entry, "row": row}, sort_keys=True, separators=(",", ":")))
    return texts


@pytest.mark.parametrize("max_tokens", [60, 400, 1500])
def test_the_demo_under_a_budget_never_hands_over_more_tokens(max_tokens: int) -> None:
    full = query_json({"NAUTILUS_RANKING_TOP_K": "10", "NAUTILUS_RANKING_IDF": "true"})
    out = query_json(
        {
            "NAUTILUS_RANKING_TOP_K": "10",
            "NAUTILUS_RANKING_IDF": "true",
            "NAUTILUS_RANKING_MAX_TOKENS": str(max_tokens),
        }
    )
    counts = toktok.batch_count(handed_over(out), "o200k_base")
    budget = out["budget"]
    assert budget["tokens_used"] == sum(counts)
    if budget["first_row_over_budget"]:
        assert len(counts) == 1 and counts[0] > max_tokens
    else:
        assert sum(counts) <= max_tokens
    assert budget["rows_left_out"] == len(full["ranking"]) - len(out["ranking"])
    # a subsequence of the unbudgeted ranking, each row at its own rank
    ranks = [(e["source_id"], e["id"], e["rank"]) for e in out["ranking"]]
    assert ranks == [
        (e["source_id"], e["id"], e["rank"])
        for e in full["ranking"]
        if (e["source_id"], e["id"], e["rank"]) in ranks
    ]
    assert sum(map(len, out["data"].values())) == len(out["ranking"])
    # 60 tokens: the first row alone is over (flagged); 1500: some rows left out, not all
    assert budget["first_row_over_budget"] == (max_tokens == 60)


def test_a_budget_alone_keeps_what_fits_of_the_passthrough() -> None:
    full = query_json({})
    out = query_json({"NAUTILUS_RANKING_MAX_TOKENS": "700"})
    assert out["ranking_enabled"] is False and full["ranking_enabled"] is False
    counts = toktok.batch_count(handed_over(out), "o200k_base")  # scores written as null
    assert out["budget"]["tokens_used"] == sum(counts) <= 700
    assert 0 < out["budget"]["rows_left_out"] == len(full["ranking"]) - len(out["ranking"])


def test_without_a_budget_the_response_has_no_budget() -> None:
    out = query_json({"NAUTILUS_RANKING_TOP_K": "5"})
    assert "budget" not in out


def _results() -> list[AdapterResult]:
    docs = [
        {
            "id": f"d{i}",
            "text": (
                "disk full on the orders database "
                if i % 3 == 0
                else "weekly report of the team lunch "
            )
            * (1 + i % 4),
        }
        for i in range(12)
    ]
    return [AdapterResult("a", docs[:6], ranked=True), AdapterResult("b", docs[6:], ranked=True)]


def test_a_broker_with_a_budget_keeps_what_fits() -> None:
    ranker = RankingSynthesizer(top_k=10, idf=True)
    rows = {r.source_id: r.rows for r in _results()}
    sources = [FakeSource(sid, found) for sid, found in rows.items()]
    unbudgeted = Broker(sources, ranker).request("orders disk full")
    response = Broker(sources, ranker, max_tokens=300).request("orders disk full")
    texts = [entry_text(r) for r in response.ranking]
    assert response.budget is not None
    assert response.budget["tokens_used"] == sum(toktok.batch_count(texts, "o200k_base")) <= 300
    assert response.budget["rows_left_out"] == len(unbudgeted.ranking) - len(response.ranking)
    assert 0 < response.budget["rows_left_out"] < len(unbudgeted.ranking)
    assert set(response.data) == {"a", "b"}
    assert [r.row for r in response.ranking] == [
        r.row for r in unbudgeted.ranking if r.row in [k.row for k in response.ranking]
    ]
    assert response.response_hash != unbudgeted.response_hash  # the hash covers what is kept
    assert "budget" in response.to_dict() and "budget" not in unbudgeted.to_dict()


def test_a_broker_refuses_a_budget_that_is_not_a_positive_integer() -> None:
    with pytest.raises(ValueError, match="max_tokens must be an integer >= 1"):
        Broker([], max_tokens=0)


def test_from_config_takes_the_budget_from_the_settings() -> None:
    with Broker.from_config(None, NautilusSettings(ranking_max_tokens=300)) as broker:
        assert broker.max_tokens == 300
    with Broker.from_config(None, NautilusSettings()) as broker:
        assert broker.max_tokens is None


def test_apply_budget_keeps_every_source_key_and_the_ranks() -> None:
    ranker = RankingSynthesizer(top_k=10)
    found = ranker.merge_ranked(_results(), {"query": "orders disk full"})
    data, ranking = found.data, found.ranking
    kept_data, kept, result = apply_budget(data, ranking, 1, text=lambda r: "x" * r.rank)
    assert result.over_budget_first is False and [r.rank for r in kept] == [1]
    assert kept_data == {
        "a": [ranking[0].row] if ranking[0].source_id == "a" else [],
        "b": [ranking[0].row] if ranking[0].source_id == "b" else [],
    }


def test_the_cut_in_the_ranker_is_a_prefix_of_the_uncut_ranking() -> None:
    context = {"query": "orders disk full"}
    uncut = RankingSynthesizer(top_k=10, idf=True).rank(_results(), context)
    for setting in ("relative:0.8", "floor:0.7", "gap:0.05"):
        ranker = RankingSynthesizer(top_k=10, idf=True, cut=setting)
        cut = ranker.rank(_results(), context)
        assert 1 <= len(cut) <= len(uncut)
        assert cut == uncut[: len(cut)]
        assert len(cut) == relevance_cut(uncut, ranker.cut)
        data = ranker.merge_ranked(_results(), context).data
        assert sum(map(len, data.values())) == len(cut)
    # the relevant rows (every third) lead; a cut at 0.8 of the best keeps only them
    strict = RankingSynthesizer(top_k=10, idf=True, cut=RelevanceCut("relative", 0.8))
    assert {r.row["id"] for r in strict.rank(_results(), context)} <= {"d0", "d3", "d6", "d9"}


def test_the_ranker_refuses_a_bad_cut() -> None:
    with pytest.raises(ValueError, match="cut: not a cut setting"):
        RankingSynthesizer(cut="top:3")


def test_from_settings_takes_the_cut() -> None:
    ranker = RankingSynthesizer.from_settings(NautilusSettings(ranking_cut="floor:0.6"))
    assert ranker.cut == RelevanceCut("floor", 0.6)


def test_a_cut_says_how_many_rows_of_the_top_k_it_left_out() -> None:
    context = {"query": "orders disk full"}
    uncut = RankingSynthesizer(top_k=10, idf=True).rank(_results(), context)
    ranker = RankingSynthesizer(top_k=10, idf=True, cut="relative:0.8")
    found = ranker.merge_ranked(_results(), context)
    data, ranking, cut = found.data, found.ranking, found.cut
    assert cut is not None
    assert sum(map(len, data.values())) == len(ranking)
    assert cut == {"setting": "relative:0.8", "rows_left_out": len(uncut) - len(ranking)}
    assert cut["rows_left_out"] > 0
    sources = [FakeSource(r.source_id, r.rows) for r in _results()]
    response = Broker(sources, ranker).request("orders disk full")
    plain = Broker(sources, RankingSynthesizer(top_k=10, idf=True)).request("orders disk full")
    # shaped like the budget: the setting, the rows left out
    assert response.to_dict()["cut"] == {
        "setting": "relative:0.8",
        "rows_left_out": len(plain.ranking) - len(response.ranking),
    }
    assert "cut" not in plain.to_dict()


def test_the_cli_says_what_the_cut_left_out_in_text_and_json() -> None:
    env = {"NAUTILUS_RANKING_TOP_K": "10", "NAUTILUS_RANKING_CUT": "relative:0.9"}
    out = query_json(env)
    full = query_json({"NAUTILUS_RANKING_TOP_K": "10"})
    assert out["cut"] == {
        "setting": "relative:0.9",
        "rows_left_out": len(full["ranking"]) - len(out["ranking"]),
    }
    assert out["cut"]["rows_left_out"] > 0
    base = plain_environment()
    base["NAUTILUS_DATA_DIR"] = os.environ["NAUTILUS_DATA_DIR"]
    text = run_nautilus(
        "query", QUERY, "--top-k", "10", "--cut", "relative:0.9", env=base, timeout=300, check=True
    ).stdout
    left_out = out["cut"]["rows_left_out"]
    assert f"cut: relative:0.9 left out {left_out} ranked row(s)" in text
    assert "off is the recommendation" in text
    helped = run_nautilus("query", "--help", env=base, check=True).stdout
    assert "Off is the recommendation" in " ".join(helped.split())
