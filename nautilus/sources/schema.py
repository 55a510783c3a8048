"""The sources file as typed models: one :class:`SourceSpec` subclass per source type.

A minimal version of the shared schema interface: each type's spec validates its
options (unknown keys rejected) and ``build``s its :class:`Source` from a
:class:`BuildContext`. Types register themselves in :data:`SOURCE_TYPES`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pydantic
from pydantic import ConfigDict

from nautilus.sources.base import Source


@dataclass(frozen=True)
class BuildContext:
    """What a spec needs beyond its own options to build its source."""

    base_dir: Path          # the sources file's folder: relative seeds resolve here
    data_dir: Path          # NAUTILUS_DATA_DIR: built databases live here
    embedder_name: str      # NAUTILUS_EMBEDDER
    cache_size: int = 10_000


class SourceSpec(pydantic.BaseModel):
    """Options every source type shares."""

    model_config = ConfigDict(extra="forbid")

    id: str
    type: str
    timeout_s: float = pydantic.Field(default=5.0, gt=0)
    ranked: bool | None = None

    def build(self, ctx: BuildContext) -> Source:
        raise NotImplementedError


SOURCE_TYPES: dict[str, type[SourceSpec]] = {}

SpecT = TypeVar("SpecT", bound=SourceSpec)


def register_source_type(cls: type[SpecT]) -> type[SpecT]:
    """Class decorator: make ``cls`` the model of the type its ``type`` literal names."""
    annotation = cls.model_fields["type"].annotation
    names = getattr(annotation, "__args__", ())
    for name in names:
        SOURCE_TYPES[str(name)] = cls
    return cls
