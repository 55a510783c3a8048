"""Names a package offers but loads on first use, so importing it stays cheap."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_getattr(
    module: str, homes: Mapping[str, str], namespace: dict[str, Any]
) -> Callable[[str], Any]:
    """A module's ``__getattr__``: each name of ``homes`` is imported from the module
    given there on first use and kept in ``namespace`` (the module's globals), so the
    next look-up is a plain module attribute; any other name is an ``AttributeError``."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        namespace[name] = value
        return value

    return __getattr__
