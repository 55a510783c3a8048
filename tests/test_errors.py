"""Every exception nautilus defines is a ``NautilusError``, and still what it was."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import nautilus_ranking
from nautilus_ranking import NautilusError


def _own_exceptions() -> list[type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(nautilus_ranking.__path__, "nautilus_ranking."):
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an optional extra this environment lacks
            continue
        for name, obj in vars(module).items():
            if (
                inspect.isclass(obj)
                and issubclass(obj, BaseException)
                and obj.__module__ == info.name
                and not name.startswith("_")
            ):
                found[f"{info.name}.{name}"] = obj
    return [found[k] for k in sorted(found)]


def test_every_public_exception_of_the_package_is_a_nautilus_error() -> None:
    errors = _own_exceptions()
    assert len(errors) >= 18
    assert [e.__qualname__ for e in errors if not issubclass(e, NautilusError)] == []


@pytest.mark.parametrize(
    ("module", "name", "builtin"),
    [
        ("nautilus_ranking.request.pages", "PageError", ValueError),
        ("nautilus_ranking.sources.seeds", "SeedError", ValueError),
        ("nautilus_ranking.sources.sqlite.base", "NoSpaceError", OSError),
        ("nautilus_ranking.sources.postgres.base", "PostgresUnavailableError", ConnectionError),
        ("nautilus_ranking.embedders.base", "EmbeddingUnavailableError", RuntimeError),
        ("nautilus_ranking.retrievers.source", "ServiceError", RuntimeError),
    ],
)
def test_each_keeps_the_builtin_base_callers_catch(
    module: str, name: str, builtin: type[Exception]
) -> None:
    try:
        error = getattr(importlib.import_module(module), name)
    except ImportError:
        pytest.skip(f"{module} needs an optional extra")
    assert issubclass(error, NautilusError) and issubclass(error, builtin)


def test_nautilus_error_is_exported() -> None:
    assert "NautilusError" in nautilus_ranking.__all__


def test_every_exception_nautilus_raises_is_importable_from_nautilus_errors() -> None:
    """Every NautilusError subclass defined in the package is listed in nautilus_ranking.errors
    (found by reading the source, so a new one that is not listed fails this)."""
    import re
    from pathlib import Path

    import nautilus_ranking.errors as errors

    package = Path(errors.__file__).parent
    defined = {
        match
        for path in package.rglob("*.py")
        for match in re.findall(
            r"^class (\w+)\((?:[^)]*Error[^)]*)\):", path.read_text(encoding="utf-8"), re.MULTILINE
        )
    }
    defined = {name for name in defined if not name.startswith("_")} - {"NautilusError"}
    assert defined == set(errors._RAISED_BY)
    for name in sorted(defined):  # (the dev install has every extra)
        cls = getattr(errors, name)
        assert issubclass(cls, errors.NautilusError) and cls.__name__ == name
    assert "SeedError" in errors.__all__
