"""The response mapping: where the hits are in an engine's answer, and each row's id,
text, title, fields, score and metadata, by JMESPath expression (a language with a
specification and a compliance suite; ``jmespath`` on PyPI, pure Python).

Three shapes of answer are mapped:

- **a list of hits** (Elasticsearch, Typesense): ``hits`` finds the list, and the other
  paths are read from each hit;
- **arrays under a header row** (Groonga): ``columns`` finds the column names and each
  hit (an array) is read as the object ``{name: value}`` before the paths apply;
- **parallel columns** (Chroma's ``ids``, ``documents``, ``distances``): with no
  ``hits``, each path is read from the whole answer and gives a list, and row *i* takes
  item *i* of each (JMESPath alone has no ``zip``).

A plain dotted path (``_source.title``, ``document.id``) is read by a few dictionary
look-ups instead of the JMESPath interpreter: the same answer as ``jmespath.search`` for
every input (the tests check it against the language's compliance cases), a fraction of
its cost on the hot path. An expression is bounded when the file is read (at most
:data:`MAX_PATH_CHARS` characters, nested at most :data:`MAX_PATH_DEPTH` deep): the
interpreter recurses on its tree, and a tree deep enough would fail every search.

A hit that cannot be mapped (its id not a string or a finite number, its score not a
number, a path that raises on it) is dropped alone and counted: a page's
:class:`MappedPage` says how many, and the first few problems, never one line per hit.
It also names each mapped path that was null in every hit (a path that does not exist
in the engine's documents: a wrong mapping, otherwise silent).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from nautilus_ranking.errors import NautilusError

Getter = Callable[[Any], Any]

#: A JMESPath unquoted identifier (the fast path takes a dotted chain of them).
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: The row key of the engine's score (never ``score``: that is the ranking's own), and of
#: a score that runs ascending.
ENGINE_SCORE, DISTANCE = "engine_score", "distance"
#: Integers a double holds exactly (a JavaScript client reads JSON numbers as doubles):
#: an engine score past them is carried as its digits, a string.
MAX_EXACT = 2**53
#: Row keys the mapping writes, and ``score``; a named field may not take one of them.
RESERVED = frozenset({"id", "text", "title", "score", ENGINE_SCORE, DISTANCE, "metadata"})
#: The longest path expression read (a mapping's paths are a few dozen characters).
MAX_PATH_CHARS = 1_000
#: The deepest an expression's tree may nest (the interpreter recurses on it).
MAX_PATH_DEPTH = 32
#: The problems a page keeps word for word (the others are counted).
PROBLEMS_KEPT = 5


class MappingError(NautilusError, ValueError):
    """A path expression that does not parse, or a mapping that cannot be built."""


class ShapeError(NautilusError, ValueError):
    """An answer that is not of the shape the mapping expects (the source fails)."""


def require_jmespath() -> Any:
    try:
        import jmespath
    except ImportError as exc:
        raise ImportError(
            "HTTP sources need the http extra: pip install 'nautilus-ranking[http]' "
            f"({exc.name or 'jmespath'} is not installed)"
        ) from exc
    return jmespath


def _dotted(expression: str) -> list[str] | None:
    parts = expression.split(".")
    return parts if all(_IDENTIFIER.match(p) for p in parts) else None


def _depth(tree: Any) -> int:
    """How deep a parsed JMESPath tree nests (without recursing: it may be deep)."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > MAX_PATH_DEPTH:
            break
        children = node.get("children", ()) if isinstance(node, dict) else ()
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict))
    return deepest


def compile_path(expression: str, option: str = "path") -> Getter:
    """A function reading ``expression`` from a JSON value; a :class:`MappingError` names
    the option and the parser's complaint, or the bound it is past."""
    if not isinstance(expression, str) or not expression.strip():
        raise MappingError(f"{option}: empty path expression")
    if len(expression) > MAX_PATH_CHARS:
        raise MappingError(
            f"{option}: JMESPath longer than {MAX_PATH_CHARS:,} characters "
            f"({len(expression):,}): a mapping's path is a few dozen"
        )
    jmespath = require_jmespath()
    too_deep = MappingError(
        f"{option}: JMESPath nested deeper than {MAX_PATH_DEPTH} "
        f"({expression[:40]!r}…): a mapping's path is a few levels deep"
    )
    try:
        compiled = jmespath.compile(expression)
    except RecursionError:
        raise too_deep from None
    except jmespath.exceptions.JMESPathError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise MappingError(f"{option}: invalid JMESPath {expression!r}: {first}") from None
    if _depth(compiled.parsed) > MAX_PATH_DEPTH:
        raise too_deep
    parts = _dotted(expression)
    if parts is None:
        return compiled.search  # type: ignore[no-any-return]
    if len(parts) == 1:
        (key,) = parts

        def one(value: Any) -> Any:
            return value.get(key) if isinstance(value, dict) else None

        return one

    def chain(value: Any) -> Any:
        for key in parts:
            if not isinstance(value, dict):
                return None
            value = value.get(key)
        return value

    return chain


@dataclass(frozen=True)
class ResponseMapping:
    """The compiled mapping of one source (built once, from the sources file)."""

    id: str
    hits: str | None = None
    columns: str | None = None
    text: str | None = None
    title: str | None = None
    score: str | None = None
    metadata: str | None = None
    fields: Mapping[str, str] = field(default_factory=dict)
    score_key: str = ENGINE_SCORE  # DISTANCE when the score runs ascending

    def __post_init__(self) -> None:
        if self.columns is not None and self.hits is None:
            raise MappingError("response.columns: names a header row of the hits; set hits too")
        for name in self.fields:
            if name in RESERVED:
                raise MappingError(
                    f"response.fields: {name!r} is a row key the mapping writes itself "
                    f"(reserved: {', '.join(sorted(RESERVED))}); name the field otherwise"
                )
        getters: list[tuple[str, Getter]] = [("id", compile_path(self.id, "response.id"))]
        for key, path in (("title", self.title), ("text", self.text)):
            if path is not None:
                getters.append((key, compile_path(path, f"response.{key}")))
        for name, path in self.fields.items():
            getters.append((name, compile_path(path, f"response.fields.{name}")))
        if self.score is not None:
            getters.append((self.score_key, compile_path(self.score, "response.score")))
        if self.metadata is not None:
            getters.append(("metadata", compile_path(self.metadata, "response.metadata")))
        object.__setattr__(self, "_getters", tuple(getters))
        object.__setattr__(
            self, "_hits", None if self.hits is None else compile_path(self.hits, "response.hits")
        )
        object.__setattr__(
            self,
            "_columns",
            None if self.columns is None else compile_path(self.columns, "response.columns"),
        )

    def rows(self, answer: Any) -> tuple[list[dict[str, Any]], list[Any], list[str]]:
        """(the mapped rows, every hit of the answer as read — dropped ones too —, the
        first problems of the dropped hits): :meth:`page` without a size."""
        page = self.page(answer)
        return page.rows, page.hits, page.problems

    def page(self, answer: Any, size: int | None = None) -> MappedPage:
        """One answer mapped: its first ``size`` hits (an engine that returns more than
        it was asked for gets no more of our time), each row or dropped alone. A
        :class:`ShapeError` for an answer the mapping cannot read at all."""
        getters: tuple[tuple[str, Getter], ...] = self.__dict__["_getters"]
        hits_of: Getter | None = self.__dict__["_hits"]
        if hits_of is None:
            hits = self._parallel(answer, getters)
            getters = tuple((key, _item(key)) for key, _ in getters)
        else:
            hits = hits_of(answer)
            if not isinstance(hits, list):
                raise ShapeError(
                    f"response.hits {self.hits!r} gave {_kind(hits)}, expected a list of hits"
                )
        extra = 0
        if size is not None and len(hits) > size:
            extra, hits = len(hits) - size, hits[:size]
        columns_of: Getter | None = self.__dict__["_columns"]
        if columns_of is not None:
            hits = self._objects(answer, hits, columns_of)
        rows: list[dict[str, Any]] = []
        mapped: list[dict[str, Any]] = []
        problems: list[str] = []
        dropped = 0
        score_key = self.score_key
        for i, hit in enumerate(hits):
            row = {}
            try:
                for key, get in getters:
                    value = get(hit)
                    if value is not None:  # an unmapped value is left out of the row
                        row[key] = value
                problem = _check(row, score_key)
            except Exception as exc:  # a path that raises on this hit: the hit goes alone
                problem = f"{_option(key, score_key)} raised {type(exc).__name__}: {exc}"[:200]
            mapped.append(row)
            if problem is None:
                score = row.get(score_key)
                if type(score) is int and not -MAX_EXACT <= score <= MAX_EXACT:
                    row[score_key] = str(score)  # exact for every client (a 401-digit one too)
                rows.append(row)
            else:
                dropped += 1
                if len(problems) < PROBLEMS_KEPT:
                    problems.append(f"hit {i}: {problem}")
        unmapped = [key for key, _ in getters if not any(key in row for row in mapped)]
        first = hits[0] if hits else None
        return MappedPage(
            rows=rows,
            hits=hits,
            dropped=dropped,
            problems=problems,
            extra=extra,
            unmapped=[(_option(key, score_key), self._path_of(key)) for key in unmapped],
            first_keys=sorted(map(str, first)) if isinstance(first, dict) else None,
        )

    def _path_of(self, key: str) -> str:
        if key in ("id", "title", "text", "metadata"):
            return str(getattr(self, key))
        if key == self.score_key:
            return str(self.score)
        return self.fields[key]

    def _objects(self, answer: Any, hits: list[Any], columns_of: Getter) -> list[Any]:
        names = columns_of(answer)
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ShapeError(
                f"response.columns {self.columns!r} gave {_kind(names)}, expected a list "
                "of column names"
            )
        return [
            dict(zip(names, hit, strict=False)) if isinstance(hit, list) else hit for hit in hits
        ]

    def _parallel(self, answer: Any, getters: tuple[tuple[str, Getter], ...]) -> list[Any]:
        """Parallel columns as hits: ``{key: column[i]}`` for each row ``i``."""
        columns = {}
        for key, get in getters:
            column = get(answer)
            if column is None and key != "id":
                continue
            if not isinstance(column, list):
                raise ShapeError(
                    f"response.{key if key != self.score_key else 'score'} gave "
                    f"{_kind(column)}, expected a list (parallel columns: no response.hits)"
                )
            columns[key] = column
        return [
            {key: column[i] if i < len(column) else None for key, column in columns.items()}
            for i in range(len(columns["id"]))
        ]


@dataclass
class MappedPage:
    """One answer, mapped."""

    rows: list[dict[str, Any]]
    hits: list[Any]  # every hit read (the dropped ones too), for the paging
    dropped: int = 0  # hits that could not be mapped
    problems: list[str] = field(default_factory=list)  # the first few, word for word
    extra: int = 0  # hits past the size asked, not read
    unmapped: list[tuple[str, str]] = field(default_factory=list)  # (option, path) null in all
    first_keys: list[str] | None = None  # the first hit's own keys (an object's)


def _item(key: str) -> Getter:
    def get(hit: Any) -> Any:
        return hit.get(key)

    return get


def _option(key: str, score_key: str) -> str:
    """The sources file's option that maps row key ``key``."""
    if key in ("id", "title", "text", "metadata"):
        return f"response.{key}"
    return "response.score" if key == score_key else f"response.fields.{key}"


def _check(row: dict[str, Any], score_key: str) -> str | None:
    """Why a mapped row is unusable (None: it is fine)."""
    ident = row.get("id")
    score = row.get(score_key)
    if type(ident) is str and (score is None or (type(score) is float and math.isfinite(score))):
        return None  # the usual row, decided at once
    if (
        ident is None
        or isinstance(ident, bool)
        or not isinstance(ident, (str, int, float))
        or (isinstance(ident, float) and not math.isfinite(ident))
    ):
        return f"id is {_kind(ident)}, expected a string or a number"
    if score is not None and (
        isinstance(score, bool)
        or not isinstance(score, (int, float))
        or (isinstance(score, float) and not math.isfinite(score))
    ):
        return f"{score_key} is {_kind(score)}, expected a finite number"
    return None


def _kind(value: Any) -> str:
    if value is None:
        return "null (no such path)"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return f"{type(value).__name__} {str(value)[:40]!r}"
