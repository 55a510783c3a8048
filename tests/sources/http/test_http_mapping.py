"""The response mapping: lists of hits, arrays under a header row (Groonga) and
parallel columns (Chroma); the dotted-path fast path answers as JMESPath does."""

from __future__ import annotations

import jmespath
import pytest
from hypothesis import given
from hypothesis import strategies as st

from nautilus_ranking.sources.http.mapping import (
    MappingError,
    ResponseMapping,
    ShapeError,
    compile_path,
)

ES_ANSWER = {
    "hits": {
        "hits": [
            {"_id": "a", "_score": 2.5, "_source": {"title": "Disk full", "svc": "db"}},
            {"_id": {"bad": 1}, "_score": 2.0, "_source": {"title": "dropped"}},
            {"_id": 7, "_score": 1.0, "_source": {"title": "Replica lag"}},
        ]
    }
}


def test_a_list_of_hits_maps_id_title_fields_and_score_and_drops_a_bad_hit() -> None:
    mapping = ResponseMapping(
        id="_id",
        hits="hits.hits",
        title="_source.title",
        score="_score",
        fields={"service": "_source.svc"},
    )
    rows, hits, problems = mapping.rows(ES_ANSWER)
    assert rows == [
        {"id": "a", "title": "Disk full", "service": "db", "engine_score": 2.5},
        {"id": 7, "title": "Replica lag", "engine_score": 1.0},  # an unmapped value is left out
    ]
    assert len(hits) == 3  # the raw hits, for a cursor
    assert problems == ["hit 1: id is an object, expected a string or a number"]


def test_groonga_arrays_under_a_header_row_map_by_column_name() -> None:
    answer = [
        [0, 1700000000.0, 0.001],
        [
            [
                [2],
                [["_key", "ShortText"], ["title", "ShortText"], ["_score", "Int32"]],
                ["rb-1", "Disk full runbook", 3],
                ["rb-2", "Lag runbook", 1],
            ]
        ],
    ]
    mapping = ResponseMapping(
        id="_key", hits="[1][0][2:]", columns="[1][0][1][*][0]", title="title", score="_score"
    )
    rows, _, problems = mapping.rows(answer)
    assert rows == [
        {"id": "rb-1", "title": "Disk full runbook", "engine_score": 3},
        {"id": "rb-2", "title": "Lag runbook", "engine_score": 1},
    ]
    assert problems == []


def test_chroma_parallel_columns_zip_into_rows_with_distances() -> None:
    answer = {
        "ids": [["p1", "p2"]],
        "documents": [["Kafka broker disk", "TLS expiry"]],
        "distances": [[0.12, 0.4]],
        "metadatas": [[{"year": 2025}, None]],
    }
    mapping = ResponseMapping(
        id="ids[0]",
        text="documents[0]",
        score="distances[0]",
        metadata="metadatas[0]",
        score_key="distance",
    )
    rows, _, _ = mapping.rows(answer)
    assert rows == [
        {"id": "p1", "text": "Kafka broker disk", "distance": 0.12, "metadata": {"year": 2025}},
        {"id": "p2", "text": "TLS expiry", "distance": 0.4},
    ]


@pytest.mark.parametrize(
    "answer", [{"hits": {"hits": {"total": 3}}}, {"hits": 5}, [], "x", {"other": []}]
)
def test_an_answer_of_the_wrong_shape_names_the_path(answer: object) -> None:
    with pytest.raises(ShapeError, match=r"response.hits 'hits.hits' gave .*expected a list"):
        ResponseMapping(id="_id", hits="hits.hits").rows(answer)


def test_a_non_finite_or_text_score_drops_the_hit() -> None:
    answer = {"h": [{"i": 1, "s": "high"}, {"i": 2, "s": float("nan")}, {"i": 3, "s": True}]}
    rows, _, problems = ResponseMapping(id="i", hits="h", score="s").rows(answer)
    assert rows == [] and len(problems) == 3


def test_a_bad_expression_or_a_reserved_field_name_is_refused() -> None:
    with pytest.raises(MappingError, match=r"response.hits: invalid JMESPath 'hits\[\['"):
        ResponseMapping(id="_id", hits="hits[[")
    with pytest.raises(MappingError, match="'score' is a row key the mapping writes"):
        ResponseMapping(id="_id", hits="h", fields={"score": "x"})


# The dotted fast path against the JMESPath compliance suite's identifier and
# sub-expression cases (jmespath.test compliance/basic.json, identifiers.json).
COMPLIANCE = [
    ({"foo": {"bar": {"baz": "correct"}}}, "foo.bar.baz", "correct"),
    ({"foo": {"bar": {"baz": "correct"}}}, "foo.bar", {"baz": "correct"}),
    ({"foo": {"bar": {"baz": "correct"}}}, "foo.bar.baz.bad", None),
    ({"foo": {"bar": {"baz": "correct"}}}, "foo.bad", None),
    ({"foo": {"bar": ["one", "two"]}}, "foo.bar.baz", None),
    ({"foo": "bar"}, "foo.bar", None),
    ({"foo": None}, "foo", None),
    ({"foo": [0, 1]}, "foo", [0, 1]),
    ({"foo": {"bar": 1}}, "bad", None),
    ({"_": 1, "__": 2, "_a_": 3}, "_a_", 3),
    ({"A": 1, "a": 2}, "A", 1),
    ([{"foo": 1}], "foo", None),
    ("a string", "foo", None),
    (None, "foo", None),
    ({"true": 1}, "true", 1),
]


@pytest.mark.parametrize(("data", "expression", "expected"), COMPLIANCE)
def test_the_fast_path_answers_the_compliance_cases(
    data: object, expression: str, expected: object
) -> None:
    assert compile_path(expression)(data) == expected
    assert jmespath.search(expression, data) == expected


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["a", "b", "_c"]), inner, max_size=3)
    ),
    max_leaves=12,
)


@given(json_values, st.lists(st.sampled_from(["a", "b", "_c"]), min_size=1, max_size=4))
def test_the_fast_path_equals_jmespath_on_any_value(value: object, keys: list[str]) -> None:
    expression = ".".join(keys)
    assert compile_path(expression)(value) == jmespath.search(expression, value)
