"""The request template: a JSON body and query parameters whose placeholders are filled
per request.

A placeholder is a whole string ``"{{name}}"`` standing for one JSON value (in the body)
or one URL parameter's value (in ``params``). It is replaced by a value, never spliced
into text, so a query such as ``"}, "size": 10000`` is only ever the text searched
for: the body is serialised by ``json`` and the parameters are URL-encoded by the client.
A placeholder with no value in a request (``{{search_after}}`` on the first page,
``{{vector}}`` with no query vector) drops its key, or its list item.

A placeholder inside a longer string (``"title:{{query}}"``) is refused when the sources
file is read: it could only be filled by splicing text. The URL, its path and the headers
take no placeholder at all: a request never changes where a call goes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from nautilus_ranking.errors import NautilusError

#: Every placeholder and what it stands for (docs/sources.md lists the same).
PLACEHOLDERS: dict[str, str] = {
    "query": "the query text (a string)",
    "size": "the number of rows asked for in this request (an integer)",
    "offset": "how many hits earlier pages returned (an integer, 0 on the first page)",
    "page": "the page number (an integer; paging.first_page on the first page)",
    "search_after": "the last hit's cursor value (paging by search_after; absent on page 1)",
    "vector": "the query embedded by the source's embedder (a list of floats)",
}
_WHOLE = re.compile(r"^\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}$")
_ANY = re.compile(r"\{\{.*?\}\}", re.S)
#: A value a request leaves out (the key or list item is dropped).
_ABSENT = object()


class TemplateError(NautilusError, ValueError):
    """A template that names an unknown placeholder or splices one into text."""


def placeholder_of(value: object) -> str | None:
    """The placeholder ``value`` is (``"{{query}}"`` → ``query``), None for a literal; a
    :class:`TemplateError` for an unknown name or a placeholder inside a longer string."""
    if not isinstance(value, str) or "{{" not in value:
        return None
    match = _WHOLE.match(value)
    if match is None:
        raise TemplateError(
            f"{value[:60]!r}: a placeholder stands for a whole value, never part of a "
            f'string (write "{{{{query}}}}" as the whole value; valid: '
            f"{', '.join('{{' + n + '}}' for n in PLACEHOLDERS)})"
        )
    name = match.group(1)
    if name not in PLACEHOLDERS:
        raise TemplateError(
            f"unknown placeholder {{{{{name}}}}} (valid: "
            f"{', '.join('{{' + n + '}}' for n in PLACEHOLDERS)})"
        )
    return name


def placeholders_in(value: Any, where: str = "body") -> set[str]:
    """Every placeholder a template uses (checking each, :func:`placeholder_of`); keys
    are literal (a placeholder as a key is refused)."""
    found: set[str] = set()
    if isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(key, str) and _ANY.search(key):
                raise TemplateError(f"{where}: a key cannot be a placeholder ({key[:60]!r})")
            found |= placeholders_in(item, f"{where}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found |= placeholders_in(item, f"{where}[{i}]")
    else:
        try:
            name = placeholder_of(value)
        except TemplateError as exc:
            raise TemplateError(f"{where}: {exc}") from None
        if name is not None:
            found.add(name)
    return found


Values = Mapping[str, Any]


def _compile(value: Any) -> Callable[[Values], Any]:
    """A function from the request's values to the filled template (built once)."""
    if isinstance(value, Mapping):
        items = [(key, _compile(item)) for key, item in value.items()]

        def fill_mapping(values: Values) -> Any:
            out = {}
            for key, fill in items:
                filled = fill(values)
                if filled is not _ABSENT:
                    out[key] = filled
            return out

        return fill_mapping
    if isinstance(value, list):
        parts = [_compile(item) for item in value]

        def fill_list(values: Values) -> Any:
            return [f for f in (fill(values) for fill in parts) if f is not _ABSENT]

        return fill_list
    name = placeholder_of(value)
    if name is not None:
        return lambda values: values.get(name, _ABSENT)
    return lambda values: value


@dataclass(frozen=True)
class RequestTemplate:
    """A body (any JSON value, or None for no body) and parameters, each compiled once."""

    body: Any
    params: Mapping[str, Any]

    def __post_init__(self) -> None:
        placeholders_in(self.body, "body")
        placeholders_in(dict(self.params), "params")
        for name, value in self.params.items():
            if isinstance(value, Mapping):
                raise TemplateError(f"params.{name}: a parameter is a value or a list, not a map")
        object.__setattr__(self, "_body", None if self.body is None else _compile(self.body))
        object.__setattr__(self, "_params", _compile(dict(self.params)))

    @property
    def uses(self) -> set[str]:
        """The placeholders this template fills."""
        return placeholders_in(self.body, "body") | placeholders_in(dict(self.params), "params")

    def render(self, values: Values) -> tuple[Any, list[tuple[str, str]]]:
        """(the JSON body or None, the URL parameters as encoded-later pairs)."""
        fill_body: Callable[[Values], Any] | None = self.__dict__["_body"]
        body = None if fill_body is None else fill_body(values)
        params: list[tuple[str, str]] = []
        for name, value in self.__dict__["_params"](values).items():
            for item in value if isinstance(value, list) else [value]:
                params.append((name, _param_text(item)))
        return body, params


def _param_text(value: Any) -> str:
    """A parameter's value as text (the client URL-encodes it): a bool as JSON spells it,
    a list of numbers (a vector) comma-separated."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)
