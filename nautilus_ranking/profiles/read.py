"""Where ranking profiles are written, gathered into entries that each say where they came from.

A profile's knob is a variable named as pydantic-settings names a nested field with
``env_nested_delimiter="__"``: ``NAUTILUS_PROFILES__<NAME>__<KNOB>``, the path
*profiles → name → knob*, where ``<KNOB>`` is the global variable without
``NAUTILUS_`` (``NAUTILUS_PROFILES__SUPPORT__SOURCE_BOOSTS`` beside
``NAUTILUS_SOURCE_BOOSTS``): an operator copies a line of the manifest and puts the
profile in front, and a manifest sorted by name keeps each profile's lines together.
The last ``__`` ends the name (a knob's name never holds two underscores in a row).

Many profiles can live in one YAML file named by ``NAUTILUS_PROFILES_FILE``, read with
the bounded reader the sources file uses. The environment wins over ``.env`` and both
win over the file, knob by knob, as they win over defaults for the global knobs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nautilus_ranking.errors import Problem, cut
from nautilus_ranking.settings.profile_variables import FILE_VAR, is_profile_variable

PREFIX = "NAUTILUS_PROFILES__"
SHAPE = "NAUTILUS_PROFILES__<NAME>__<KNOB>, e.g. NAUTILUS_PROFILES__SUPPORT__RANKING_TOP_K"


@dataclass(frozen=True)
class Entry:
    """One key of one profile: its value as written, and where (a variable, a file)."""

    profile: str
    key: str
    value: Any
    origin: str


def profiles_in_environment(env_file: object = ".env") -> bool:
    """Whether this process's environment or ``.env`` writes any profile (or names a
    profiles file)."""
    names = [*os.environ, *dotenv_environ(env_file)]
    return any(is_profile_variable(n) or n.upper() == FILE_VAR for n in names)


def env_entries(environ: Mapping[str, str], where: str = "") -> tuple[list[Entry], list[Problem]]:
    """The profile variables of ``environ`` (``where``: how an origin says it, e.g. ``.env``)."""
    entries: list[Entry] = []
    problems: list[Problem] = []
    for name in sorted(environ):
        upper = name.upper()
        if not is_profile_variable(upper):
            continue
        shown = "(set in .env)" if where else "(set)"
        profile, sep, key = upper.removeprefix(PREFIX).rpartition("__")
        if not upper.startswith(PREFIX) or not sep or not profile or not key:
            problems.append(Problem(upper, shown, "not a profile variable; ignored", SHAPE))
            continue
        origin = f"{upper} ({where})" if where else upper
        entries.append(Entry(profile.lower(), key.lower(), environ[name], origin))
    return entries, problems


def dotenv_environ(env_file: object) -> dict[str, str]:
    """The variables of the ``.env`` file pydantic-settings reads (none when unset or absent)."""
    if not isinstance(env_file, str | Path) or not Path(env_file).is_file():
        return {}
    from dotenv import dotenv_values

    return {k: v for k, v in dotenv_values(env_file).items() if v is not None}


def file_entries(path: str) -> tuple[list[Entry], list[Problem]]:
    """The profiles of a YAML file ``{name: {knob: value}}``; a file that cannot be read
    is one problem (its profiles are skipped)."""
    from nautilus_ranking.sources.yaml_file import SourceConfigError, expand_variables, read_yaml

    valid = "a YAML mapping {profile name: {knob: value}}; docs/configuration.md#profiles"
    try:
        document = expand_variables(read_yaml(Path(path).expanduser()), path)
    except SourceConfigError as exc:
        return [], [Problem(FILE_VAR, cut(path), str(exc).replace("sources ", ""), valid)]
    if document is None:
        return [], []
    if not isinstance(document, Mapping):
        return [], [Problem(FILE_VAR, cut(path), "not a mapping of profiles", valid)]
    entries: list[Entry] = []
    problems: list[Problem] = []
    for profile, knobs in document.items():
        if not isinstance(knobs, Mapping):
            problems.append(
                Problem(f"{path}: {cut(profile)}", cut(knobs), "not a mapping of knobs", valid)
            )
            continue
        for key, value in knobs.items():
            entries.append(Entry(str(profile), str(key).lower(), value, f"{path}: {profile}.{key}"))
    return entries, problems


def gather(profiles_file: str | None, env_file: object) -> tuple[list[Entry], list[Problem]]:
    """Every profile entry, the environment winning over ``.env`` and both over the
    file, key by key."""
    chosen: dict[tuple[str, str], Entry] = {}
    problems: list[Problem] = []
    layers = [
        file_entries(profiles_file) if profiles_file else ([], []),
        env_entries(dotenv_environ(env_file), ".env"),
        env_entries(os.environ),
    ]
    for entries, found in layers:
        problems.extend(found)
        for entry in entries:
            chosen[(entry.profile, entry.key)] = entry
    return list(chosen.values()), problems
