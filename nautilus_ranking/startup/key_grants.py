"""The API keys file's profile grants: which ranking profile each key gets, and may name.

A line is a key, optionally followed by ``profile=NAME`` (the key's default profile)
and ``allow=NAME,NAME`` (profiles its callers may name besides), separated by spaces::

    k-support-7f3a profile=support
    k-ops-19c2     profile=oncall allow=audit
    k-legacy-55aa

A plain line keeps working: the key gets the global knobs and may name no profile.
A line whose words after the key are not all ``profile=``/``allow=`` is a plain key, as
every line was before grants existed (a key with a space in it still works).

A grant that cannot be honoured stops ``serve`` and ``mcp`` at start, strict mode or
not, as an unreadable keys file does: a name that matches no configured profile (``Support``
for ``support``), a default given twice, or any grant while ``NAUTILUS_PROFILES_FILE``
cannot be read. Skipping it would hand that key the global knobs and every override — a
broader grant than the one written (:func:`refusals`).
"""

from __future__ import annotations

import re

from nautilus_ranking.errors import Problem, cut
from nautilus_ranking.profiles.build import Profiles
from nautilus_ranking.request.profile_choice import PLAIN, Grant
from nautilus_ranking.settings.profile_variables import FILE_VAR

VAR = "NAUTILUS_SERVE_API_KEYS_FILE"
_ATTRIBUTE = re.compile(r"(profile|allow)=(\S*)")
VALID = "KEY [profile=NAME] [allow=NAME,NAME], each NAME a configured profile"


def split_line(line: str) -> tuple[str, list[tuple[str, str]]]:
    """A stripped, non-comment line as its key and its ``(attribute, value)`` pairs."""
    words = line.split()
    pairs = [_ATTRIBUTE.fullmatch(w) for w in words[1:]]
    if len(words) < 2 or not all(pairs):
        return line, []
    return words[0], [(m.group(1), m.group(2)) for m in pairs if m is not None]


def key_grants(
    lines: list[str], profiles: Profiles, path: str
) -> tuple[dict[bytes, Grant], list[Problem]]:
    """Each key's grant (keys without attributes get the plain one)."""
    grants: dict[bytes, Grant] = {}
    problems: list[Problem] = []
    for number, line in enumerate(lines, 1):
        key, pairs = split_line(line)
        default: str | None = None
        allowed: set[str] = set()
        where = f"{VAR} ({cut(path)}:{number})"
        for attribute, value in pairs:
            names = [n for n in value.split(",") if n]
            if attribute == "profile" and (default is not None or len(names) != 1):
                problems.append(
                    Problem(
                        where,
                        f"profile={cut(value)}",
                        "a key's default profile given twice; the server refuses to start",
                        VALID,
                    )
                )
                continue
            for name in names:
                if name not in profiles.by_name:
                    problems.append(
                        Problem(
                            where,
                            f"{attribute}={cut(name)}",
                            "no profile of that name is configured; the server refuses to start",
                            VALID,
                        )
                    )
                elif attribute == "profile":
                    default = name
                else:
                    allowed.add(name)
        grants[key.encode()] = Grant(default, frozenset(allowed)) if pairs else PLAIN
    return grants, problems


def refusals(lines: list[str], profiles: Profiles, path: str) -> list[Problem]:
    """Why the keys file's grants cannot all be honoured (empty: they can); any one stops
    the server: a grant is never widened to the global knobs."""
    unread = [p for p in profiles.problems if p.variable == FILE_VAR]
    if unread and any(split_line(line)[1] for line in lines):  # the cause, not its echoes
        return [
            Problem(
                VAR,
                cut(path),
                f"grants profiles, but {FILE_VAR} cannot be read ({p.reason}); "
                "the server refuses to start",
                "a readable profiles file, or no profile= / allow= in the keys file",
            )
            for p in unread
        ]
    return key_grants(lines, profiles, path)[1]
