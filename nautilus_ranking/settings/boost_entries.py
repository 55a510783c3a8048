"""``NAUTILUS_SOURCE_BOOSTS`` entries parsed: ``{source_id: level}``, each bad entry a Problem.

Pure parsing, shared by the settings (``config.py``, which logs the problems), a
request's ``boosts`` (``request/plan.py``) and the CLI's ``--boost``. What a level does
is ``synthesis/ranking_boost.py``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from nautilus_ranking.errors import Problem, cut, shown

#: Valid boost levels, lowest first: the demotions (``-high`` demotes most), then the
#: boosts. ``synthesis.ranking_boost.BOOST_LEVELS`` holds their numbers; a guard test keeps the
#: two in sync.
VALID_LEVELS: tuple[str, ...] = ("-high", "-medium", "-low", "low", "medium", "high")
DEFAULT_LEVEL = "medium"

BOOSTS_VAR = "NAUTILUS_SOURCE_BOOSTS"
_SOURCE_ID = re.compile(r"^[a-z0-9_][a-z0-9_.\-]*$")


def _level_choices() -> str:
    return ", ".join(VALID_LEVELS)


def collect_source_boosts(
    raw: str | Mapping[str, object] | None,
) -> tuple[dict[str, str], list[Problem]]:
    """Parse ``"graph:high, SQL:low,vector"`` without logging: (boosts, problems).

    Ids and levels are case-insensitive, whitespace is tolerated, a bare ``id``
    or ``id:`` means ``medium``, empty entries are ignored, and a repeated id
    keeps its last entry (the earlier one is reported).
    """
    if raw is None:
        return {}, []
    if isinstance(raw, Mapping):
        entries: list[tuple[str, str | None, object]] = [
            (f"{k}:{v if v is not None else ''}", str(k), v) for k, v in raw.items()
        ]
    elif isinstance(raw, str):
        entries = [(e, *_split_entry(e)) for e in raw.split(",")]
    else:
        problem = Problem(BOOSTS_VAR, cut(raw), "not a string", "'id:level,...'")
        return {}, [problem]

    boosts: dict[str, str] = {}
    written: dict[str, str] = {}  # each id's entry as written, for the repeated-id warning
    problems: list[Problem] = []
    for entry, source_id, level in entries:
        reason = _entry_problem(entry, source_id, level)
        if reason is not None:
            problems.append(Problem(BOOSTS_VAR, cut(entry.strip()), reason, _level_choices()))
            continue
        if source_id is None:  # an empty entry, as in "graph:high,,sql"
            continue
        sid = source_id.strip().lower()
        if sid in boosts:
            problems.append(
                Problem(
                    BOOSTS_VAR,
                    cut(written[sid]),
                    f"repeated source id {sid!r}; the last entry wins",
                    "each id once",
                )
            )
        boosts[sid] = (str(level).strip().lower() if level else "") or DEFAULT_LEVEL
        written[sid] = entry.strip()
    return boosts, problems


def _split_entry(entry: str) -> tuple[str | None, object]:
    if not entry.strip():
        return None, None
    source_id, _, level = entry.partition(":")
    return source_id, level


def _entry_problem(entry: str, source_id: str | None, level: object) -> str | None:
    if source_id is None:
        return None
    if not isinstance(level, str | None):
        return f"level {shown(level)} is not a string"
    sid = source_id.strip().lower()
    if isinstance(level, str) and ":" in level:
        return "malformed entry (expected id or id:level)"
    if not sid:
        return "empty source id"
    if not _SOURCE_ID.match(sid):
        return f"invalid source id {shown(source_id.strip())} (letters, digits, '_', '-', '.')"
    lvl = (level or "").strip().lower()
    if lvl and lvl not in VALID_LEVELS:
        return f"unknown level {shown((level or '').strip())} for {sid!r}"
    return None
