"""``NAUTILUS_*`` variables that match no setting but are close to one: most likely a typo.

Settings are warn-and-skip, so a misspelt variable would otherwise be silently
ignored; each one found in the environment or in ``.env`` is reported as a problem
with the closest known name.

The prefix is shared. The Nautilus broker (``nautilus-rkm``) reads its own
``NAUTILUS_*`` variables (:data:`BROKER_VARIABLES`), and an operator's broker YAML
may expand variables of their own (``${NAUTILUS_ORDERS_DSN}``) from the same
manifest. So a name is a typo only when it is within a typo of one of ours
(:func:`closest_setting`): the part after ``NAUTILUS_`` at least
:data:`TYPO_CUTOFF` similar to one of ours, or one of ours with ``RANKING_`` left
out. Any other ``NAUTILUS_*`` name belongs to someone else and is never reported.

Ranking profiles' variables (``NAUTILUS_PROFILES__<NAME>__<KNOB>``) follow a pattern,
not a list: any name starting ``NAUTILUS_PROFILE`` is judged by the profile reader
(``nautilus_ranking/profiles/read.py``), which reports one that does not fit it.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable
from typing import Any

from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

from nautilus_ranking.errors import Problem
from nautilus_ranking.settings.profile_variables import is_profile_variable

DOTENV_UNKNOWN = "__nautilus_dotenv_unknown__"
_PREFIX = "NAUTILUS_"

#: The ``NAUTILUS_*`` variables the Nautilus broker (nautilus-rkm 0.3) reads itself:
#: never ours, never reported as a typo of ours (a test keeps our names apart from them).
BROKER_VARIABLES = frozenset(
    {
        "NAUTILUS_API_KEY",
        "NAUTILUS_METADATA_KEY",
        "NAUTILUS_REVIEWER",
        "NAUTILUS_TEMPLATES_FILE",
        "NAUTILUS_BUILD_REV",
    }
)
#: How similar (difflib's ratio, on the part after ``NAUTILUS_``) an unknown name must
#: be to one of ours to be reported: one or two letters wrong (``RANKING_TOPK``,
#: ``SOURCE_BOST``, ``EMBEDER``: 0.92 to 0.97) is; the broker's names (at most 0.55)
#: and names of another system (``PG_DSN``: 0.35, ``DATABASE_URL``: 0.6) are not.
TYPO_CUTOFF = 0.8
#: How many of our names a typo's warning offers (the nearest first): enough to see the
#: neighbours of a name, where all ~50 made a 2 KB line.
NEAREST_SHOWN = 3


def closest_setting(name: str, known: Iterable[str]) -> str | None:
    """The variable of ours that ``name`` is most likely a typo of, or None when it is
    someone else's (the broker's, an operator's own) or one of ours."""
    upper = name.upper()
    names = sorted(k.upper() for k in known)
    if not upper.startswith(_PREFIX) or upper in names or upper in BROKER_VARIABLES:
        return None
    if is_profile_variable(upper):  # the profile reader judges these
        return None
    tail = upper.removeprefix(_PREFIX)
    for ours in names:  # NAUTILUS_TOP_K for NAUTILUS_RANKING_TOP_K
        if ours == f"{_PREFIX}RANKING_{tail}":
            return ours
    tails = {k.removeprefix(_PREFIX): k for k in names}
    close = difflib.get_close_matches(tail, sorted(tails), n=1, cutoff=TYPO_CUTOFF)
    return tails[close[0]] if close else None


def nearest_settings(name: str, close: str, known: Iterable[str]) -> list[str]:
    """The :data:`NEAREST_SHOWN` variables of ours nearest ``name``, ``close`` (the one
    it is most likely a typo of) first: what its warning offers as valid."""
    tails = {k.upper().removeprefix(_PREFIX): k.upper() for k in known}
    tail = name.upper().removeprefix(_PREFIX)
    nearest = difflib.get_close_matches(tail, sorted(tails), n=NEAREST_SHOWN + 1, cutoff=0)
    others = [tails[t] for t in nearest if tails[t] != close]
    return [close, *others][:NEAREST_SHOWN]


def is_setting_or_typo(name: object, cls: type[BaseSettings]) -> bool:
    """Whether ``name`` is one of ``cls``'s variables or a typo of one: what a
    deployment check judges (the broker's variables and an operator's own are not)."""
    if not isinstance(name, str) or not name.upper().startswith(_PREFIX):
        return False
    if is_profile_variable(name):
        return True
    known = {_PREFIX + field.upper() for field in cls.model_fields}
    return name.upper() in known or closest_setting(name, known) is not None


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
        ours = {_PREFIX + field.upper() for field in known}
        unknown = [n for n in unknown if closest_setting(n, ours) is not None]
        if unknown:
            values[DOTENV_UNKNOWN] = unknown
        return values


def unknown_variables(cls: type[BaseSettings], in_dotenv: Iterable[str] = ()) -> list[Problem]:
    """``NAUTILUS_*`` variables (environment or ``.env``) that match no setting and are
    close to one: most likely a typo. Others' variables are left alone."""
    known = {_PREFIX + name.upper() for name in cls.model_fields}
    found = {name.upper(): "(set)" for name in os.environ}
    for name in in_dotenv:
        found.setdefault(name.upper(), "(set in .env)")
    problems = []
    for name, where in sorted(found.items()):
        close = closest_setting(name, known)
        if close is not None:
            valid = ", ".join(nearest_settings(name, close, known))
            problems.append(
                Problem(name, where, f"unknown variable (did you mean {close}?); ignored", valid)
            )
    return problems
