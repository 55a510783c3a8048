"""The presets are the http spec with defaults filled in: these are the defaults
docs/sources.md shows, and an option the user sets replaces a default whole."""

from __future__ import annotations

import base64
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from nautilus_ranking.sources.factory import SOURCE_TYPES, build_sources
from nautilus_ranking.sources.http.presets import ElasticsearchSpec, TypesenseSpec
from nautilus_ranking.sources.http.spec import HttpSpec


def http_of(spec: Any) -> dict[str, Any]:
    http: HttpSpec = spec.to_http()
    return http.model_dump(exclude_defaults=True, exclude={"id", "type"})


def test_elasticsearch_defaults() -> None:
    spec = ElasticsearchSpec.model_validate(
        {"id": "kb", "type": "elasticsearch", "index": "kb", "fields": ["title^2", "body"]}
    )
    assert http_of(spec) == {
        "url": "http://localhost:9200/kb/_search",
        "method": "POST",
        "body": {
            "query": {"multi_match": {"query": "{{query}}", "fields": ["title^2", "body"]}},
            "size": "{{size}}",
            "from": "{{offset}}",
        },
        "response": {
            "hits": "hits.hits",
            "id": "_id",
            "score": "_score",
            "title": "_source.title",
            "fields": {"body": "_source.body"},
        },
        "paging": {"by": "offset"},
    }


def test_elasticsearch_with_a_tiebreaker_pages_by_search_after() -> None:
    spec = ElasticsearchSpec.model_validate(
        {
            "id": "kb",
            "type": "elasticsearch",
            "index": "kb",
            "fields": ["text"],
            "tiebreaker": "doc_id",
            "url": "https://es:9200/",
        }
    )
    http = http_of(spec)
    assert http["url"] == "https://es:9200/kb/_search"
    assert http["body"] == {
        "query": {"multi_match": {"query": "{{query}}", "fields": ["text"]}},
        "size": "{{size}}",
        "sort": [{"_score": "desc"}, {"doc_id": "asc"}],
        "search_after": "{{search_after}}",
    }
    assert http["paging"] == {"by": "search_after", "after": "sort"}
    assert http["response"]["text"] == "_source.text"


def test_typesense_defaults() -> None:
    spec = TypesenseSpec.model_validate(
        {"id": "kb", "type": "typesense", "collection": "runbooks", "query_by": ["title", "steps"]}
    )
    assert http_of(spec) == {
        "url": "http://localhost:8108/collections/runbooks/documents/search",
        "method": "GET",
        "params": {
            "q": "{{query}}",
            "query_by": "title,steps",
            "per_page": "{{size}}",
            "page": "{{page}}",
            # a natural-language question: words dropped until a page fills, typos
            # tried until it fills, every word whole (no search-as-you-type prefix)
            "drop_tokens_threshold": "{{size}}",
            "typo_tokens_threshold": "{{size}}",
            "prefix": "false",
        },
        "response": {
            "hits": "hits",
            "id": "document.id",
            "score": "text_match",
            "title": "document.title",
            "fields": {"steps": "document.steps"},
        },
        "paging": {"by": "page", "page_size": 250},
        "health_url": "http://localhost:8108/health",
    }


def test_a_user_option_replaces_the_default_whole() -> None:
    spec = ElasticsearchSpec.model_validate(
        {
            "id": "kb",
            "type": "elasticsearch",
            "index": "kb",
            "fields": ["title"],
            "body": {"query": {"match": {"title": "{{query}}"}}, "size": "{{size}}"},
            "paging": {"by": "none"},
            "response": {"hits": "hits.hits", "id": "_source.key"},
        }
    )
    http = http_of(spec)
    assert http["body"] == {"query": {"match": {"title": "{{query}}"}}, "size": "{{size}}"}
    assert http["response"] == {"hits": "hits.hits", "id": "_source.key"}  # no merge
    assert "paging" not in http  # by: none is the default


def test_credentials_become_headers_and_never_show() -> None:
    es = ElasticsearchSpec.model_validate(
        {
            "id": "kb",
            "type": "elasticsearch",
            "index": "kb",
            "fields": ["t"],
            "api_key": "k3y-value",
        }
    )
    basic = ElasticsearchSpec.model_validate(
        {
            "id": "kb",
            "type": "elasticsearch",
            "index": "kb",
            "fields": ["t"],
            "username": "elastic",
            "password": "pa55word",
        }
    )
    ts = TypesenseSpec.model_validate(
        {
            "id": "kb",
            "type": "typesense",
            "collection": "c",
            "query_by": ["t"],
            "api_key": "ts-key1",
        }
    )
    assert es.to_http().auth.headers("auth") == {"Authorization": "ApiKey k3y-value"}  # type: ignore[union-attr]
    token = base64.b64encode(b"elastic:pa55word").decode()
    assert basic.to_http().auth.headers("auth") == {"Authorization": f"Basic {token}"}  # type: ignore[union-attr]
    assert ts.to_http().auth.headers("auth") == {"X-TYPESENSE-API-KEY": "ts-key1"}  # type: ignore[union-attr]
    for spec in (es, basic, ts):
        assert "k3y-value" not in repr(spec) and "pa55word" not in repr(spec)
        assert "ts-key1" not in repr(spec.to_http())


@pytest.mark.parametrize("index", ["../_cluster", "kb/_delete_by_query", "kb?x=1", ""])
def test_an_index_that_would_change_the_path_is_refused(index: str) -> None:
    with pytest.raises(ValueError, match="invalid index"):
        ElasticsearchSpec.model_validate(
            {"id": "kb", "type": "elasticsearch", "index": index, "fields": ["t"]}
        )


# --- docs/sources.md's examples ---------------------------------------------------------

DOCS = Path(__file__).resolve().parents[3] / "docs" / "sources.md"


def engine_blocks() -> list[str]:
    text = DOCS.read_text(encoding="utf-8")
    section = text[text.index("## Search engines over HTTP") : text.index("## Variables")]
    return re.findall(r"```yaml\n(.*?)```", section, re.S)


def test_every_engine_example_in_the_docs_builds_without_calling_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ES_API_KEY", "es-key-1")
    monkeypatch.setenv("TYPESENSE_API_KEY", "ts-key-1")
    entries = [b for b in engine_blocks() if b.lstrip().startswith("- id:")]
    assert len(entries) == 4  # generic (Groonga), Chroma, elasticsearch, typesense
    path = tmp_path / "nautilus.yaml"
    path.write_text("sources:\n" + "".join(entries), "utf-8")
    sources, _ = build_sources(path, tmp_path / "data", "hashing")
    try:
        assert [s.id for s in sources] == ["kb", "postmortems", "runbooks", "articles"]
    finally:
        for source in sources:
            source.close()


@pytest.mark.parametrize("preset", ["runbooks", "articles"])
def test_the_defaults_the_docs_show_are_the_presets(preset: str) -> None:
    blocks = engine_blocks()
    for i, block in enumerate(blocks):
        if f"- id: {preset}\n" in block:
            example, defaults = block, blocks[i + 1]
    [entry] = yaml.safe_load(example)
    entry = {k: v for k, v in entry.items() if k not in ("api_key",)}  # auth: below
    spec = SOURCE_TYPES[entry["type"]].model_validate(entry)
    shown = yaml.safe_load(defaults)
    shown.pop("auth")
    assert http_of(spec) == {**shown, **({"timeout_s": 2.0} if "timeout_s" in entry else {})}


def test_without_the_extra_the_error_names_it(tmp_path: Path) -> None:
    path = tmp_path / "nautilus.yaml"
    path.write_text(
        "sources:\n  - {id: kb, type: typesense, collection: c, query_by: [t]}\n", "utf-8"
    )
    code = (
        "import sys; sys.modules['jmespath'] = None\n"
        "from pathlib import Path\n"
        "from nautilus_ranking.sources.factory import build_sources\n"
        f"build_sources(Path({str(path)!r}), Path({str(tmp_path)!r}), 'hashing')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert out.stderr.strip().splitlines()[-1] == (
        "ImportError: HTTP sources need the http extra: pip install 'nautilus-ranking[http]' "
        "(jmespath is not installed)"
    )


def test_extra_options_merge_into_a_presets_defaults() -> None:
    spec = TypesenseSpec.model_validate(
        {
            "id": "kb",
            "type": "typesense",
            "collection": "runbooks",
            "query_by": ["title"],
            "params_extra": {"drop_tokens_threshold": "5", "prefix": None, "num_typos": "1"},
        }
    )
    assert http_of(spec)["params"] == {
        "q": "{{query}}",
        "query_by": "title",
        "per_page": "{{size}}",
        "page": "{{page}}",
        "drop_tokens_threshold": "5",  # changed
        "typo_tokens_threshold": "{{size}}",  # kept
        "num_typos": "1",  # added; prefix: null deleted the default
    }


def test_objects_merge_deeply_lists_are_replaced_and_null_deletes() -> None:
    spec = ElasticsearchSpec.model_validate(
        {
            "id": "kb",
            "type": "elasticsearch",
            "index": "kb",
            "fields": ["title^2", "body"],
            "body_extra": {
                "query": {"multi_match": {"fields": ["title"], "fuzziness": "AUTO"}},
                "from": None,
                "track_total_hits": False,
            },
            "paging": {"by": "none"},
        }
    )
    assert http_of(spec)["body"] == {
        "query": {"multi_match": {"query": "{{query}}", "fields": ["title"], "fuzziness": "AUTO"}},
        "size": "{{size}}",
        "track_total_hits": False,
    }


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"params_extra": {"q": {"nested": 1}}}, "params.q: a parameter is a value or a list"),
        ({"body_extra": {"size": "{{sise}}"}}, "unknown placeholder"),
        ({"params_extra": ["q"]}, "params_extra"),
    ],
)
def test_a_bad_extra_is_refused_when_the_file_is_read(
    tmp_path: Path, extra: dict[str, Any], message: str
) -> None:
    entry = {"id": "kb", "type": "elasticsearch", "index": "kb", "fields": ["title"], **extra}
    path = tmp_path / "nautilus.yaml"
    path.write_text(yaml.safe_dump({"sources": [entry]}), "utf-8")
    with pytest.raises(Exception, match=re.escape(message)):
        build_sources(path, tmp_path / "data", "hashing")


def test_the_elasticsearch_preset_asks_for_any_word_of_a_question(tmp_path: Path) -> None:
    from http_support import DOCS, built, es_entry, search

    from tools.json_engine import json_engine

    question = "how do I clean up a full disk on the orders database"
    with json_engine(DOCS) as engine, built(tmp_path, es_entry(engine.url)) as [source]:
        rows = search(source, question, 10)
        [sent] = [r["body"] for r in engine.requests]
    assert sent == {  # a disjunctive multi_match: no operator, no minimum_should_match
        "query": {"multi_match": {"query": question, "fields": ["title", "body"]}},
        "size": 10,
        "from": 0,
    }
    assert len(rows) >= 5  # any word matches (a conjunction would find none)


def test_a_stored_field_is_returned_unsearched_and_a_time_field_may_name_it() -> None:
    spec = ElasticsearchSpec.model_validate(
        {
            "id": "kb",
            "type": "elasticsearch",
            "index": "kb",
            "fields": ["title", "body"],
            "stored": ["updated_at"],
            "time_field": "updated_at",
        }
    )
    http = http_of(spec)
    assert http["response"]["fields"] == {
        "body": "_source.body",
        "updated_at": "_source.updated_at",
    }
    assert http["body"]["query"]["multi_match"]["fields"] == ["title", "body"]  # not searched
    assert http["time_field"] == "updated_at"


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        (
            {"type": "typesense", "collection": "kb", "query_by": ["title"], "time_field": "at"},
            "time_field 'at' is not a field this source's rows have",
        ),
        (
            {
                "type": "http",
                "url": "http://127.0.0.1:9/search",
                "response": {"hits": "hits", "id": "id", "fields": {"at": "meta.at"}},
                "document_key": "page",
            },
            "document_key 'page' is not a field this source's rows have",
        ),
    ],
)
def test_a_time_field_the_rows_do_not_have_is_refused_with_the_fix(
    tmp_path: Path, entry: dict[str, Any], said: str
) -> None:
    from nautilus_ranking.sources.schema import SourceConfigError

    path = tmp_path / "nautilus.yaml"
    path.write_text(yaml.safe_dump({"sources": [{"id": "kb", **entry}]}), encoding="utf-8")
    with pytest.raises(SourceConfigError) as refused:
        build_sources(path, tmp_path / "data", "hashing")
    assert said in str(refused.value) and "response.fields" in str(refused.value)
