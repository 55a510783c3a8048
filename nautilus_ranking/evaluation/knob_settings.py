"""The knobs in force for an ``eval`` run: each one's value and where it came from.

A report that names some knobs and not others misleads: a header that leaves out the
knob that turned ranking on reads as passthrough. Everything here reads
:mod:`nautilus_ranking.settings.knobs`, so a knob declared there is named, unset for the
passthrough row and reset for the reference row with no edit here.

Where a value came from, in the precedence pydantic-settings applies: an argument of
the caller, the environment, the ``.env`` file, else the default. :class:`RunSettings`
is what a run is handed; a ranking profile (``eval --profile``) adds its knobs there,
each one's origin the variable or file line that wrote it, and the global ones' origins
read ``global environment``, ``global .env``.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dotenv import dotenv_values

from nautilus_ranking.settings.declaration import Knob
from nautilus_ranking.settings.knobs import KNOBS, RANKING_KNOBS, knob_is_set
from nautilus_ranking.settings.model import NautilusSettings

if TYPE_CHECKING:
    from nautilus_ranking.profiles.build import Profile

ENVIRONMENT = "environment"
DOTENV = ".env"
ARGUMENT = "argument"
DEFAULT = "default"


@dataclass(frozen=True)
class KnobValue:
    """One knob as a run uses it."""

    knob: Knob
    value: Any  # JSON-able, as ``NautilusSettings.effective`` gives it
    origin: str  # environment | .env | argument | default, or a profile's variable or file
    set: bool  # differs from the default

    @property
    def shown(self) -> str:
        """``NAUTILUS_X=value (origin)``, the value as an operator would write it."""
        return f"{self.knob.variable}={written(self.value)} ({self.origin})"


@dataclass(frozen=True)
class RunSettings:
    """The settings a run ranks with, and where each knob that is set came from."""

    settings: NautilusSettings
    origins: Mapping[str, str] = field(default_factory=dict)  # field -> origin
    profile: str | None = None  # the ranking profile resolved into ``settings``

    def knobs(self) -> list[KnobValue]:
        """Every declared knob, in declaration order."""
        values = self.settings.model_dump(mode="json")
        values["embedder"] = self.settings.resolved_embedder  # the model, never "auto"
        out = []
        for knob in KNOBS:
            is_set = knob_is_set(getattr(self.settings, knob.field), default_of(knob.field))
            origin = self.origins.get(knob.field, ARGUMENT) if is_set else DEFAULT
            out.append(KnobValue(knob, values[knob.field], origin, is_set))
        return out


def run_settings(settings: NautilusSettings | None = None) -> RunSettings:
    """The process's settings (environment and ``.env``, as the service reads them) and
    each knob's origin; ``settings``: ones built elsewhere (their knobs that are set and
    in neither place are the caller's arguments)."""
    settings = settings if settings is not None else NautilusSettings()
    environment = {name.upper() for name in os.environ}
    dotenv = _dotenv_names(settings)
    origins = {}
    for knob in KNOBS:
        name = knob.variable.upper()
        if name in environment:
            origins[knob.field] = ENVIRONMENT
        elif name in dotenv:
            origins[knob.field] = DOTENV
    return RunSettings(settings, origins)


def with_profile(run: RunSettings, profile: Profile) -> RunSettings:
    """``run``'s global knobs with ``profile``'s over them, as a server resolves them
    (:meth:`Profile.settings`); each knob the profile sets has its origin, the others
    are named global."""
    origins = {name: f"global {origin}" for name, origin in run.origins.items()}
    origins.update({name: profile.origins[name] for name in profile.values})
    return RunSettings(profile.settings(run.settings), origins, profile.name)


def _dotenv_names(settings: NautilusSettings) -> set[str]:
    env_file = settings.model_config.get("env_file")
    if not isinstance(env_file, str | Path) or not Path(env_file).is_file():
        return set()
    try:
        return {name.upper() for name in dotenv_values(env_file)}
    except (OSError, UnicodeDecodeError):  # the settings warned already, or never read it
        return set()


@functools.cache
def _defaults() -> dict[str, Any]:
    fields = NautilusSettings.model_fields
    return {k.field: fields[k.field].get_default(call_default_factory=True) for k in KNOBS}


def default_of(field_name: str) -> Any:
    """A knob's default (unset) value, from the settings model: never written here."""
    return _defaults()[field_name]


def unset(settings: NautilusSettings) -> tuple[NautilusSettings, list[tuple[str, str]]]:
    """``settings`` with every ranking knob at its default, and the ``.env`` lines that
    unset the ones that were set (an empty value unsets a variable)."""
    changed = {k.field: default_of(k.field) for k in RANKING_KNOBS}
    lines = [
        (k.variable, "")
        for k in RANKING_KNOBS
        if knob_is_set(getattr(settings, k.field), default_of(k.field))
    ]
    return settings.model_copy(update=changed), lines


def written(value: Any) -> str:
    """A knob's value as an operator writes it in a ``.env`` line."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, dict):
        return ",".join(f"{k}:{v}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def knobs_line(run: RunSettings, ranking_enabled: bool) -> str:
    """The report's "current settings": every knob that is set, with its value and
    origin, then the named choices left at their defaults (the lexical scorer, the
    embedder), which shape a ranking as much."""
    knobs = run.knobs()
    shown = [k.shown for k in knobs if k.set]
    named = [k.shown for k in knobs if not k.set and isinstance(k.value, str)]
    head = " ".join(shown) if ranking_enabled else "passthrough (no ranking knob set)"
    if not ranking_enabled and shown:
        head += "; " + " ".join(shown)
    if run.profile is not None:
        head = f"profile {run.profile}: {head}"
    return head + (" " + " ".join(named) if named else "")
