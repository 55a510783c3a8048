"""The source protocol: what the broker, the readiness probe and the service call on a source.

A source has an ``id``, a ``timeout_s``, ``ranked`` (whether its row order is
relevance: True, False, or None for "not said"), ``async prepare()`` (build or
refresh its data; awaited before the timed search, under its own deadline),
``async search(query, context, limit) -> list[dict]`` and ``close()``. The broker
wraps every call in a timeout and turns any failure into an ``ErrorRecord``, so a
source may simply raise.

:class:`SourceBase` supplies the defaults (not ranked-or-not, nothing to prepare,
nothing to close); :class:`ForwardingSource` wraps a source and forwards what it
does not change. A caller's own object may still leave ``ranked``/``prepare`` out
(it is someone else's code): :func:`declared_order` and :func:`preparer` read it
the way the protocol's defaults say.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol, runtime_checkable

Row = dict[str, Any]


@runtime_checkable
class Source(Protocol):
    id: str
    timeout_s: float
    ranked: bool | None

    async def prepare(self) -> None: ...

    async def search(self, query: str, context: Mapping[str, Any], limit: int) -> list[Row]: ...

    def close(self) -> None: ...


class SourceBase:
    """The protocol's defaults, for a source to inherit."""

    #: Whether this source's row order carries relevance (None: it does not say).
    ranked: bool | None = None
    #: The row key (or path) of a row's time, and of the document its revisions share:
    #: the sources file's ``time_field`` and ``document_key`` (None: not mapped).
    time_field: str | None = None
    document_key: str | None = None
    #: What ``sources probe`` says when a query finds nothing here: what this kind of
    #: source matches a query against (:func:`no_hits_hint`).
    no_hits: str = "no row holds a word of the query; try words its rows hold"

    async def prepare(self) -> None:
        """Nothing to build."""

    def close(self) -> None:
        """Nothing to release."""


class ForwardingSource(SourceBase):
    """A source around another: the same id, deadline, order and build step; a subclass
    changes what it needs (``search``, typically) and forwards the rest."""

    def __init__(self, inner: Source) -> None:
        self.inner = inner
        self.id = inner.id
        self.timeout_s = inner.timeout_s
        self.ranked = declared_order(inner)
        self.time_field = mapped_path(inner, "time_field")
        self.document_key = mapped_path(inner, "document_key")

    async def prepare(self) -> None:
        prepare = preparer(self.inner)
        if prepare is not None:
            await prepare()

    async def search(self, query: str, context: Mapping[str, Any], limit: int) -> list[Row]:
        return await self.inner.search(query, context, limit)

    def close(self) -> None:
        self.inner.close()


def declared_order(source: object) -> bool | None:
    """The source's word on its own order: its ``ranked`` when that is a bool, else None."""
    ranked = getattr(source, "ranked", None)
    return ranked if isinstance(ranked, bool) else None


def mapped_path(source: object, option: str) -> str | None:
    """The source's ``time_field`` or ``document_key`` when it names one, else None."""
    path = getattr(source, option, None)
    return path if isinstance(path, str) and path else None


def preparer(source: object) -> Callable[[], Awaitable[None]] | None:
    """The source's ``prepare``, or None when it has none (nothing to build)."""
    prepare: Callable[[], Awaitable[None]] | None = getattr(source, "prepare", None)
    return prepare


def prober(source: object) -> Callable[[], Awaitable[None]] | None:
    """The source's own readiness check (``probe()``, an HTTP source's ``health_url``), or
    None when it has none (readiness then searches it)."""
    probe: Callable[[], Awaitable[None]] | None = getattr(source, "probe", None)
    return probe


def no_hits_hint(source: object) -> str:
    """The source's ``no_hits`` (a caller's own source: :class:`SourceBase`'s)."""
    hint = getattr(source, "no_hits", SourceBase.no_hits)
    return hint if isinstance(hint, str) else SourceBase.no_hits


def with_id(row: Row, id_field: str) -> Row:
    """``row`` answered with its id where every caller reads one, ``row["id"]``: a source
    whose ``id_field`` is another field (``key``) gives that field's value as ``id`` too
    (the field itself stays). A row without the field is answered as it is."""
    if id_field == "id" or id_field not in row:
        return row
    return {**row, "id": row[id_field]}


def id_of(source: object) -> object:
    """The source's ``id`` as it is (the broker fails only this source when it is not a
    string), None when it has none."""
    return getattr(source, "id", None)


def timeout_of(source: object, default: float = 5.0) -> float:
    """The source's ``timeout_s`` (``default`` when it has none)."""
    timeout: float = getattr(source, "timeout_s", default)
    return timeout


def type_of(source: object) -> str:
    """The source's type as its sources file names it (``source_type``, set when it was
    built from one; a ForwardingSource answers for the source it wraps), else its
    class's name: what a trace calls it."""
    while True:
        declared = getattr(source, "source_type", None)
        if isinstance(declared, str):
            return declared
        inner = getattr(source, "inner", None)
        if inner is None or inner is source:
            return type(source).__name__
        source = inner


def embeds_query(source: object) -> bool:
    """Whether a source's own retrieval embeds the query (a vector table, pgvector): another
    embedder would change which rows it returns, not only how they are ranked."""
    inner = getattr(source, "inner", source)
    return callable(getattr(getattr(inner, "embedder", None), "embed", None))


def stores_vectors(source: object) -> bool:
    """Whether a source queries vectors a load made and kept (pgvector): another embedder
    makes every request fail until its table is reloaded (``load --replace``)."""
    inner = getattr(source, "inner", source)
    return embeds_query(source) and bool(getattr(inner, "stores_vectors", False))
