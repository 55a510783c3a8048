"""Reading a sources file: bounded YAML, then ``${VAR}`` expansion.

The file is configuration, so it is read bounded (size, nesting, duplicate keys, and
aliases that would expand past :data:`MAX_VALUES` values or
:data:`MAX_EXPANDED_CHARS` characters) and strict UTF-8; every
message names the file and the line. :mod:`nautilus_ranking.sources.schema` validates
what this returns.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from nautilus_ranking.errors import NautilusError
from nautilus_ranking.sources.seeds import FileRefusedError, open_seed

MAX_FILE_BYTES = 1 << 20  # a sources file is configuration, not data


MAX_VALUES = 100_000  # values after expanding YAML aliases


#: Characters of the strings after expanding aliases and ``${VAR:-default}``: an alias
#: shares its string, but each expanded ``${…}`` is a fresh copy (nine aliases of a 1 MB
#: default are 9 MB), so counting values alone let a 100 KB file grow to gigabytes.
#: Eight times the largest file leaves room for variables' values.
MAX_EXPANDED_CHARS = 8 * MAX_FILE_BYTES


MAX_DEPTH = 64  # nesting of mappings and lists


#: A variable's name, read after ``${``; what follows it is scanned by hand
#: (:func:`_substitute`), since a pattern's ``[^}]*`` would rescan the rest of the text
#: from every ``${`` that is never closed (quadratic).
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class SourceConfigError(NautilusError):
    """The sources file is missing, malformed, or names something that does not exist."""


def read_yaml(path: Path) -> Any:
    try:  # as a seed is opened: a regular file only (a FIFO would wait for a writer)
        with open_seed(path, "sources config", "a sources file is a regular YAML file") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
    except FileRefusedError as exc:
        reason = str(exc)
        raise SourceConfigError(
            reason if reason.startswith("cannot read") else f"cannot read {reason}"
        ) from None
    except OSError as exc:
        raise SourceConfigError(
            f"cannot read sources config {path}: {exc.strerror or exc}"
        ) from None
    if len(raw) > MAX_FILE_BYTES:
        raise SourceConfigError(
            f"{path}: larger than {MAX_FILE_BYTES} bytes; "
            "a sources file lists sources, the data lives in seeds"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise SourceConfigError(
            f"{path}:{line}: not valid UTF-8 (byte 0x{raw[exc.start]:02x})"
        ) from None
    try:
        return yaml.load(text, Loader=_BoundedLoader)
    except _TooDeep as exc:
        raise SourceConfigError(
            f"{path}:{exc.line}: nested too deeply (more than {MAX_DEPTH} levels)"
        ) from None
    except _DuplicateKey as exc:
        raise SourceConfigError(
            f"{path}:{exc.line}: duplicate key {exc.key!r} (first on "
            f"line {exc.first}); give each option once"
        ) from None
    except RecursionError:
        raise SourceConfigError(f"{path}: nested too deeply") from None
    except yaml.YAMLError as exc:
        raise SourceConfigError(f"{path}: not valid YAML: {exc}") from None


class _TooDeep(yaml.YAMLError):
    def __init__(self, line: int) -> None:
        super().__init__(f"nested more than {MAX_DEPTH} levels deep (line {line})")
        self.line = line


class _DuplicateKey(yaml.YAMLError):
    def __init__(self, key: str, line: int, first: int) -> None:
        super().__init__(key)
        self.key, self.line, self.first = key, line, first


class DepthBoundedLoader(yaml.SafeLoader):
    """``yaml.safe_load`` that refuses a document nested deeper than :data:`MAX_DEPTH`
    (a ``yaml.YAMLError`` naming the line) before Python's recursion limit is reached."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._nesting = getattr(self, "_nesting", 0) + 1
        try:
            if self._nesting > MAX_DEPTH:
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                raise _TooDeep(mark.line + 1)
            return super().compose_node(parent, index)
        finally:
            self._nesting -= 1


class _BoundedLoader(DepthBoundedLoader):
    """:class:`DepthBoundedLoader` that also refuses mappings that give a key twice
    (YAML would silently keep the last value)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> Any:
        seen: dict[tuple[str, str], int] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag.endswith(":merge"):
                continue  # a merge (<<) may be overridden: that is what it is for
            key = (key_node.tag, key_node.value)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise _DuplicateKey(key_node.value, line, seen[key])
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def expand_variables(value: Any, where: str = "") -> Any:
    """``${VAR}`` / ``${VAR:-default}`` in every string of a parsed YAML document.

    The result is a fresh tree; a document whose YAML aliases would expand to
    more than :data:`MAX_VALUES` values (a "billion laughs") or whose strings would
    then hold more than :data:`MAX_EXPANDED_CHARS` characters is refused.
    """
    budget = [MAX_VALUES, MAX_EXPANDED_CHARS]
    return _expand(value, where, budget, 0)


def _expand(value: Any, where: str, budget: list[int], depth: int) -> Any:
    budget[0] -= 1
    if budget[0] < 0:
        raise SourceConfigError(
            f"{where}: more than {MAX_VALUES} values once YAML aliases "
            "are expanded; write the values out instead"
        )
    if depth > MAX_DEPTH:
        raise SourceConfigError(f"{where}: nested more than {MAX_DEPTH} levels deep")
    if isinstance(value, dict):
        return {k: _expand(v, f"{where}.{k}", budget, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v, f"{where}[{i}]", budget, depth + 1) for i, v in enumerate(value)]
    if not isinstance(value, str):
        return value

    def spend(chars: int) -> None:
        budget[1] -= chars
        if budget[1] < 0:
            raise SourceConfigError(
                f"{where}: more than {MAX_EXPANDED_CHARS} characters once YAML aliases and "
                "${VAR:-default} are expanded; write the values out instead"
            )

    def substitute(name: str, default: str | None) -> str:
        found = os.environ.get(name, default)
        if found is None:
            raise SourceConfigError(
                f"{where}: environment variable {name} is not set "
                f"(use ${{{name}:-default}} for a fallback)"
            )
        spend(len(found))  # before it is copied into the string
        return found

    spend(len(value))  # the text as written: every copy counts, an alias's too
    return _substitute(value, substitute)


def _substitute(text: str, substitute: Callable[[str, str | None], str]) -> str:
    """``text`` with each ``${NAME}`` and ``${NAME:-default}`` (the default runs to the
    first ``}``) replaced by ``substitute(name, default)``; anything else kept as written.
    One pass: every character is read a bounded number of times."""
    out: list[str] = []
    at = 0  # copied up to here
    look = 0  # the next ``${`` is at or after here
    while (start := text.find("${", look)) >= 0:
        name = _NAME.match(text, start + 2)
        look = start + 2
        if name is None:
            continue
        after = name.end()
        if text.startswith("}", after):
            end, default = after + 1, None
        elif text.startswith(":-", after):
            close = text.find("}", after + 2)
            if close < 0:  # no '}' anywhere after: no later variable is closed either
                break
            end, default = close + 1, text[after + 2 : close]
        else:
            continue
        out += [text[at:start], substitute(name.group(), default)]
        at = look = end
    out.append(text[at:])
    return "".join(out)
