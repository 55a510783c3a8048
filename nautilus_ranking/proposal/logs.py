"""The feedback logs read back for ``feedback propose``: every answer handed over, each
row's position, source and logged score components, and whether a caller used it.

The one place that knows the files' shape (``events.py`` declares it), so a change of
format is a change here. What it promises its readers:

- a repeated ``event_id`` is read once (the server keeps no seen-set; a client may send
  one event twice);
- an impression is never a use: a row is used when a ``cited``, ``used`` or ``fetched``
  event names it (:data:`~.events.USE_ACTIONS`), matched by its answer, page and
  position (each page is a list of its own, its positions from 1);
- a line that is not a record of the declared shape is skipped with one structured
  warning (``feedback_log_line_skipped``: the file, the line, why), never a traceback;
- answers are kept by config hash: a caller picks one (:meth:`FeedbackLog.under`) and
  the others are counted, never mixed in.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nautilus_ranking.feedback.events import EVENTS, IMPRESSION, QUERIES, USE_ACTIONS
from nautilus_ranking.log import get_logger

_log = get_logger("nautilus_ranking.feedback")

#: The score components kept of each impression: what a replay re-scores from
#: (``feedback/replay.py``); the others are not held in memory.
REPLAY_COMPONENTS = ("score", "relevance", "boost_bump")
#: Skipped lines warned about one by one, per read; past it one summary says how many.
WARNED_LINES = 20


@dataclass(frozen=True)
class Shown:
    """One row handed over: its 1-based position, source, id and the logged components a
    replay needs (:data:`REPLAY_COMPONENTS`, those present)."""

    position: int
    source: str
    object_id: str
    components: dict[str, float]


@dataclass
class Answer:
    """One answer: how it was ranked, what it showed and which positions were used."""

    query_id: str
    timestamp: str
    profile: str | None
    config_hash: str
    levels: dict[str, str]
    shown: list[Shown] = field(default_factory=list)
    used: set[int] = field(default_factory=set)  # positions a caller used
    page: int = 1  # each page is a list of its own, its positions from 1


@dataclass
class FeedbackLog:
    """Every readable answer, and what was left out of them and why."""

    answers: list[Answer]
    files: int = 0
    skipped: Counter[str] = field(default_factory=Counter)  # reason -> lines
    duplicates: int = 0  # events read again under an event id already read
    hashes: Counter[str] = field(default_factory=Counter)  # config hash -> answers

    def under(self, config_hash: str) -> list[Answer]:
        """The answers ranked under ``config_hash`` (the others are only counted)."""
        return [a for a in self.answers if a.config_hash == config_hash]

    def latest_hash(self) -> str | None:
        """The config hash of the most recent answer (None without answers)."""
        latest = max(self.answers, key=lambda a: a.timestamp, default=None)
        return latest.config_hash if latest is not None else None


class _Reader:
    """One pass over the files: records parsed, bad lines counted and warned about."""

    def __init__(self, on_bytes: Any = None) -> None:
        self.skipped: Counter[str] = Counter()
        self.on_bytes = on_bytes
        self.where = ("", 0)  # the file and line being read

    def records(self, path: Path) -> Iterator[dict[str, Any]]:
        with path.open("rb") as handle:
            for number, raw in enumerate(handle, start=1):
                if self.on_bytes is not None:
                    self.on_bytes(len(raw))
                try:
                    record = json.loads(raw)
                except (ValueError, UnicodeDecodeError):
                    self.skip(path, number, "not a JSON object")
                    continue
                if not isinstance(record, dict):
                    self.skip(path, number, "not a JSON object")
                    continue
                self.where = (path.name, number)
                yield record

    def skip(self, path: Path, number: int, reason: str) -> None:
        self.where = (path.name, number)
        self.skip_here(reason)

    def skip_here(self, reason: str) -> None:
        """Count the line being read as skipped; warn about the first few."""
        self.skipped[reason] += 1
        if sum(self.skipped.values()) <= WARNED_LINES:
            name, number = self.where
            _log.warning("feedback_log_line_skipped", file=name, line=number, reason=reason)


def log_files(folder: Path) -> tuple[list[Path], list[Path]]:
    """The query files and the event files under ``folder``, in name order."""
    return sorted(folder.glob(f"{QUERIES}*.jsonl")), sorted(folder.glob(f"{EVENTS}*.jsonl"))


def read_logs(folder: Path, on_bytes: Any = None) -> FeedbackLog:
    """Every answer in the JSONL logs under ``folder``; ``on_bytes(n)`` after each line
    (a progress bar)."""
    queries, events = log_files(folder)
    reader = _Reader(on_bytes)
    answers: dict[tuple[str, int], Answer] = {}  # by answer and page
    for path in queries:
        for record in reader.records(path):
            answer = _answer(record, reader)
            if answer is not None:
                answers.setdefault((answer.query_id, answer.page), answer)
    seen: set[str] = set()
    duplicates = 0
    uses: list[tuple[str, int, int]] = []
    for path in events:
        for record in reader.records(path):
            event_id = record.get("event_id")
            if not isinstance(event_id, str) or not event_id:
                reader.skip_here("no event_id")
                continue
            if event_id in seen:
                duplicates += 1
                continue
            seen.add(event_id)
            _event(record, answers, uses, reader)
    for query_id, page, position in uses:
        answer = answers.get((query_id, page))
        if answer is None:
            reader.skipped["use of an answer with no query record"] += 1
        elif any(s.position == position for s in answer.shown):
            answer.used.add(position)
        else:
            reader.skipped["use of a position never shown"] += 1
    kept = [a for a in answers.values() if a.shown]
    for a in kept:
        a.shown.sort(key=lambda s: s.position)
    hashes = Counter(a.config_hash for a in kept)
    total = sum(reader.skipped.values())
    if total > WARNED_LINES:
        _log.warning("feedback_log_lines_skipped", lines=total, reasons=dict(reader.skipped))
    return FeedbackLog(kept, len(queries) + len(events), reader.skipped, duplicates, hashes)


def _answer(record: dict[str, Any], reader: _Reader) -> Answer | None:
    attributes = record.get("query_attributes")
    query_id = record.get("query_id")
    if not isinstance(query_id, str) or not isinstance(attributes, dict):
        reader.skip_here("a query record without query_id or query_attributes")
        return None
    config_hash = attributes.get("config_hash")
    levels = attributes.get("levels") or {}
    if not isinstance(config_hash, str) or not isinstance(levels, dict):
        reader.skip_here("query_attributes without config_hash or levels")
        return None
    profile = attributes.get("profile")
    page = attributes.get("page")
    return Answer(
        query_id=query_id,
        timestamp=str(record.get("timestamp") or ""),
        profile=profile if isinstance(profile, str) else None,
        config_hash=config_hash,
        levels={str(k).lower(): str(v) for k, v in levels.items()},
        page=page if isinstance(page, int) and not isinstance(page, bool) else 1,
    )


def _event(
    record: dict[str, Any],
    answers: dict[tuple[str, int], Answer],
    uses: list[tuple[str, int, int]],
    reader: _Reader,
) -> None:
    """An impression joins its answer; a use is kept to join after every impression."""
    action = record.get("action_name")
    query_id = record.get("query_id")
    attributes = record.get("event_attributes")
    if action not in (IMPRESSION, *USE_ACTIONS):
        return  # rejections and query-level outcomes: read, not counted as use
    position, page = _position(attributes)
    if not isinstance(query_id, str) or position is None:
        reader.skip_here(f"a {action} without query_id or position.ordinal")
        return
    if action != IMPRESSION:
        uses.append((query_id, page, position))
        return
    shown = _shown(attributes, position) if isinstance(attributes, dict) else None
    answer = answers.get((query_id, page))
    if shown is None:
        reader.skip_here("an impression without object or numeric components")
    elif answer is None:
        reader.skipped["impression of an answer with no query record"] += 1
    else:
        answer.shown.append(shown)


def _position(attributes: object) -> tuple[int | None, int]:
    """The row's 1-based ``ordinal`` (None: none) and its ``page`` (1 when not said)."""
    position = attributes.get("position") if isinstance(attributes, dict) else None
    if not isinstance(position, dict):
        return None, 1
    ordinal, page = position.get("ordinal"), position.get("page", 1)
    page = page if isinstance(page, int) and not isinstance(page, bool) else 1
    if isinstance(ordinal, int) and not isinstance(ordinal, bool) and ordinal >= 1:
        return ordinal, page
    return None, page


def _shown(attributes: dict[str, Any], position: int) -> Shown | None:
    obj = attributes.get("object")
    components = attributes.get("components") or {}
    if not isinstance(obj, dict) or not isinstance(components, dict):
        return None
    source = obj.get("object_id_field")
    if not isinstance(source, str) or not source:
        return None
    numbers = {
        k: float(v)
        for k in REPLAY_COMPONENTS
        if isinstance(v := components.get(k), int | float) and not isinstance(v, bool)
    }
    return Shown(position, source.lower(), str(obj.get("object_id")), numbers)
