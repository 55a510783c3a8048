"""A cursor's ranking key is the same bytes whatever declares the knobs: each digest
below was made by the code that listed every knob by hand, so a cursor made then still
pages, and ``next_cursor`` is byte-identical."""

from __future__ import annotations

import pytest

from nautilus_ranking.request.pages import ranking_key
from nautilus_ranking.settings.model import NautilusSettings

CASES = {
    "unset": {},
    "boosts": {"source_boosts": "tickets:high,wiki:-low", "ranking_top_k": "5"},
    "idf": {"ranking_idf": "true", "ranking_max_candidates": "50", "ranking_dedup_key": "doc"},
    "cut": {
        "ranking_cut": "gap:0.1",
        "ranking_near_duplicates": "on",
        "ranking_diversity": "0.3",
        "ranking_max_per_source": "2",
        "ranking_canonical_sources": "wiki,tickets",
    },
    "recency": {
        "ranking_recency": "half_life:90d,tickets:window:7d",
        "ranking_time_fields": "tickets:updated_at",
    },
    "supersede": {
        "ranking_supersede": "true",
        "ranking_document_keys": "wiki:doc",
        "ranking_may_revise": "wiki:tickets",
        "ranking_time_fields": "wiki:t",
    },
    "budget": {"ranking_max_tokens": "500", "ranking_min_confidence": "0.12", "ranking_top_k": "3"},
}

#: The key of each case, by profile and as_of, as the hand-listed key made it.
PINNED = {
    "boosts|None|2024-06-01T00:00:00Z": "05962b54c50d1c4ea49b7720",
    "boosts|None|None": "05962b54c50d1c4ea49b7720",
    "boosts|oncall|2024-06-01T00:00:00Z": "2c9c4d5319e2135b08ccd71b",
    "boosts|oncall|None": "2c9c4d5319e2135b08ccd71b",
    "budget|None|2024-06-01T00:00:00Z": "07425547dcc8759f1dbaea2c",
    "budget|None|None": "07425547dcc8759f1dbaea2c",
    "budget|oncall|2024-06-01T00:00:00Z": "957ecf1edcc79a168b8b376e",
    "budget|oncall|None": "957ecf1edcc79a168b8b376e",
    "cut|None|2024-06-01T00:00:00Z": "23572d6e36d466daea03e0f5",
    "cut|None|None": "23572d6e36d466daea03e0f5",
    "cut|oncall|2024-06-01T00:00:00Z": "f58cbb536d2c20a9cd6a0fb5",
    "cut|oncall|None": "f58cbb536d2c20a9cd6a0fb5",
    "idf|None|2024-06-01T00:00:00Z": "cca58cfd700282ea554202d8",
    "idf|None|None": "cca58cfd700282ea554202d8",
    "idf|oncall|2024-06-01T00:00:00Z": "8d4f6a2bba510adfd6a2e52d",
    "idf|oncall|None": "8d4f6a2bba510adfd6a2e52d",
    "recency|None|2024-06-01T00:00:00Z": "07d021ae345f16ca7b924d31",
    "recency|None|None": "0dbdaac42e44561431565447",
    "recency|oncall|2024-06-01T00:00:00Z": "7b9862207cb9e60a2f3f78e8",
    "recency|oncall|None": "e6221ef094d726e8891c5254",
    "supersede|None|2024-06-01T00:00:00Z": "0faa3f0dd0283a9478af4a8e",
    "supersede|None|None": "e4c0effd463fdb916fb78005",
    "supersede|oncall|2024-06-01T00:00:00Z": "1429faa56dd8af5d09f226fe",
    "supersede|oncall|None": "fcf494daf4219bf8b365f094",
    "unset|None|2024-06-01T00:00:00Z": "64aa54be72c018f40a2aa9ce",
    "unset|None|None": "64aa54be72c018f40a2aa9ce",
    "unset|oncall|2024-06-01T00:00:00Z": "f9d5d7fce735f33ab23e52e1",
    "unset|oncall|None": "f9d5d7fce735f33ab23e52e1",
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_knob_enters_the_key_as_before(case: str) -> None:
    settings = NautilusSettings(embedder="hashing", **CASES[case])
    for profile in (None, "oncall"):
        for as_of in (None, "2024-06-01T00:00:00Z"):
            key = ranking_key("q", settings, ["tickets", "wiki"], profile, as_of)
            assert key == PINNED[f"{case}|{profile}|{as_of}"], (case, profile, as_of)
