"""Every exception nautilus defines is a ``NautilusError``, and still what it was."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import nautilus
from nautilus import NautilusError


def _own_exceptions() -> list[type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(nautilus.__path__, "nautilus."):
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an optional extra this environment lacks
            continue
        for name, obj in vars(module).items():
            if (inspect.isclass(obj) and issubclass(obj, BaseException)
                    and obj.__module__ == info.name and not name.startswith("_")):
                found[f"{info.name}.{name}"] = obj
    return [found[k] for k in sorted(found)]


def test_every_public_exception_of_the_package_is_a_nautilus_error() -> None:
    errors = _own_exceptions()
    assert len(errors) >= 18
    assert [e.__qualname__ for e in errors if not issubclass(e, NautilusError)] == []


@pytest.mark.parametrize(("module", "name", "builtin"), [
    ("nautilus.pages", "PageError", ValueError),
    ("nautilus.sources.seeds", "SeedError", ValueError),
    ("nautilus.sources.sqlite.base", "NoSpaceError", OSError),
    ("nautilus.sources.postgres.base", "PostgresUnavailableError", ConnectionError),
    ("nautilus.embedders.base", "EmbeddingUnavailableError", RuntimeError),
    ("nautilus.retrievers.source", "ServiceError", RuntimeError),
])
def test_each_keeps_the_builtin_base_callers_catch(module: str, name: str,
                                                  builtin: type[Exception]) -> None:
    try:
        error = getattr(importlib.import_module(module), name)
    except ImportError:
        pytest.skip(f"{module} needs an optional extra")
    assert issubclass(error, NautilusError) and issubclass(error, builtin)


def test_nautilus_error_is_exported() -> None:
    assert "NautilusError" in nautilus.__all__
