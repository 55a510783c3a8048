"""Presets: ``type: elasticsearch`` (OpenSearch too) and ``type: typesense``.

Each is the ``http`` source with its defaults filled in from a few options of its own
(``index`` and ``fields``; ``collection`` and ``query_by``): :meth:`to_http` returns the
plain ``http`` spec, and the source is built from it — there is no second code path. Any
``http`` option the user sets (``body``, ``params``, ``response``, ``paging`` …)
replaces that default whole. To change one part of a default instead, ``body_extra``
and ``params_extra`` are merged into it by :func:`merged`: objects merge key by key, at
any depth; anything else (a list, a string) replaces what was there; ``null`` deletes
the key. docs/sources.md shows each default, and ``to_http`` is what the tests compare
it with.

The Typesense defaults are for the queries agents send, natural-language questions
("how do I cancel my Plus subscription"), not search-as-you-type: Typesense's own
defaults require every word and drop words only until one hit matches, so such a
question found one unrelated document. The preset asks Typesense to drop words
(``drop_tokens_threshold``) and try typos (``typo_tokens_threshold``) until the page
asked for would fill, and to match every word whole (``prefix: false``); documents
with more of the words still rank first (``text_match``). Measured in
docs/benchmarks.md (``benchmarks/sources/typesense_relevance.py``); they suit Typesense 0.24.1,
the oldest version they were run against, and later.
"""

from __future__ import annotations

import re
from typing import Any, Literal
from urllib.parse import quote

from pydantic import Field, SecretStr, ValidationError, field_validator

from nautilus_ranking.sources.base import Source
from nautilus_ranking.sources.http.mapping import RESERVED
from nautilus_ranking.sources.http.spec import (
    AuthSpec,
    HttpFields,
    HttpSpec,
    PagingSpec,
    ResponseSpec,
    describe,
)
from nautilus_ranking.sources.schema import BuildContext, register_source_type

_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-*,+]*$")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: Typesense's largest page (per_page).
TYPESENSE_MAX_PAGE = 250


def _name(value: str, what: str) -> str:
    if not _NAME.match(value) or ".." in value:
        raise ValueError(f"invalid {what} {value!r} (letters, digits, '_', '-', '.', '*', ',')")
    return value


def _names(values: list[str], what: str) -> list[str]:
    """``values``, each checked by :func:`_name`."""
    for value in values:
        _name(value, what)
    return values


def _path(*parts: str) -> str:
    """A JMESPath of object keys, each quoted when it is not a plain identifier."""
    return ".".join(p if _IDENTIFIER.match(p) else '"' + p.replace('"', '\\"') + '"' for p in parts)


def _document_fields(names: list[str], under: str) -> dict[str, Any]:
    """The response mapping of the searched fields: ``title`` and ``text`` as the row's
    title and text, any other as a field of its own name."""
    mapped: dict[str, Any] = {"fields": {}}
    for name in names:
        path = _path(under, *name.split("."))
        if name in ("title", "text"):
            mapped[name] = path
        else:
            mapped["fields"][f"field_{name}" if name in RESERVED else name] = path
    return mapped


def merged(base: Any, extra: Any) -> Any:
    """``extra`` merged into ``base``: objects key by key at any depth, a ``None`` value
    deleting its key; anything else in ``extra`` replaces what was there (a list whole).
    Neither is changed."""
    if not isinstance(base, dict) or not isinstance(extra, dict):
        return extra
    out = dict(base)
    for key, value in extra.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merged(out.get(key), value)
    return out


class PresetSpec(HttpFields):
    """What a preset shares: the defaults it computes, replaced by what the user set,
    and the extras merged into them."""

    body_extra: dict[str, Any] | None = Field(
        default=None,
        description="merged into the body: objects deeply, lists replaced, null deletes a key",
    )
    params_extra: dict[str, Any] | None = Field(
        default=None,
        description="merged into params: a value replaces, null deletes a default parameter",
    )
    stored: list[str] = Field(
        default_factory=list,
        max_length=64,
        description="document fields returned but not searched (a time_field, a document_key)",
    )

    @field_validator("stored")
    @classmethod
    def _stored(cls, value: list[str]) -> list[str]:
        return _names(value, "stored field")

    def defaults(self) -> dict[str, Any]:
        raise NotImplementedError

    def to_http(self) -> HttpSpec:
        """The ``http`` spec this preset stands for (a user's option replaces a default;
        an extra is merged into it)."""
        given = {
            name: getattr(self, name)
            for name in self.model_fields_set
            if name in HttpFields.model_fields and name not in ("type", "url")
        }  # a preset's url is the server's base URL, which its defaults build on
        document = {**self.defaults(), **given, "id": self.id, "type": "http"}
        for option, extra in (("body", self.body_extra), ("params", self.params_extra)):
            if extra is not None:
                document[option] = merged(document.get(option) or {}, extra)
        for key in ("timeout_s", "ranked"):
            document.setdefault(key, getattr(self, key))
        try:
            return HttpSpec.model_validate(document)
        except ValidationError as exc:
            raise ValueError(f"the {self.type} preset's options: {describe(exc)}") from None

    def build(self, ctx: BuildContext) -> Source:
        return self.to_http().build(ctx)


@register_source_type
class ElasticsearchSpec(PresetSpec):
    """Elasticsearch or OpenSearch: ``multi_match`` over ``fields`` of ``index``."""

    type: Literal["elasticsearch"]
    url: str | None = Field(default="http://localhost:9200", description="the cluster's base URL")
    index: str = Field(description="the index (or a comma-separated list, or a pattern)")
    fields: list[str] = Field(min_length=1, max_length=64, description="the fields searched")
    tiebreaker: str | None = Field(
        default=None, description="a unique sortable field: page by search_after on it"
    )
    api_key: SecretStr | None = Field(default=None, description="Authorization: ApiKey …")
    username: str | None = None
    password: SecretStr | None = None

    @field_validator("index")
    @classmethod
    def _index(cls, value: str) -> str:
        return _name(value, "index")

    @field_validator("fields")
    @classmethod
    def _fields(cls, value: list[str]) -> list[str]:
        for field in value:
            _name(field.split("^")[0], "field")
        return value

    def defaults(self) -> dict[str, Any]:
        names = [f.split("^")[0] for f in self.fields]
        query = {"multi_match": {"query": "{{query}}", "fields": list(self.fields)}}
        if self.tiebreaker is None:
            body: dict[str, Any] = {"query": query, "size": "{{size}}", "from": "{{offset}}"}
            paging = PagingSpec(by="offset")
        else:
            body = {
                "query": query,
                "size": "{{size}}",
                "sort": [{"_score": "desc"}, {self.tiebreaker: "asc"}],
                "search_after": "{{search_after}}",
            }
            paging = PagingSpec(by="search_after", after="sort")
        auth = None
        if self.api_key is not None:
            auth = AuthSpec(type="api_key", token=self.api_key, scheme="ApiKey")
        elif self.username is not None and self.password is not None:
            auth = AuthSpec(type="basic", username=self.username, password=self.password)
        return {
            "url": f"{str(self.url).rstrip('/')}/{quote(self.index, safe=',*')}/_search",
            "method": "POST",
            "body": body,
            "response": ResponseSpec(
                hits="hits.hits",
                id="_id",
                score="_score",
                **_document_fields(names + self.stored, "_source"),
            ),
            "paging": paging,
            "auth": auth,
        }


@register_source_type
class TypesenseSpec(PresetSpec):
    """Typesense: a search of ``collection`` over ``query_by``, in ``text_match`` order."""

    type: Literal["typesense"]
    url: str | None = Field(default="http://localhost:8108", description="the server's base URL")
    collection: str
    query_by: list[str] = Field(min_length=1, max_length=64, description="the fields searched")
    api_key: SecretStr | None = Field(default=None, description="sent as X-TYPESENSE-API-KEY")

    @field_validator("collection")
    @classmethod
    def _collection(cls, value: str) -> str:
        return _name(value, "collection")

    @field_validator("query_by")
    @classmethod
    def _query_by(cls, value: list[str]) -> list[str]:
        return _names(value, "query_by field")

    def defaults(self) -> dict[str, Any]:
        base = str(self.url).rstrip("/")
        auth = (
            None
            if self.api_key is None
            else AuthSpec(type="api_key", token=self.api_key, header="X-TYPESENSE-API-KEY")
        )
        return {
            "url": f"{base}/collections/{quote(self.collection, safe='')}/documents/search",
            "method": "GET",
            "params": {
                "q": "{{query}}",
                "query_by": ",".join(self.query_by),
                "per_page": "{{size}}",
                "page": "{{page}}",
                # a question, not search-as-you-type (see the module's docstring)
                "drop_tokens_threshold": "{{size}}",
                "typo_tokens_threshold": "{{size}}",
                "prefix": "false",
            },
            "response": ResponseSpec(
                hits="hits",
                id="document.id",
                score="text_match",
                **_document_fields(self.query_by + self.stored, "document"),
            ),
            "paging": PagingSpec(by="page", page_size=TYPESENSE_MAX_PAGE),
            "auth": auth,
            "health_url": f"{base}/health",
        }
