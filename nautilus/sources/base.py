"""The source protocol: what the broker calls on every source.

A source is anything with an ``id``, a ``timeout_s`` and
``async search(query, context, limit) -> list[dict]``. The broker wraps every
call in a timeout and turns any failure into an ``ErrorRecord``, so a source
may simply raise.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

Row = dict[str, Any]


@runtime_checkable
class Source(Protocol):
    id: str
    timeout_s: float

    async def search(self, query: str, context: Mapping[str, Any], limit: int) -> list[Row]: ...

    def close(self) -> None: ...

