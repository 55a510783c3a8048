"""``NAUTILUS_*`` variables that match no setting: most likely a typo.

Settings are warn-and-skip, so a misspelt variable would otherwise be silently
ignored; each one found in the environment or in ``.env`` is reported as a problem
with the closest known name.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable
from typing import Any

from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

from nautilus_ranking.errors import Problem

DOTENV_UNKNOWN = "__nautilus_dotenv_unknown__"


class DotEnvTypos(PydanticBaseSettingsSource):
    """The ``.env`` source, plus the ``NAUTILUS_*`` names in the file that match no
    setting (handed to the validator under a private key, which it removes)."""

    def __init__(self, inner: PydanticBaseSettingsSource) -> None:
        super().__init__(inner.settings_cls)
        self.inner = inner

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return self.inner.get_field_value(field, field_name)

    def __call__(self) -> dict[str, Any]:
        values = dict(self.inner())
        names = getattr(self.inner, "env_vars", {})
        known = set(self.settings_cls.model_fields)
        unknown = sorted(
            n.upper()
            for n in names
            if n.lower().startswith("nautilus_")
            and n.lower().removeprefix("nautilus_") not in known
        )
        for name in unknown:
            values.pop(name.lower().removeprefix("nautilus_"), None)
        if unknown:
            values[DOTENV_UNKNOWN] = unknown
        return values


def unknown_variables(cls: type[BaseSettings], in_dotenv: Iterable[str] = ()) -> list[Problem]:
    """``NAUTILUS_*`` variables (environment or ``.env``) that match no setting:
    most likely a typo."""
    known = {"NAUTILUS_" + name.upper() for name in cls.model_fields}
    valid = ", ".join(sorted(known))
    found = {
        name.upper(): "(set)"
        for name in os.environ
        if name.upper().startswith("NAUTILUS_") and name.upper() not in known
    }
    for name in in_dotenv:
        found.setdefault(name.upper(), "(set in .env)")
    problems = []
    for name, where in sorted(found.items()):
        close = difflib.get_close_matches(name, sorted(known), n=1)
        hint = f"did you mean {close[0]}?" if close else "a typo?"
        problems.append(Problem(name, where, f"unknown variable ({hint}); ignored", valid))
    return problems
