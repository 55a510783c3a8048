"""The sources file as a typed schema: one pydantic model per source type.

A source type is a :class:`SourceSpec` subclass whose ``type`` is a ``Literal``
naming it, registered with :func:`register_source_type`; its ``build(ctx)``
returns the source object. Loading (:func:`load_sources`) reads the file
(bounded in size, strict UTF-8), parses it with ``yaml.safe_load``, expands
``${VAR}`` / ``${VAR:-default}`` (bounded, so a YAML alias bomb is refused
instead of expanded), and validates every entry against its type's model:
unknown keys are rejected with a did-you-mean, and every message names the
file, the source and the option. :func:`sources_json_schema` publishes the
schema for editors (``nautilus-ranking config --schema``).
"""

from __future__ import annotations

import difflib
import importlib
import math
import re
from abc import abstractmethod
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Union, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from nautilus_ranking.sources.base import Source
from nautilus_ranking.sources.mapped_fields import checked_path
from nautilus_ranking.sources.sql import quote_identifier
from nautilus_ranking.sources.yaml_file import SourceConfigError as SourceConfigError
from nautilus_ranking.sources.yaml_file import expand_variables as expand_variables
from nautilus_ranking.sources.yaml_file import read_yaml

DEFAULT_LIMIT = 30
MAX_LIMIT = 10_000
DEFAULT_TIMEOUT_S = 5.0
MAX_TIMEOUT_S = 3600.0
MAX_FILE_NAME_BYTES = 200  # a built file's name, so its temporary names fit in 255
_SOURCE_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")
_TOP_LEVEL = ("limit", "sources")
#: Options whose value is never echoed in a message (a DSN carries a password; so may a
#: URL, a header or an HTTP source's credentials).
SECRET_OPTIONS = frozenset({"dsn", "url", "health_url", "headers", "password", "token", "api_key"})


@dataclass(frozen=True)
class BuildContext:
    """What a spec needs to build its source."""

    base_dir: Path  # the sources file's folder (seeds resolve against it)
    data_dir: Path  # NAUTILUS_DATA_DIR (built SQLite files live inside it)
    embedder_name: str
    cache_size: int = 10_000
    relative_dir: Path | None = None  # where relative paths go (None: data_dir itself)
    #: NAUTILUS_EMBEDDER_DISK_CACHE_MB: a model's query vectors kept on disk (0: not kept)
    disk_cache_mb: int = 0


class SourceSpec(BaseModel):
    """Options every source type has. Subclasses narrow ``type`` to a ``Literal``."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(
        min_length=1, max_length=100, description="unique; what NAUTILUS_SOURCE_BOOSTS names"
    )
    type: str
    timeout_s: float = Field(
        DEFAULT_TIMEOUT_S,
        gt=0,
        le=MAX_TIMEOUT_S,
        allow_inf_nan=False,
        description="seconds before the broker gives up on this source",
    )
    ranked: bool | None = Field(
        None,
        description="whether the source's row order carries relevance (unset: the type's default)",
    )
    time_field: str | None = Field(
        None,
        min_length=1,
        max_length=256,
        description="where a row's time is: a column or row key, a dotted path into a JSON "
        "column, or a JMESPath over the row (http extra); read only with "
        "NAUTILUS_RANKING_RECENCY or NAUTILUS_RANKING_SUPERSEDE",
    )
    document_key: str | None = Field(
        None,
        min_length=1,
        max_length=256,
        description="where a row's document is (its revisions share it; as time_field); "
        "read only with NAUTILUS_RANKING_SUPERSEDE (default: NAUTILUS_RANKING_DEDUP_KEY, "
        "else id)",
    )

    @field_validator("id")
    @classmethod
    def _plain_id(cls, value: str) -> str:
        if not _SOURCE_ID.match(value):
            raise ValueError(f"invalid source id {value!r} (letters, digits, '_', '-', '.')")
        return value

    @field_validator("time_field", "document_key")
    @classmethod
    def _a_path(cls, value: str | None, info: ValidationInfo) -> str | None:
        return checked_path(str(info.field_name), value)

    @abstractmethod
    def build(self, ctx: BuildContext) -> Source:
        """The source object (checks seeds and paths; data is built on first use)."""


class SqliteSpec(SourceSpec):
    """Options of every SQLite type: the database file nautilus builds, and the seed field
    that is each row's id."""

    path: str = Field(description="database file, relative to NAUTILUS_DATA_DIR")
    id_field: str = Field(
        "id",
        min_length=1,
        max_length=128,
        description="seed field that is the row's id (answered as 'id')",
    )

    @field_validator("id_field")
    @classmethod
    def _id_field(cls, value: str) -> str:
        return column_list([value])[0]


class SeededSqliteSpec(SqliteSpec):
    """A SQLite type built from one JSONL seed."""

    seed: str = Field(description="JSONL seed, relative to the sources file")


class SourceTypes(MutableMapping[str, type[SourceSpec]]):
    """Every known source type by name. A type may be *declared* by the module that
    registers it (:meth:`declare`): that module is imported the first time the type is
    looked up, and iterating imports every declared one. So a file of SQLite sources
    never loads the PostgreSQL types, yet error messages list every type."""

    def __init__(self) -> None:
        self._entries: dict[str, type[SourceSpec] | str] = {}  # a class, or its module

    def declare(self, name: str, module: str) -> None:
        """``name`` is registered by importing ``module`` (unless it is known already)."""
        self._entries.setdefault(name, module)

    def __getitem__(self, name: str) -> type[SourceSpec]:
        entry = self._entries[name]
        if isinstance(entry, str):
            importlib.import_module(entry)  # registers it (register_source_type)
            entry = self._entries[name]
            if isinstance(entry, str):
                raise TypeError(f"module {entry} did not register source type {name!r}")
        return entry

    def __setitem__(self, name: str, cls: type[SourceSpec]) -> None:
        self._entries[name] = cls

    def __delitem__(self, name: str) -> None:
        del self._entries[name]

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        names = list(self._entries)
        for name in names:
            self[name]  # import the declared ones, so every name iterated is a class
        return iter(names)

    def __len__(self) -> int:
        return len(self._entries)

    def keys_known(self) -> list[str]:
        """Every type's name, declared or registered, without importing any."""
        return list(self._entries)


#: Every known source type by name; :func:`register_source_type` adds to it.
SOURCE_TYPES = SourceTypes()


def register_source_type(cls: type[SourceSpec]) -> type[SourceSpec]:
    """Class decorator: make ``cls`` (its ``type`` a one-value ``Literal``) a known type."""
    names = get_args(cls.model_fields["type"].annotation)
    if len(names) != 1 or not isinstance(names[0], str):
        raise TypeError(f"{cls.__name__}.type must be a Literal of one name")
    SOURCE_TYPES[names[0]] = cls
    return cls


@dataclass(frozen=True)
class SourcesFile:
    """A validated sources file."""

    path: Path
    limit: int
    specs: tuple[SourceSpec, ...]


class _Document(BaseModel):
    model_config = ConfigDict(extra="forbid")
    limit: int = Field(DEFAULT_LIMIT, ge=1, le=MAX_LIMIT, description="rows asked of each source")


def load_sources(path: Path) -> SourcesFile:
    """Read, expand and validate a sources file; a :class:`SourceConfigError` names
    the file, the entry and the option for anything wrong."""
    document = read_yaml(path)
    where = str(path)
    if not isinstance(document, dict):
        raise SourceConfigError(f"{where}: expected a mapping with a 'sources' list")
    unknown = [k for k in document if k not in _TOP_LEVEL]
    if unknown:
        raise SourceConfigError(f"{where}: {_unknown_key(str(unknown[0]), _TOP_LEVEL)}")
    if not isinstance(document.get("sources"), list):
        raise SourceConfigError(f"{where}: expected a mapping with a 'sources' list")
    document = expand_variables(document, where)
    try:
        limit = _Document.model_validate({"limit": document.get("limit", DEFAULT_LIMIT)}).limit
    except ValidationError as exc:
        raise SourceConfigError(f"{where}: {_describe(exc, _Document)}") from None
    specs: list[SourceSpec] = []
    seen: dict[str, str] = {}
    for i, entry in enumerate(document["sources"]):
        spec = _validate_entry(entry, f"{where}: sources[{i}]")
        if spec.id.lower() in seen:
            raise SourceConfigError(
                f"{where}: duplicate source id {spec.id!r} "
                f"(ids are case-insensitive: {seen[spec.id.lower()]!r})"
            )
        seen[spec.id.lower()] = spec.id
        specs.append(spec)
    return SourcesFile(path, limit, tuple(specs))


def _validate_entry(entry: object, where: str) -> SourceSpec:
    valid = ", ".join(SOURCE_TYPES.keys_known())  # without importing every type
    if not isinstance(entry, dict):
        raise SourceConfigError(f"{where}: expected a mapping with 'id' and 'type'")
    named = f"{entry['id']}, " if isinstance(entry.get("id"), str) else ""
    label = f"{where} ({entry['id']})" if named else where
    kind = entry.get("type")
    if kind is None:
        raise SourceConfigError(f"{label}: missing 'type' (valid: {valid})")
    cls = SOURCE_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        hint = _did_you_mean(str(kind), SOURCE_TYPES.keys_known())
        raise SourceConfigError(f"{label}: unknown type {kind!r}{hint} (valid: {valid})")
    try:
        return cls.model_validate(entry)
    except ValidationError as exc:
        raise SourceConfigError(f"{where} ({named}{kind}): {_describe(exc, cls)}") from None


def _describe(exc: ValidationError, model: type[BaseModel]) -> str:
    """Every problem of a validation error as ``option: what is wrong``."""
    messages = []
    for error in exc.errors():
        loc = ".".join(str(part) for part in error["loc"])
        if error["type"] == "extra_forbidden":
            messages.append(_unknown_key(str(error["loc"][-1]), list(model.model_fields)))
        elif error["type"] == "missing":
            messages.append(f"missing option {loc!r}")
        elif not loc:  # a check of the whole source: its message names the option and value
            messages.append(str(error["msg"]).removeprefix("Value error, "))
        else:
            message = str(error["msg"]).removeprefix("Value error, ")
            secret = bool(error["loc"]) and str(error["loc"][-1]) in SECRET_OPTIONS
            got = "" if secret else f", got {_shown(error.get('input'))}"  # never echo a DSN
            messages.append(f"{loc}: {message}{got}")
    return "; ".join(messages)


def _unknown_key(key: str, valid: list[str] | tuple[str, ...]) -> str:
    return f"unknown option {key!r}{_did_you_mean(key, list(valid))} (valid: {', '.join(valid)})"


def _did_you_mean(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f" — did you mean {close[0]!r}?" if close else ""


def _shown(value: object) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    text = repr(value)
    return text if len(text) <= 60 else text[:60] + "…"


def sources_json_schema() -> dict[str, Any]:
    """JSON Schema of the sources file (every registered type), for editors."""
    types = tuple(SOURCE_TYPES.values())
    entry: Any = (
        Annotated[Union[types], Field(discriminator="type")]  # noqa: UP007
        if len(types) > 1
        else types[0]
    )

    class SourcesFileSchema(_Document):
        sources: list[entry]

    schema = TypeAdapter(SourcesFileSchema).json_schema()
    schema["title"] = "nautilus-ranking sources file"
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema


def resolve_data_path(ctx: BuildContext, value: str, option: str = "path") -> Path:
    """A built file's path: relative paths live under ``ctx.relative_dir`` (NAUTILUS_DATA_DIR
    or this sources file's folder inside it); none may leave it."""
    given = Path(value).expanduser()
    data = (
        (ctx.data_dir if given.is_absolute() else ctx.relative_dir or ctx.data_dir)
        .expanduser()
        .resolve()
    )
    full = (given if given.is_absolute() else data / given).resolve()
    if full == data or not full.is_relative_to(data):
        raise ValueError(
            f"{option} {value!r} is outside NAUTILUS_DATA_DIR ({data}); "
            "built files live inside it (use a relative path such as "
            "'shop/faqs.db')"
        )
    if full.is_dir():
        raise ValueError(
            f"{option} {value!r} is a directory ({full}); it names the "
            "database file, such as 'shop/faqs.db'"
        )
    if len(full.name.encode("utf-8", "surrogateescape")) > MAX_FILE_NAME_BYTES:
        raise ValueError(
            f"{option} {value!r}: file name longer than {MAX_FILE_NAME_BYTES} "
            "bytes (the system allows 255, and nautilus' temporary build files "
            "add up to 55)"
        )
    return full


def resolve_seed_path(ctx: BuildContext, value: str) -> Path:
    """A seed's path: relative paths are beside the sources file."""
    given = Path(value).expanduser()
    return given if given.is_absolute() else ctx.base_dir / given


def named_id_field(spec: SqliteSpec) -> list[str]:
    """``[id_field]`` when the sources file names one (then a seed must have it), else []."""
    return [spec.id_field] if "id_field" in spec.model_fields_set else []


def column_list(value: list[str]) -> list[str]:
    """Validate column names from the sources file: plain names, each once."""
    for name in value:
        try:
            quote_identifier(name)
        except ValueError:
            raise ValueError(f"invalid column name {name!r} (letters, digits and '_')") from None
    if len(set(value)) != len(value):
        raise ValueError("a column is named twice")
    return value


ColumnList = Annotated[list[str], Field(min_length=1, max_length=64), AfterValidator(column_list)]
