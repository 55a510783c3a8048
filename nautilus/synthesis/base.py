"""The synthesizer protocol: per-source results in, ``{source_id: rows}`` out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from nautilus.records import AdapterResult


@runtime_checkable
class Synthesizer(Protocol):
    def merge(self, results: list[AdapterResult],
              context: Mapping[str, Any] | None = None) -> dict[str, list[dict[str, Any]]]: ...
