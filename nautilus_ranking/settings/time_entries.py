"""The time settings parsed: the recency decay and the per-source row mappings.

``NAUTILUS_RANKING_RECENCY`` is a decay, ``half_life:90d`` or ``window:365d``, for
every source, with entries for one source where sources differ
(``half_life:90d,tickets:half_life:7d,archive:off``).
``NAUTILUS_RANKING_TIME_FIELDS`` and ``NAUTILUS_RANKING_DOCUMENT_KEYS`` map a source
id to the row key (a dotted path, or a JMESPath with the ``http`` extra) that holds a
row's time, or the document a revision belongs to. ``NAUTILUS_RANKING_MAY_REVISE``
names which sources may supersede another's revisions (``handbook:wiki``). Pure
parsing, as the boosts' (``boost_entries.py``): what a decay does is
``synthesis/recency.py``.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from nautilus_ranking.errors import Problem, cut
from nautilus_ranking.row_paths import path_problem

#: A duration's units, in seconds (a year is 365 days).
UNITS: Mapping[str, int] = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800, "y": 31_536_000}
#: The decay kinds: ``half_life`` halves a row's freshness every duration, ``window``
#: takes it down in a straight line to none at the duration.
KINDS = ("half_life", "window")
#: How many half-lives a decay reaches: past eight, freshness is under 1/256.
HALF_LIVES = 8
#: The shortest and the longest duration a decay may have.
MIN_SECONDS = 60
MAX_SECONDS = 100 * UNITS["y"]
RECENCY_VALID = (
    "half_life:D or window:D, D a number and a unit s, m, h, d, w or y (e.g. 90d), "
    "optionally after SOURCE: for one source (SOURCE:off for none); comma-separated; or off"
)
MAPPING_VALID = "comma-separated SOURCE:PATH entries, e.g. tickets:updated_at,wiki:meta.modified"
MAY_REVISE_VALID = (
    "comma-separated REVISER:REVISED source-id pairs, e.g. handbook:wiki,handbook:archive "
    "(handbook's newer revisions supersede wiki's and archive's)"
)
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhdwy])$")
_SOURCE_ID = re.compile(r"^[a-z0-9_][a-z0-9_.\-]*$")
_OFF = frozenset({"off", "none", "false", "0"})


@dataclass(frozen=True)
class Decay:
    """How fast a row's freshness falls with its age: ``kind`` (:data:`KINDS`) over
    ``seconds``, written ``text`` (``90d``)."""

    kind: str
    seconds: float
    text: str

    def __str__(self) -> str:
        return f"{self.kind}:{self.text}"


@dataclass(frozen=True)
class Recency:
    """The decay of every source (``default``; None: none) and of the sources named
    apart (``per_source``, lower-case ids; None: that source is not aged)."""

    default: Decay | None
    per_source: Mapping[str, Decay | None] = field(default_factory=dict)

    def for_source(self, source_id: str) -> Decay | None:
        sid = source_id.lower()
        return self.per_source.get(sid, self.default)

    @property
    def reach(self) -> float:
        """The longest age at which a decay in force still tells rows apart: a window's
        length, or eight half-lives (freshness 1/256). A row time further than this past
        every other row's cannot make them fresher by being real: it is held back."""
        decays = [self.default, *self.per_source.values()]
        return max(
            (d.seconds * (HALF_LIVES if d.kind == "half_life" else 1) for d in decays if d),
            default=0.0,
        )

    def __str__(self) -> str:
        entries = [str(self.default)] if self.default is not None else []
        entries += [f"{sid}:{d if d is not None else 'off'}" for sid, d in self.per_source.items()]
        return ",".join(entries)


def parse_duration(text: str) -> Decay | str:
    """``90d`` as seconds (a Decay without its kind), or why it is not a duration."""
    found = _DURATION.match(text.strip().lower())
    if found is None:
        return "not a duration (a number and a unit s, m, h, d, w or y)"
    number, unit = found.groups()
    seconds = float(number) * UNITS[unit]
    if not MIN_SECONDS <= seconds <= MAX_SECONDS:
        return "out of range (1 minute to 100 years)"
    return Decay("", seconds, f"{number}{unit}")


def unknown_decay(kind: str) -> str:
    """Why ``kind`` is no decay, naming the kind it is most likely a typo of
    (``halflife``, ``half-life``: ``half_life``)."""
    close = difflib.get_close_matches(kind, KINDS, n=1, cutoff=0.6)
    if close:
        return f"unknown decay {kind!r} (did you mean {close[0]}?)"
    return f"unknown decay {kind!r} (half_life or window)"


def _decay(text: str) -> Decay | str | None:
    """One entry's decay (``half_life:90d``; ``off``: None), or why it is not one."""
    if text.strip().lower() in _OFF:
        return None
    kind, sep, duration = text.partition(":")
    kind = kind.strip().lower()
    if not sep or kind not in KINDS:
        return unknown_decay(kind)
    parsed = parse_duration(duration)
    if isinstance(parsed, str):
        return parsed
    return Decay(kind, parsed.seconds, parsed.text)


def recency_of(raw: object) -> tuple[Recency | None, Problem | None]:
    """The decay a value sets (None: off), the good entries of a value with a bad one
    kept, with the first bad entry as a Problem (named for the variable by the caller)."""
    if raw is None:
        return None, None
    if not isinstance(raw, str):
        return None, Problem("recency", cut(raw), "not a string", RECENCY_VALID)
    default: Decay | None = None
    per_source: dict[str, Decay | None] = {}
    problem: Problem | None = None
    for entry in raw.split(","):
        if not entry.strip():
            continue
        head, sep, rest = entry.partition(":")
        named = head.strip().lower()
        for_source = bool(sep) and named not in KINDS and named not in _OFF  # SOURCE:decay
        if for_source and isinstance(parse_duration(rest), Decay):
            # ``halflife:30d``: a duration right after the head makes the head a
            # mistyped decay, not a source (a source's entry is SOURCE:KIND:D)
            decay: Decay | str | None = unknown_decay(named)
        elif for_source and not _SOURCE_ID.match(named):
            decay = "bad source id"
        else:
            decay = _decay(rest if for_source else entry)
        if isinstance(decay, str):
            problem = problem or Problem("recency", cut(entry.strip()), decay, RECENCY_VALID)
        elif for_source:
            per_source[named] = decay
        else:
            default = decay
    if default is None and all(d is None for d in per_source.values()):
        return None, problem
    return Recency(default, dict(sorted(per_source.items()))), problem


def parse_recency_value(var: str, raw: object) -> tuple[Recency | None, Problem | None]:
    """A recency setting parsed (None: off; a :class:`Recency` is taken as it is), for
    the settings and a request's ``recency``; a bad entry is skipped and named."""
    if isinstance(raw, Recency) or raw is None or (isinstance(raw, str) and not raw.strip()):
        return (raw if isinstance(raw, Recency) else None), None
    recency, problem = recency_of(raw)
    if problem is not None:
        problem = Problem(var, problem.value, problem.reason, problem.valid)
    return recency, problem


def parse_recency(var: str, raw: object) -> tuple[str | None, Problem | None]:
    """A recency setting as its normalised text (``half_life:90d,tickets:off``; None:
    off): how ``explain`` and a cursor's key write it."""
    recency, problem = parse_recency_value(var, raw)
    return (str(recency) if recency is not None else None), problem


def parse_source_paths(var: str, raw: object) -> tuple[dict[str, str], Problem | None]:
    """``tickets:updated_at,wiki:meta.modified`` to ``{source_id: path}`` (ids lower-cased;
    a mapping is taken as it is); a bad entry is skipped and the first one named."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}, None
    if isinstance(raw, Mapping):
        entries = [f"{k}:{v}" for k, v in raw.items()]
    elif isinstance(raw, str):
        entries = raw.split(",")
    else:
        return {}, Problem(var, cut(raw), "not a string", MAPPING_VALID)
    paths: dict[str, str] = {}
    problem: Problem | None = None
    for entry in entries:
        if not entry.strip():
            continue
        sid, sep, path = entry.partition(":")
        sid, path = sid.strip().lower(), path.strip()
        if not sep or not path or not _SOURCE_ID.match(sid):
            problem = problem or Problem(var, cut(entry.strip()), "not SOURCE:PATH", MAPPING_VALID)
            continue
        bad_path = path_problem(path)
        if bad_path is not None:
            problem = problem or Problem(
                var, cut(entry.strip()), f"not a path ({bad_path})", MAPPING_VALID
            )
            continue
        paths[sid] = path
    return dict(sorted(paths.items())), problem


def parse_may_revise(var: str, raw: object) -> tuple[dict[str, list[str]], Problem | None]:
    """``handbook:wiki,handbook:archive`` to ``{reviser: [revised, …]}`` (ids lower-cased
    and sorted; a mapping of lists is taken as it is); a bad entry is skipped and the
    first one named. A source always revises itself: naming that is no entry."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}, None
    if isinstance(raw, Mapping):
        entries = [
            f"{k}:{v}" for k, vs in raw.items() for v in (vs if isinstance(vs, list) else [vs])
        ]
    elif isinstance(raw, str):
        entries = raw.split(",")
    else:
        return {}, Problem(var, cut(raw), "not a string", MAY_REVISE_VALID)
    pairs: dict[str, set[str]] = {}
    problem: Problem | None = None
    for entry in entries:
        if not entry.strip():
            continue
        reviser, sep, revised = (part.strip().lower() for part in entry.partition(":"))
        if not sep or not _SOURCE_ID.match(reviser) or not _SOURCE_ID.match(revised):
            problem = problem or Problem(
                var, cut(entry.strip()), "not REVISER:REVISED", MAY_REVISE_VALID
            )
            continue
        if reviser != revised:
            pairs.setdefault(reviser, set()).add(revised)
    return {k: sorted(v) for k, v in sorted(pairs.items())}, problem
