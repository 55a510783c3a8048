"""Resolution per request, as properties: the global knobs, then the profile's, then the
request's overrides — only those the profile lets its callers give (a disallowed one
is a 403 naming it); a knob no layer sets keeps its default.

Derandomized like every property test here (tests/README.md).
"""

from __future__ import annotations

from typing import Any

import pytest
from fakes import FakeSource
from hypothesis import given, settings
from hypothesis import strategies as st

from nautilus_ranking.broker import Broker
from nautilus_ranking.profiles.build import OVERRIDABLE, build_profiles
from nautilus_ranking.profiles.read import Entry
from nautilus_ranking.request.answer import answer_sync
from nautilus_ranking.request.engine import Engine
from nautilus_ranking.request.errors import ProblemError
from nautilus_ranking.request.model import QueryRequest
from nautilus_ranking.settings.model import NautilusSettings

SOURCES = ("a", "b", "c")
ROWS = {
    sid: [{"id": f"{sid}{i}", "text": f"disk full {sid} {i} " + "word " * i} for i in range(4)]
    for sid in SOURCES
}

#: Each knob tried: (setting field, request field, values a layer may give it).
KNOBS: dict[str, tuple[str, Any]] = {
    "ranking_top_k": ("top_k", st.integers(1, 6)),
    "ranking_idf": ("idf", st.booleans()),
    "ranking_max_per_source": ("max_per_source", st.integers(1, 3)),
    "source_boosts": (
        "boosts",
        st.dictionaries(st.sampled_from(SOURCES), st.sampled_from(["low", "high", "-medium"])),
    ),
}


def layer() -> st.SearchStrategy[dict[str, Any]]:
    """Some knobs set, the others not."""
    return st.fixed_dictionaries(
        {}, optional={field: values for field, (_, values) in KNOBS.items()}
    )


def engine_with(
    global_values: dict[str, Any], profile_values: dict[str, Any], overrides: list[str]
) -> Engine:
    settings = NautilusSettings.model_validate(global_values)
    broker = Broker([FakeSource(sid, ROWS[sid]) for sid in SOURCES])
    engine = Engine.of(broker, settings)
    entries = [Entry("p", field, value, f"test {field}") for field, value in profile_values.items()]
    entries.append(Entry("p", "overrides", overrides, "test overrides"))
    engine.profiles = build_profiles(entries)
    assert engine.profiles.problems == ()
    engine.build_profiles(settings)
    return engine


@settings(max_examples=60, deadline=None)
@given(
    global_values=layer(),
    profile_values=layer(),
    request_values=layer(),
    overrides=st.lists(st.sampled_from(OVERRIDABLE), unique=True),
)
def test_global_then_profile_then_the_overrides_the_profile_allows(
    global_values: dict[str, Any],
    profile_values: dict[str, Any],
    request_values: dict[str, Any],
    overrides: list[str],
) -> None:
    engine = engine_with(global_values, profile_values, overrides)
    request = QueryRequest(query="disk full", **{KNOBS[f][0]: v for f, v in request_values.items()})
    given_fields = [KNOBS[f][0] for f in request_values]
    refused = [name for name in given_fields if name not in overrides]
    if refused:
        with pytest.raises(ProblemError) as error:
            answer_sync(engine, request, profile="p")
        assert error.value.status == 403
        assert error.value.extra["field"] in refused
        return
    result = answer_sync(engine, request, profile="p")
    effective = result.plan.effective
    defaults = NautilusSettings.model_validate({})
    for field in KNOBS:
        expected = request_values.get(
            field, profile_values.get(field, global_values.get(field, getattr(defaults, field)))
        )
        assert getattr(effective, field) == expected, field
    assert result.profile == "p" and result.to_json()["profile"] == "p"


@settings(max_examples=30, deadline=None)
@given(global_values=layer(), request_values=layer())
def test_without_a_profile_the_global_knobs_and_the_process_switch_apply(
    global_values: dict[str, Any], request_values: dict[str, Any]
) -> None:
    engine = engine_with(global_values, {"ranking_top_k": 1}, [])
    request = QueryRequest(query="disk full", **{KNOBS[f][0]: v for f, v in request_values.items()})
    result = answer_sync(engine, request)  # no profile named: the global knobs
    defaults = NautilusSettings.model_validate({})
    for field in KNOBS:
        expected = request_values.get(field, global_values.get(field, getattr(defaults, field)))
        assert getattr(result.plan.effective, field) == expected, field
    assert result.to_json()["profile"] is None


def test_without_profiles_an_answer_has_no_profile_field() -> None:
    broker = Broker([FakeSource(sid, ROWS[sid]) for sid in SOURCES])
    engine = Engine.of(broker, NautilusSettings.model_validate({"ranking_top_k": 2}))
    result = answer_sync(engine, QueryRequest(query="disk full", explain=True))
    out = result.to_json()
    assert "profile" not in out and "profile" not in out["explain"]
    with pytest.raises(ProblemError) as error:
        answer_sync(engine, QueryRequest(query="disk full"), profile="p")
    assert error.value.status == 422


def test_a_cursor_carries_its_profile() -> None:
    engine = engine_with({"ranking_top_k": 2}, {"ranking_idf": True}, ["top_k"])
    entries = [Entry("q", "ranking_idf", True, "x"), Entry("p", "ranking_idf", True, "x")]
    engine.profiles = build_profiles(entries)
    engine.build_profiles(engine.settings)
    first = answer_sync(engine, QueryRequest(query="disk full"), profile="p")
    cursor = first.next_cursor
    assert cursor is not None
    again = answer_sync(engine, QueryRequest(query="disk full", cursor=cursor), profile="p")
    assert again.page is not None and again.page["number"] == 2
    # the same settings under another profile's name: the cursor is not that profile's
    with pytest.raises(ProblemError) as error:
        answer_sync(engine, QueryRequest(query="disk full", cursor=cursor), profile="q")
    assert error.value.status == 422 and error.value.extra["errors"][0]["field"] == "cursor"
