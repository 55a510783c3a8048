"""The one declaration of the knobs: every setting classified, one rule for ranking on,
and the docs' tables made from it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import tools.knob_tables
from nautilus_ranking.settings.knobs import (
    BY_FIELD,
    KNOBS,
    OVERRIDES,
    PER_PROFILE,
    PROCESS_SETTINGS,
    RANKING_SWITCHES,
)
from nautilus_ranking.settings.model import NautilusSettings
from tools.knob_tables import OVERRIDE_LISTS, ROOT, TABLES, rendered

#: A value that sets each knob (not its default).
SET_VALUES: dict[str, Any] = {
    "ranking_top_k": 5,
    "ranking_idf": True,
    "source_boosts": "tickets:high",
    "ranking_max_candidates": 50,
    "ranking_dedup_key": "id",
    "ranking_cut": "gap:0.1",
    "ranking_near_duplicates": "on",
    "ranking_diversity": "0.3",
    "ranking_max_per_source": 2,
    "ranking_canonical_sources": "helpcenter,wiki",
    "ranking_recency": "half_life:90d",
    "ranking_supersede": True,
    "ranking_time_fields": "tickets:updated_at",
    "ranking_document_keys": "wiki:page_id",
    "ranking_may_revise": "handbook:wiki",
    "ranking_max_tokens": 500,
    "ranking_budget_passages": False,
    "ranking_min_confidence": "0.06",
    "ranking_confidence_fit": "confidence-fit.json",
    "ranking_lexical": "bm25" if NautilusSettings().ranking_lexical == "cosine" else "cosine",
    "ranking_curated_keywords": "content",
    "embedder": "noop",
    "embedder_cache_size": 7,
    "embedder_disk_cache_mb": 0,
    "embedder_deadline_ms": 5,
    "embedder_max_rows": 7,
}


def test_every_setting_is_a_knob_or_a_process_setting_exactly_once() -> None:
    fields = set(NautilusSettings.model_fields)
    knobs = [k.field for k in KNOBS]
    assert len(knobs) == len(set(knobs))
    assert not set(knobs) & PROCESS_SETTINGS
    unclassified = fields - set(knobs) - PROCESS_SETTINGS
    assert not unclassified, f"classify these in nautilus_ranking/settings/knobs.py: {unclassified}"
    assert not (set(knobs) | PROCESS_SETTINGS) - fields, "declared fields that do not exist"


def test_every_knob_has_a_value_here_that_sets_it() -> None:
    assert set(SET_VALUES) == set(BY_FIELD)


@pytest.mark.parametrize("field", sorted(BY_FIELD))
def test_a_knob_alone_turns_ranking_on_exactly_when_declared_so(field: str) -> None:
    settings = NautilusSettings(**{field: SET_VALUES[field]})
    default = NautilusSettings.model_fields[field].get_default(call_default_factory=True)
    assert getattr(settings, field) != default, "the value must set the knob"
    assert settings.ranking_enabled is BY_FIELD[field].turns_ranking_on


def test_nothing_set_is_passthrough() -> None:
    assert NautilusSettings().ranking_enabled is False


def test_the_embedder_is_per_process_and_the_ranking_knobs_per_profile() -> None:
    assert {k.field for k in PER_PROFILE} >= {
        "ranking_top_k",
        "source_boosts",
        "ranking_idf",
        "ranking_max_candidates",
        "ranking_dedup_key",
        "ranking_cut",
        "ranking_max_tokens",
        "ranking_near_duplicates",
        "ranking_diversity",
        "ranking_max_per_source",
        "ranking_lexical",
    }
    assert all(k.kind == "ranking" for k in PER_PROFILE)
    assert all(k.kind == "ranking" for k in RANKING_SWITCHES)


def test_the_cli_names_every_switch_when_ranking_is_off() -> None:
    from nautilus_ranking.cli.output import RANKING_OFF

    for knob in RANKING_SWITCHES:
        assert knob.variable in RANKING_OFF
        if knob.flag:
            assert knob.flag in RANKING_OFF
    for knob in KNOBS:
        if not knob.turns_ranking_on:
            assert knob.variable not in RANKING_OFF


@pytest.mark.parametrize("doc", sorted(TABLES), ids=lambda p: p.name)
def test_the_docs_knob_tables_are_made_from_the_declaration(doc: Any) -> None:
    text = doc.read_text(encoding="utf-8")
    for name in TABLES[doc]:
        assert f"<!-- knobs:{name} -->" in text
    assert rendered(text) == text, "run python -m tools.knob_tables"


@pytest.mark.parametrize("doc", sorted(OVERRIDE_LISTS), ids=lambda p: p.name)
def test_the_docs_override_lists_are_made_from_the_one_declaration(doc: Any) -> None:
    """They named `top_k`, `boosts`, `idf` and `sources` while a request may override
    more: each list is made from ``OVERRIDES``, every field of it named."""
    text = doc.read_text(encoding="utf-8")
    lists = re.findall(r"<!-- overrides -->(.*?)<!-- /overrides -->", text)
    assert len(lists) == OVERRIDE_LISTS[doc]
    for listed in lists:
        assert re.findall(r"`(\w+)`", listed) == list(OVERRIDES)
    assert rendered(text) == text, "run python -m tools.knob_tables"


def test_a_field_added_to_the_overrides_makes_every_list_stale(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tools.knob_tables, "OVERRIDES", (*OVERRIDES, "new_field"))
    for doc in OVERRIDE_LISTS:
        text = doc.read_text(encoding="utf-8")
        made = rendered(text)
        assert made != text
        ending = f"`{OVERRIDES[-1]}` and `new_field`<!-- /overrides -->"
        assert made.count(ending) == OVERRIDE_LISTS[doc]


def test_the_configuration_page_opens_with_every_knob_that_turns_ranking_on() -> None:
    """Its opening named five switches while its table said nine: the sentence is made
    from the declaration too."""
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    opening = text.split("## ", 1)[0]
    named = set(re.findall(r"`(NAUTILUS_[A-Z_]+)`", opening.split("<!-- knobs:switches -->")[1]))
    assert named == {k.variable for k in RANKING_SWITCHES}


#: The modules that carry every knob from its declaration to where it acts: none of
#: them names a knob, so a new knob is one declaration (docs/design.md, "Adding a
#: ranking signal").
PLUMBING = (
    "settings/model.py",
    "request/model.py",
    "request/plan.py",
    "request/pages.py",
    "request/engine.py",
    "synthesis/ranking.py",
    "profiles/build.py",
    "broker.py",
)
#: Knobs a plumbing module uses for what it does itself (paging by the top K, the
#: budget and the abstain the request's broker applies), not to carry them.
USED_HERE = {
    ("request/plan.py", "ranking_top_k"),
    ("request/pages.py", "ranking_top_k"),
    ("request/plan.py", "ranking_max_tokens"),
    ("request/plan.py", "ranking_min_confidence"),
    ("request/plan.py", "ranking_max_candidates"),
    ("request/engine.py", "ranking_min_confidence"),
    ("broker.py", "ranking_max_tokens"),
    ("broker.py", "ranking_budget_passages"),
    ("request/plan.py", "ranking_budget_passages"),
    ("broker.py", "ranking_min_confidence"),
    ("broker.py", "source_boosts"),
    ("profiles/build.py", "ranking_top_k"),
    ("profiles/build.py", "source_boosts"),
    ("settings/model.py", "source_boosts"),
    ("settings/model.py", "ranking_idf"),
    ("synthesis/ranking.py", "source_boosts"),
    ("request/engine.py", "source_boosts"),
}


def test_no_plumbing_module_names_a_knob() -> None:
    """A knob's field is named in its declaration and where it acts; the modules that
    carry knobs (the settings' parse, the request model, overrides, explain, the
    cursor's key, the ranker's arguments, a profile's parse) derive them."""
    package = Path(__file__).resolve().parents[2] / "nautilus_ranking"
    named = sorted(
        (module, knob.field)
        for module in PLUMBING
        for knob in KNOBS
        if knob.kind == "ranking"
        and re.search(rf"\b{knob.field}\b", (package / module).read_text(encoding="utf-8"))
        and (module, knob.field) not in USED_HERE
    )
    assert named == []
