"""The words that only routed a request do not steer its ranking: on the judged set
(judged.py) with the data type ``support``, whose name is in rows' text ("Supported
browsers", "Contact support"), and with the neutral ``faq``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import AGENT, CONTEXT, static_source, write_config
from judged import ARTICLES, QUESTIONS, SUPPORT_ROWS, TICKETS, WIKI, mean, ndcg_at_10

from nautilus_ranking import NautilusSettings
from nautilus_ranking.upstream import attach_ranking
from nautilus_ranking.upstream.routing_words import NO_ROUTING_WORDS


def config(folder: Path, data_type: str, keyword_map: dict[str, list[str]] | None = None) -> Path:
    path = write_config(
        folder,
        [
            static_source("articles", ARTICLES, data_type),
            static_source("tickets", TICKETS, data_type),
            static_source("wiki", WIKI, data_type),
        ],
    )
    if keyword_map:
        document = yaml.safe_load(path.read_text())
        document["analysis"] = {"keyword_map": keyword_map}
        path.write_text(yaml.safe_dump(document))
    return path


def top10(path: Path, prefix: str, routing_words: bool, **knobs: Any) -> dict[str, list[str]]:
    """Each question's ranked ids, asked as ``prefix + question``; ``routing_words``
    False ranks by the whole intent (as before the routing words left the query)."""
    from nautilus import Broker

    broker = Broker.from_config(path)
    try:
        attached = attach_ranking(broker, NautilusSettings(ranking_top_k=10, **knobs))
        if not routing_words:
            attached.routing_words = NO_ROUTING_WORDS
        out = {}
        for question in QUESTIONS:
            response = broker.request(AGENT, prefix + question, dict(CONTEXT))
            ranking = attached.ranking(response.request_id)
            assert ranking is not None and ranking.fallback is None
            out[question] = [r.row["id"] for r in ranking.ranking]
    finally:
        broker.close()
    return out


def quality(ranked: dict[str, list[str]]) -> float:
    return mean(ndcg_at_10(ranked[q], g) for q, g in QUESTIONS.items())


def support_rows_in_unrelated_top10(ranked: dict[str, list[str]]) -> tuple[int, int]:
    """Over the questions none of whose relevant rows is a "support" row: how many have
    one in their top 10, and how many such placements there are."""
    unrelated = [q for q, g in QUESTIONS.items() if not SUPPORT_ROWS & set(g)]
    found = [len(SUPPORT_ROWS & set(ranked[q])) for q in unrelated]
    return sum(n > 0 for n in found), sum(found)


def test_a_data_type_named_in_rows_no_longer_steers_the_ranking(tmp_path: Path) -> None:
    path = config(tmp_path, "support")
    before = top10(path, "support: ", routing_words=False)
    after = top10(path, "support: ", routing_words=True)
    questions, placements = support_rows_in_unrelated_top10(before)
    assert questions == 11 and placements >= 40  # (nearly) all four, in all eleven
    # left: "Contact support" matches "emails" by itself, and one row with no match
    # at all fills the tenth place of a question that matched nine
    assert support_rows_in_unrelated_top10(after) == (2, 2)
    assert quality(after) > quality(before)


def test_a_neutral_routing_word_changes_nothing(tmp_path: Path) -> None:
    # "faq" is in no row ("kb" would not do: the articles' ids are KB-01, ...)
    path = config(tmp_path, "faq")
    assert top10(path, "faq: ", routing_words=True) == top10(path, "faq: ", routing_words=False)


@pytest.mark.parametrize(
    ("setting", "ranked_by"),
    [("routing", "hours"), ("content", "help desk hours")],
)
def test_curated_keywords_route_unless_they_are_content(
    tmp_path: Path, setting: str, ranked_by: str
) -> None:
    from nautilus import Broker

    path = config(tmp_path, "support", {"support": ["help desk"]})
    broker = Broker.from_config(path)
    try:
        attached = attach_ranking(
            broker, NautilusSettings(ranking_top_k=3, ranking_curated_keywords=setting)
        )
        response = broker.request(AGENT, "Support: help desk hours", dict(CONTEXT))
        assert response.sources_queried  # the words still route the request
        ranking = attached.ranking(response.request_id)
        assert ranking is not None and ranking.ranked_by == ranked_by
        # a request that names only its data type is ranked by it
        alone = broker.request(AGENT, "support", dict(CONTEXT))
        only = attached.ranking(alone.request_id)
        assert only is not None and only.ranked_by == "support"
    finally:
        broker.close()
