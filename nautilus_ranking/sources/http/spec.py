"""The ``http`` type in the sources file: where to call, what to send, how to read.

```yaml
- id: kb
  type: http
  url: https://search.internal/kb/select      # http(s); no placeholder: fixed per source
  method: GET                                 # GET | POST (default: POST with a body)
  headers: {X-Tenant: ops}                    # values may be ${VAR}; every value is masked
  auth: {type: bearer, token: "${KB_TOKEN}"}  # basic | bearer | api_key
  params: {q: "{{query}}", rows: "{{size}}", start: "{{offset}}"}
  response: {hits: "response.docs", id: id, text: body, title: title, score: score}
  paging: {by: offset, page_size: 50}
```

Every check — URL, placeholders, path expressions, paging against the template — runs
when the file is read or the source is built (``nautilus-ranking config --strict``),
without calling the engine. Secrets (header values, ``auth``, a URL's password and
credential parameters) are never echoed in a message.
"""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from nautilus_ranking.sources.base import Source
from nautilus_ranking.sources.http.client import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_DEPTH,
    MAX_MAX_BYTES,
)
from nautilus_ranking.sources.http.mapping import (
    DISTANCE,
    ENGINE_SCORE,
    MappingError,
    compile_path,
)
from nautilus_ranking.sources.http.paging import NEEDS
from nautilus_ranking.sources.http.secrets import mask_url
from nautilus_ranking.sources.http.template import TemplateError, placeholders_in
from nautilus_ranking.sources.schema import (
    MAX_LIMIT,
    BuildContext,
    SourceSpec,
    register_source_type,
)

_HEADER_NAME = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
#: Headers the client sets itself (a sources file setting them would confuse the call).
_CLIENT_HEADERS = frozenset(
    {"host", "content-length", "transfer-encoding", "connection", "accept-encoding"}
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AuthSpec(_Strict):
    """Credentials, usually ``${VAR}`` (read at start-up, like a DSN)."""

    type: Literal["basic", "bearer", "api_key"]
    username: str | None = None
    password: SecretStr | None = None
    token: SecretStr | None = Field(default=None, description="bearer: the token; api_key: the key")
    header: str = Field(default="Authorization", description="api_key: the header that carries it")
    scheme: str | None = Field(
        default=None, description="api_key: a word before the key ('ApiKey' for Elasticsearch)"
    )

    def headers(self, where: str) -> dict[str, str]:
        if self.type == "basic":
            if self.username is None or self.password is None:
                raise ValueError(f"{where}: auth type basic needs username and password")
            pair = f"{self.username}:{self.password.get_secret_value()}".encode()
            return {"Authorization": "Basic " + base64.b64encode(pair).decode("ascii")}
        if self.token is None or not self.token.get_secret_value():
            raise ValueError(f"{where}: auth type {self.type} needs a non-empty token")
        token = self.token.get_secret_value()
        if self.type == "bearer":
            return {"Authorization": f"Bearer {token}"}
        return {self.header: f"{self.scheme} {token}" if self.scheme else token}


class ResponseSpec(_Strict):
    """Where the hits are and each row's fields, as JMESPath expressions."""

    hits: str | None = Field(
        default=None, description="the list of hits (unset: parallel columns, each path a list)"
    )
    columns: str | None = Field(
        default=None, description="the column names when each hit is an array under a header row"
    )
    id: str = Field(description="each hit's id (a string or a number)")
    text: str | None = None
    title: str | None = None
    score: str | None = None
    metadata: str | None = None
    fields: dict[str, str] = Field(default_factory=dict, max_length=64)

    @field_validator("hits", "columns", "id", "text", "title", "score", "metadata")
    @classmethod
    def _path(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                compile_path(value)
            except MappingError as exc:
                raise ValueError(str(exc).removeprefix("path: ")) from None
        return value

    @field_validator("fields")
    @classmethod
    def _paths(cls, value: dict[str, str]) -> dict[str, str]:
        for name, path in value.items():
            try:
                compile_path(path, name)
            except MappingError as exc:
                raise ValueError(str(exc)) from None
        return value


class PagingSpec(_Strict):
    by: Literal["none", "offset", "page", "search_after"] = "none"
    page_size: int | None = Field(default=None, ge=1, le=MAX_LIMIT)
    max_pages: int = Field(default=10, ge=1, le=100)
    first_page: int = Field(default=1, ge=0, le=1)
    after: str | None = Field(
        default=None, description="search_after: a hit's cursor path (default sort)"
    )

    @field_validator("after")
    @classmethod
    def _after(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                compile_path(value, "after")
            except MappingError as exc:
                raise ValueError(str(exc)) from None
        return value


def _check_url(value: str | None) -> str | None:
    if value is None:
        return None
    if not re.match(r"^https?://[^/\s?#]+", value) or any(c.isspace() for c in value):
        raise ValueError(f"not an http(s) URL: {mask_url(value)[:80]!r}")
    if "{{" in value:
        raise ValueError(
            "a URL takes no placeholder: a request never changes where a call goes "
            "(put {{query}} in params or body)"
        )
    return value


class HttpFields(SourceSpec):
    """The options of the ``http`` type, each optional here: the presets fill what the
    user leaves out (``presets.py``); ``http`` itself requires ``url`` and ``response``."""

    url: str | None = None
    method: Literal["GET", "POST"] | None = None
    headers: dict[str, Any] = Field(default_factory=dict)
    auth: AuthSpec | None = None
    body: Any = Field(
        default=None, description="the JSON body template (placeholders: docs/sources.md)"
    )
    params: dict[str, Any] = Field(default_factory=dict, description="query-parameter template")
    response: ResponseSpec | None = None
    score_order: Literal["desc", "asc"] = Field(
        default="desc", description="asc: the score is a distance (smaller is better)"
    )
    paging: PagingSpec = Field(default_factory=lambda: PagingSpec())
    limit: int | None = Field(
        default=None, ge=1, le=MAX_LIMIT, description="at most this many rows"
    )
    retries: int = Field(default=2, ge=0, le=5, description="on 429, 502, 503 and 504 only")
    max_bytes: int = Field(default=DEFAULT_MAX_BYTES, ge=1024, le=MAX_MAX_BYTES)
    max_depth: int = Field(default=DEFAULT_MAX_DEPTH, ge=4, le=512)
    follow_redirects: bool = False
    verify: bool = Field(default=True, description="verify the server's TLS certificate")
    ca_file: str | None = Field(default=None, description="a PEM file of CAs to verify against")
    pool_size: int = Field(default=8, ge=1, le=100, description="kept-alive connections")
    health_url: str | None = Field(
        default=None, description="GET for readiness instead of a search"
    )
    embedder: Literal["hashing", "onnx"] | None = Field(
        default=None,
        description="{{vector}}: the embedder of the engine's vectors (default: the broker's)",
    )
    dim: int | None = Field(
        default=None, ge=16, le=4096, description="{{vector}}: the engine's vector size (required)"
    )

    @field_validator("url", "health_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        return _check_url(value)

    @field_validator("headers", mode="before")
    @classmethod
    def _headers(cls, value: Any) -> dict[str, str]:
        if not isinstance(value, dict):
            raise ValueError("expected a mapping of header names to values")
        for name, item in value.items():
            if not isinstance(name, str) or not _HEADER_NAME.match(name):
                raise ValueError(f"invalid header name {str(name)[:40]!r}")
            if name.lower() in _CLIENT_HEADERS:
                raise ValueError(f"header {name!r} is set by the client, not the sources file")
            if not isinstance(item, (str, int, float)) or isinstance(item, bool):
                raise ValueError(f"header {name!r}: the value must be a string")
            if "{{" in str(item):
                raise ValueError(f"header {name!r} takes no placeholder (only ${{VAR}})")
            if any(c in str(item) for c in "\r\n\0"):
                raise ValueError(f"header {name!r}: the value has a line break")
        return {name: str(item) for name, item in value.items()}

    @field_validator("body")
    @classmethod
    def _body(cls, value: Any) -> Any:
        try:
            placeholders_in(value, "body")
        except TemplateError as exc:
            raise ValueError(str(exc)) from None
        return value

    @field_validator("params")
    @classmethod
    def _params(cls, value: dict[str, Any]) -> dict[str, Any]:
        try:
            placeholders_in(value, "params")
        except TemplateError as exc:
            raise ValueError(str(exc)) from None
        for name, item in value.items():
            if isinstance(item, dict):
                raise ValueError(f"params.{name}: a parameter is a value or a list, not a map")
        return value

    def shown_options(self) -> dict[str, str]:
        """What ``nautilus-ranking config`` lists beside the id and type (masked)."""
        return {"url": mask_url(self.url or "")}


@register_source_type
class HttpSpec(HttpFields):
    """Any HTTP/JSON search API."""

    type: Literal["http"]
    url: str
    response: ResponseSpec

    @model_validator(mode="after")
    def _time_is_returned(self) -> HttpSpec:
        r = self.response
        returned = {"id", ENGINE_SCORE, DISTANCE, *r.fields}
        returned |= {name for name in ("text", "title", "metadata") if getattr(r, name)}
        for option in ("time_field", "document_key"):
            path = getattr(self, option)
            if path is not None and path.split(".")[0] not in returned:
                raise ValueError(
                    f"{option} {path!r} is not a field this source's rows have: add it to "
                    "stored (a preset), or map it with response.fields (a name and a "
                    "JMESPath over the hit), then name it"
                )
        return self

    @field_validator("ca_file")
    @classmethod
    def _ca(cls, value: str | None) -> str | None:
        if value is not None and not Path(value).expanduser().is_file():
            raise ValueError(f"CA file {value!r} does not exist")
        return value

    def build(self, ctx: BuildContext) -> Source:
        """The source, every cross-option check done first (nothing is called)."""
        from nautilus_ranking.sources.http.client import Endpoint, require_http
        from nautilus_ranking.sources.http.mapping import ResponseMapping
        from nautilus_ranking.sources.http.paging import Paging
        from nautilus_ranking.sources.http.source import HttpSource
        from nautilus_ranking.sources.http.template import RequestTemplate

        require_http()
        template = RequestTemplate(self.body, self.params)
        uses = template.uses
        need = NEEDS.get(self.paging.by)
        if need is not None and need not in uses:
            raise ValueError(
                f"paging.by {self.paging.by} needs {{{{{need}}}}} in body or params "
                "(else every page would be the first)"
            )
        method = self.method or ("POST" if self.body is not None else "GET")
        if method == "GET" and self.body is not None:
            raise ValueError("method GET sends no body: put the template in params, or use POST")
        headers = dict(self.headers)
        if self.auth is not None:
            headers.update(self.auth.headers("auth"))
        embedder = self._embedder(ctx) if "vector" in uses else None
        r = self.response
        try:
            mapping = ResponseMapping(
                id=r.id,
                hits=r.hits,
                columns=r.columns,
                text=r.text,
                title=r.title,
                score=r.score,
                metadata=r.metadata,
                fields=r.fields,
                score_key=DISTANCE if self.score_order == "asc" else ENGINE_SCORE,
            )
            paging = Paging(
                by=self.paging.by,
                page_size=self.paging.page_size,
                max_pages=self.paging.max_pages,
                first_page=self.paging.first_page,
                after=self.paging.after,
            )
        except MappingError as exc:
            raise ValueError(str(exc)) from None
        endpoint = Endpoint(
            source_id=self.id,
            method=method,
            url=self.url,
            headers=headers,
            verify=self.verify,
            ca_file=self.ca_file,
            follow_redirects=self.follow_redirects,
            retries=self.retries,
            max_bytes=self.max_bytes,
            max_depth=self.max_depth,
            pool_size=self.pool_size,
        )
        return HttpSource(
            self.id,
            endpoint,
            template,
            mapping,
            paging,
            limit=self.limit,
            timeout_s=self.timeout_s,
            embedder=embedder,
            health_url=self.health_url,
        )

    def _embedder(self, ctx: BuildContext) -> Any:
        """The embedder of ``{{vector}}``: the declared one (else the broker's), whose
        vectors must be ``dim`` long — a mismatch is refused here, not answered wrong."""
        from nautilus_ranking.embedders import embedder_from_name

        if self.dim is None:
            raise ValueError("{{vector}} needs dim: the size of the engine's vectors")
        name = self.embedder or ("hashing" if ctx.embedder_name == "noop" else ctx.embedder_name)
        embedder = embedder_from_name(
            name, self.dim, ctx.cache_size, data_dir=ctx.data_dir, disk_cache_mb=ctx.disk_cache_mb
        )
        size = getattr(embedder, "dim", self.dim)
        if size != self.dim:
            raise ValueError(
                f"{{{{vector}}}}: embedder {name!r} makes vectors of {size} dimensions, the "
                f"engine's are dim={self.dim} (set embedder and dim to what indexed the engine)"
            )
        return embedder


def describe(exc: ValidationError) -> str:
    """A validation error's problems, never echoing a value (it may be a secret)."""
    parts = []
    for error in exc.errors():
        loc = ".".join(str(p) for p in error["loc"])
        message = str(error["msg"]).removeprefix("Value error, ")
        parts.append(f"{loc}: {message}" if loc else message)
    return "; ".join(parts)
