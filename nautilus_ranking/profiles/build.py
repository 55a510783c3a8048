"""Ranking profiles: named sets of ranking knobs, built once at start-up.

A profile sets only knobs the declaration lets vary per profile
(:data:`nautilus_ranking.settings.knobs.PER_PROFILE`), parsed by the settings' own parsers, so a
value means in a profile what it means in ``NAUTILUS_*``; a knob it does not set keeps
the global value. Besides its knobs a profile lists the Nautilus broker ``agents`` it
ranks for and the request fields its callers may still ``overrides`` (``none`` — the
default: the operator fixes the ranking —, ``all``, or a list). A bad entry is one
warning and is skipped, or refused in strict mode, as everywhere — except a restricting
knob's (:attr:`~nautilus_ranking.settings.knobs.Knob.restricts`: the top K, the token
budget, the abstain, …): skipping ``ranking_top_k: 3x`` would hand the profile's callers
the global knobs, a wider grant than the one written, so it stops every start, strict
mode or not, as a keys file's grant that cannot be honoured does.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from nautilus_ranking.errors import ANY_PROFILE, Problem, cut
from nautilus_ranking.profiles.read import Entry, gather
from nautilus_ranking.settings.knobs import BY_FIELD, OVERRIDES, PER_PROFILE, parse_knobs
from nautilus_ranking.settings.model import (
    ConfigError,
    NautilusSettings,
    log_problem,
)

#: What a profile's name may be: it is a metric label and part of a variable's name.
NAME = re.compile(r"[a-z0-9_]{1,64}")
AGENTS = "agents"
OVERRIDES_KEY = "overrides"
#: The request fields a profile may let its callers override (``all``: every one).
OVERRIDABLE: tuple[str, ...] = OVERRIDES
_KEYS = (*(k.field for k in PER_PROFILE), AGENTS, OVERRIDES_KEY)


@dataclass(frozen=True)
class Profile:
    """One profile: the knobs it sets (parsed), where each was written, what its
    callers may override and which broker agents it ranks for."""

    name: str
    values: Mapping[str, Any]
    origins: Mapping[str, str]
    overrides: frozenset[str] = frozenset()
    agents: tuple[str, ...] = ()

    def settings(self, base: NautilusSettings) -> NautilusSettings:
        """``base`` (the global knobs) with this profile's knobs over them."""
        return base.model_copy(update=dict(self.values)) if self.values else base


@dataclass(frozen=True)
class Profiles:
    """Every configured profile, by name and by broker agent id."""

    by_name: Mapping[str, Profile] = field(default_factory=dict)
    by_agent: Mapping[str, str] = field(default_factory=dict)
    problems: tuple[Problem, ...] = ()
    #: The problems among them no start may skip: a restricting knob that does not parse.
    refused: tuple[Problem, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.by_name)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(sorted(self.by_name))


def load_profiles(settings: NautilusSettings) -> Profiles:
    """The profiles of the environment, ``.env`` and ``NAUTILUS_PROFILES_FILE``; each
    problem is warned about, or (strict mode) all are raised as one :class:`ConfigError`;
    a restricting knob that does not parse is raised whatever the mode."""
    entries, problems = gather(
        settings.profiles_file, NautilusSettings.model_config.get("env_file")
    )
    profiles = build_profiles(entries, problems)
    if profiles.problems and settings.config_strict:
        raise ConfigError(profiles.problems)
    if profiles.refused:  # never widened to the global knobs
        raise ConfigError(profiles.refused)
    for problem in profiles.problems:
        log_problem(problem)
    return profiles


def configured(settings: NautilusSettings) -> bool:
    """Whether any profile is written (read without warning: for a server's schema,
    decided before its start-up loads them)."""
    entries, _ = gather(settings.profiles_file, NautilusSettings.model_config.get("env_file"))
    return any(NAME.fullmatch(e.profile) for e in entries)


def build_profiles(entries: list[Entry], problems: list[Problem] | None = None) -> Profiles:
    """Entries into profiles, each bad one a problem (tagged with its profile's name)."""
    found = [replace(p, profile=ANY_PROFILE) for p in problems or ()]
    grouped: dict[str, list[Entry]] = {}
    for entry in entries:
        grouped.setdefault(entry.profile, []).append(entry)
    by_name: dict[str, Profile] = {}
    by_agent: dict[str, str] = {}
    refused: list[Problem] = []
    for name in sorted(grouped):
        if not NAME.fullmatch(name):
            found.append(
                Problem(
                    grouped[name][0].origin,
                    cut(name),
                    "not a profile name; the profile is skipped",
                    "lower-case letters, digits and _ (up to 64); agent ids go in agents",
                    profile=ANY_PROFILE,
                )
            )
            continue
        before = len(found)
        profile = _profile(name, grouped[name], found, refused)
        for agent in profile.agents:
            if agent in by_agent:
                found.append(
                    Problem(
                        profile.origins[AGENTS],
                        cut(agent),
                        f"agent already ranked by profile {by_agent[agent]!r} (an agent has "
                        "one default profile); skipped here",
                        "each agent id in one profile's agents",
                    )
                )
                continue
            by_agent[agent] = name
        by_name[name] = profile
        found[before:] = [replace(p, profile=name) for p in found[before:]]
    return Profiles(by_name, by_agent, tuple(found), tuple(refused))


def _profile(
    name: str, entries: list[Entry], found: list[Problem], refused: list[Problem]
) -> Profile:
    raw: dict[str, Any] = {}
    origins: dict[str, str] = {}
    overrides: frozenset[str] = frozenset()
    agents: tuple[str, ...] = ()
    for entry in sorted(entries, key=lambda e: e.key):
        key = entry.key
        if key == AGENTS:
            agents = _agents(entry, found)
            origins[key] = entry.origin
        elif key == OVERRIDES_KEY:
            overrides = _overrides(entry, found)
            origins[key] = entry.origin
        elif key in BY_FIELD and not BY_FIELD[key].per_profile:
            found.append(
                Problem(
                    entry.origin,
                    cut(entry.value),
                    f"{BY_FIELD[key].variable} does not vary per profile (one per process); "
                    "ignored",
                    ", ".join(_KEYS),
                )
            )
        elif key in _KEYS:
            raw[key] = entry.value
            origins[key] = entry.origin
        else:
            close = (
                ["ranking_" + key]
                if "ranking_" + key in _KEYS
                else difflib.get_close_matches(key, _KEYS, n=1, cutoff=0.8)
            )
            hint = f" (did you mean {close[0]}?)" if close else ""
            unknown = Problem(
                entry.origin, cut(entry.value), f"unknown profile knob{hint}", ", ".join(_KEYS)
            )
            if close and close[0] in BY_FIELD and BY_FIELD[close[0]].restricts:
                unknown = _refusal(unknown, close[0], name)
                refused.append(unknown)
            else:
                unknown = replace(unknown, reason=unknown.reason + "; ignored")
            found.append(unknown)
    values: dict[str, Any] = {}
    if raw:
        # The settings' parsers alone: a settings object per profile would read the
        # environment and .env again for each (quadratic with profiles in the environment).
        parsed, problems = parse_knobs(raw)
        bad: set[str] = set()
        for problem in problems:
            key = problem.variable.removeprefix("NAUTILUS_").lower()
            if key in raw:
                bad.add(key)
                written = Problem(origins[key], problem.value, problem.reason, problem.valid)
                if BY_FIELD[key].restricts:
                    written = _refusal(written, key, name)
                    refused.append(written)
                found.append(written)
        for key in raw:
            if key not in bad or key == "source_boosts":  # a bad boost entry drops alone
                values[key] = parsed[key]
    return Profile(name, values, origins, overrides, agents)


def _refusal(problem: Problem, knob: str, name: str) -> Problem:
    """A restricting knob's entry that does not parse (or is misspelt), as the problem
    that stops a start."""
    return replace(
        problem,
        reason=f"{problem.reason}; {knob} narrows what profile {name!r} hands over, so "
        "nothing starts until it parses (skipped, it would give the profile the global knobs)",
        profile=name,
    )


def _listed(value: Any) -> list[str] | None:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return [v.strip() for v in value if v.strip()]
    return None


def _agents(entry: Entry, found: list[Problem]) -> tuple[str, ...]:
    listed = _listed(entry.value)
    if listed is None or any(len(a) > 256 for a in listed):
        found.append(
            Problem(
                entry.origin,
                cut(entry.value),
                "not a list of agent ids; ignored",
                "agent ids separated by commas, e.g. support-bot,helpdesk",
            )
        )
        return ()
    return tuple(dict.fromkeys(listed))


def _overrides(entry: Entry, found: list[Problem]) -> frozenset[str]:
    valid = "none, all, or some of: " + ", ".join(OVERRIDABLE)
    listed = _listed(entry.value)
    if listed is None:
        found.append(Problem(entry.origin, cut(entry.value), "not a list of fields", valid))
        return frozenset()
    names = [n.lower() for n in listed]
    if names in ([], ["none"]):
        return frozenset()
    if names == ["all"]:
        return frozenset(OVERRIDABLE)
    kept = set()
    for n in names:
        if n in OVERRIDABLE:
            kept.add(n)
        else:
            found.append(Problem(entry.origin, cut(n), "not a request field; skipped", valid))
    return frozenset(kept)
