"""The request template: placeholders are whole values, filled as JSON values or
URL-encoded parameters, never spliced into text."""

from __future__ import annotations

import pytest

from nautilus_ranking.sources.http.template import RequestTemplate, TemplateError

INJECTIONS = ['"}, "size": 10000, "x": {"', "&size=10000", "x&size=10000#", "{{size}}"]


def es_template() -> RequestTemplate:
    return RequestTemplate(
        body={
            "query": {"multi_match": {"query": "{{query}}", "fields": ["title"]}},
            "size": "{{size}}",
            "from": "{{offset}}",
        },
        params={"q": "{{query}}", "per_page": "{{size}}", "fixed": "yes"},
    )


@pytest.mark.parametrize("text", INJECTIONS)
def test_a_hostile_query_is_only_ever_the_text_searched_for(text: str) -> None:
    body, params = es_template().render({"query": text, "size": 3, "offset": 0})
    plain_body, plain_params = es_template().render({"query": "disk", "size": 3, "offset": 0})
    assert body["query"]["multi_match"]["query"] == text
    assert body["size"] == 3  # the query did not reach it
    plain_body["query"]["multi_match"]["query"] = text
    assert body == plain_body  # nothing else differs
    assert params == [("q", text), ("per_page", "3"), ("fixed", "yes")]
    assert [p for p in params if p[0] != "q"] == [p for p in plain_params if p[0] != "q"]


def test_a_placeholder_without_a_value_drops_its_key_or_list_item() -> None:
    template = RequestTemplate(
        body={"search_after": "{{search_after}}", "v": ["{{vector}}", 1], "size": "{{size}}"},
        params={"page": "{{page}}"},
    )
    assert template.render({"size": 2}) == ({"v": [1], "size": 2}, [])
    body, params = template.render({"size": 2, "search_after": [1.5, "k"], "page": 2})
    assert body["search_after"] == [1.5, "k"] and params == [("page", "2")]


def test_a_list_parameter_repeats_and_values_keep_their_type() -> None:
    body, params = RequestTemplate(body={"v": "{{vector}}"}, params={"v": "{{vector}}"}).render(
        {"vector": [0.5, 1.0]}
    )
    assert body == {"v": [0.5, 1.0]}
    assert params == [("v", "0.5"), ("v", "1.0")]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"q": "title:{{query}}"}, "a placeholder stands for a whole value"),
        ({"q": "{{querry}}"}, "unknown placeholder {{querry}} (valid: {{query}}"),
        ({"{{query}}": 1}, "a key cannot be a placeholder"),
        ({"a": [{"b": "x {{size}}"}]}, "body.a[0].b"),
    ],
)
def test_a_spliced_or_unknown_placeholder_is_refused(body: object, message: str) -> None:
    with pytest.raises(TemplateError, match=None) as caught:
        RequestTemplate(body=body, params={})
    assert message in str(caught.value)


def test_uses_names_every_placeholder() -> None:
    assert es_template().uses == {"query", "size", "offset"}
