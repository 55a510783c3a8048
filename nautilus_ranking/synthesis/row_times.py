"""A row's time: read where its source says, and parsed into the period it names.

What is read: ISO 8601 date-times, with a zone or without one (then UTC); ISO dates and
partial dates (``2024``, ``2024-06``, ``2024-06-01``) and basic dates (``20240601``, a
string or an integer: eight digits that are a date from 1900 to 2199 are that day, as
``date.fromisoformat`` reads them, never 23 August 1970 in epoch seconds); epoch
seconds and milliseconds (a number, or a string of digits: from 10^11 on, a number is
read as milliseconds, since 10^11 seconds is past the year 5000); ``datetime`` and
``date`` values (a PostgreSQL ``timestamptz`` column). Digits are ASCII digits only (a
full-width ``２０２４`` is not a year). Anything else, and a time before 1900 or after
2200 (a ``9999-12-31`` placeholder, microseconds read as seconds, an integer past the
float range), leaves the row undated: counted and warned about, never dropped.

Every time is a period ``[lo, hi]`` in epoch seconds: an instant has ``lo == hi``; a
partial date is the whole of its year, month or day. Why: ``2024`` is not 1 January
2024. Read as its first day, a year-only date looks older than a ``2024-06-01`` that
may well be older than it, and recency would put the wrong one first. So the decay
reads a period at its middle (never more than half the period wrong), and a revision
supersedes another only when its period starts after the other's ends
(``synthesis/supersession.py``): two times that may be in either order decide nothing.
"""

from __future__ import annotations

import calendar
import datetime as dt
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from operator import attrgetter, methodcaller
from typing import Any

import numpy as np

from nautilus_ranking.records import AdapterResult
from nautilus_ranking.row_paths import Reader, getter
from nautilus_ranking.synthesis.rank_warnings import RankWarnings
from nautilus_ranking.text.arrays import FloatArray, IntArray

#: Before this or after this a time is a placeholder or a unit mistake, not a time.
EARLIEST = calendar.timegm((1900, 1, 1, 0, 0, 0))
LATEST = calendar.timegm((2200, 1, 1, 0, 0, 0))
#: From here on an epoch number is read as milliseconds (10^11 s is in the year 5138;
#: 10^11 ms is in 1973).
MILLISECONDS_FROM = 1e11
_PARTIAL = re.compile(r"^(\d{4})(?:-(\d{2}))?(?:-(\d{2}))?$", re.ASCII)
_BASIC_DATE = re.compile(r"^((?:19|20|21)\d{2})(\d{2})(\d{2})$", re.ASCII)
_DIGITS = re.compile(r"^-?\d+(?:\.\d+)?$", re.ASCII)
#: An integer in here may be a basic date (``20240601``): read one at a time.
BASIC_DATES = (19_000_101, 21_991_232)
OUT_OF_RANGE = "out of range (1900 to 2200)"

#: A row's time: (lo, hi, shown), ``shown`` the time as the answer writes it.
Period = tuple[float, float, str]


def period_of(value: object) -> Period | str:
    """The period ``value`` names, or why it names none (a short reason)."""
    if isinstance(value, bool) or value is None:
        return "missing" if value is None else "not a time"
    if isinstance(value, int) and BASIC_DATES[0] <= value < BASIC_DATES[1]:
        return _basic_date(str(value))
    if isinstance(value, int | float):
        try:
            return _epoch(float(value))
        except OverflowError:  # an integer past the float range
            return OUT_OF_RANGE
    if isinstance(value, dt.datetime):
        return _instant(value)
    if isinstance(value, dt.date):
        start = calendar.timegm(value.timetuple())
        return _within(start, start + 86_400.0, value.isoformat())
    if not isinstance(value, str):
        return "not a time"
    text = value.strip()
    if len(text) > 64:
        return "not a time"
    partial = _PARTIAL.match(text)
    if partial is not None:
        return _partial(*partial.groups())
    if _DIGITS.match(text):
        return _basic_date(text) if _BASIC_DATE.match(text) else _epoch(float(text))
    if not text.isascii():  # fromisoformat reads other scripts' digits too
        return "not ISO 8601 or an epoch number"
    try:
        return _instant(dt.datetime.fromisoformat(text))
    except ValueError:
        return "not ISO 8601 or an epoch number"


def _basic_date(digits: str) -> Period | str:
    """``20240601``: the day it names when it is a date, else epoch seconds."""
    found = _BASIC_DATE.match(digits)
    if found is not None:
        day = _partial(*found.groups())
        if not isinstance(day, str):
            return day
    return _epoch(float(digits))


def _epoch(seconds: float) -> Period | str:
    if not math.isfinite(seconds):
        return "not a time"
    if abs(seconds) >= MILLISECONDS_FROM:
        seconds /= 1000.0
    if not EARLIEST <= seconds < LATEST:
        return "out of range (1900 to 2200)"
    return seconds, seconds, _iso(seconds)


def _instant(moment: dt.datetime) -> Period | str:
    if moment.tzinfo is None:  # naive: UTC
        moment = moment.replace(tzinfo=dt.UTC)
    try:
        seconds = moment.timestamp()
    except (OverflowError, OSError, ValueError):
        return "out of range (1900 to 2200)"
    if not EARLIEST <= seconds < LATEST:
        return "out of range (1900 to 2200)"
    return seconds, seconds, _iso(seconds)


def _partial(year: str, month: str | None, day: str | None) -> Period | str:
    y, m, d = int(year), int(month or 1), int(day or 1)
    try:
        start = dt.datetime(y, m, d, tzinfo=dt.UTC)
    except ValueError:
        return "not a date"
    if not EARLIEST <= start.timestamp() < LATEST:
        return "out of range (1900 to 2200)"
    if day is not None:
        end = start + dt.timedelta(days=1)
    elif month is not None:
        end = dt.datetime(y + m // 12, m % 12 + 1, 1, tzinfo=dt.UTC)
    else:
        end = dt.datetime(y + 1, 1, 1, tzinfo=dt.UTC)
    shown = "-".join(p for p in (year, month, day) if p is not None)
    return _within(start.timestamp(), end.timestamp(), shown)


def _within(start: float, end: float, shown: str) -> Period | str:
    if not EARLIEST <= start < LATEST:
        return "out of range (1900 to 2200)"
    return start, end - 1e-3, shown  # the period's last instant, a millisecond before its end


def _iso(seconds: float) -> str:
    moment = dt.datetime.fromtimestamp(seconds, dt.UTC)
    return moment.isoformat(timespec="milliseconds" if moment.microsecond else "seconds").replace(
        "+00:00", "Z"
    )


def read_times(
    rows: list[dict[str, Any]], source_index: IntArray, readers: list[Reader | None]
) -> tuple[FloatArray, FloatArray, list[Any], Counter[tuple[int, str]]]:
    """Each row's period as two arrays, its first and last instant (NaN: undated), the
    values read (:func:`read_by_source`), and how many rows each (source index, reason)
    left undated.
    A source's values are parsed together (this runs on every row of a batch): a
    column of date-time strings or of epoch numbers in a few C-level passes, anything
    else one value at a time."""
    n = len(rows)
    lo = np.full(n, np.nan)
    hi = np.full(n, np.nan)
    why: Counter[tuple[int, str]] = Counter()
    values, columns = read_by_source(rows, source_index, readers)
    for at, got in columns:
        reasons: Counter[str] = Counter()
        lo[at], hi[at] = _parse_all(got, reasons)
        source = int(source_index[at[0]])
        why.update({(source, reason): count for reason, count in reasons.items()})
    return lo, hi, values, why


def read_by_source(
    rows: list[dict[str, Any]], source_index: IntArray, readers: list[Reader | None]
) -> tuple[list[Any], list[tuple[IntArray, list[Any]]]]:
    """Each row's value as ``readers[j]`` reads the rows of source ``j`` (None where its
    source maps none), and each mapped source's (positions, values): a source's rows are
    read together."""
    values: list[Any] = [None] * len(rows)
    columns: list[tuple[IntArray, list[Any]]] = []
    for j, read in enumerate(readers):
        if read is None:
            continue
        at = np.flatnonzero(source_index == j)
        if not len(at):
            continue
        positions = at.tolist()
        got = read_all([rows[i] for i in positions], read)
        for i, value in zip(positions, got, strict=True):
            values[i] = value
        columns.append((at, got))
    return values, columns


def read_all(rows: list[dict[str, Any]], read: Reader) -> list[Any]:
    """What ``read`` finds in each row (None where the row breaks it)."""
    key = getattr(read, "key", None)
    if key is not None:  # a plain key: one C-level pass
        try:
            return list(map(methodcaller("get", key), rows))
        except Exception:  # a row whose mapping methods break: one at a time
            pass
    out = []
    for row in rows:
        try:
            out.append(read(row))
        except Exception:  # a row whose mapping methods break has no time
            out.append(None)
    return out


def _parse_all(values: list[Any], why: Counter[str]) -> tuple[FloatArray, FloatArray]:
    """The periods of ``values`` (NaN where none; ``why`` counts the reasons)."""
    n = len(values)
    kinds = set(map(type, values))
    seconds: FloatArray | None = None
    if kinds == {str} and min(map(len, values)) > 10:  # date-times, as most sources keep them
        try:
            moments = list(map(_FROM_ISO, values))
            if None in set(map(_TZINFO, moments)):  # naive: UTC
                moments = [m if m.tzinfo else m.replace(tzinfo=dt.UTC) for m in moments]
            seconds = np.fromiter(map(_TIMESTAMP, moments), dtype=np.float64, count=n)
        except (ValueError, OverflowError, OSError):
            seconds = None  # not all of them: one at a time
    elif kinds and kinds <= {int, float}:  # epoch numbers
        try:
            seconds = np.array(values, dtype=np.float64)
        except OverflowError:
            seconds = None
        else:
            basic = (seconds >= BASIC_DATES[0]) & (seconds < BASIC_DATES[1])  # maybe 20240601
            seconds = np.where(np.abs(seconds) >= MILLISECONDS_FROM, seconds / 1000.0, seconds)
            seconds[basic] = np.nan  # one at a time
    lo = np.full(n, np.nan)
    hi = np.full(n, np.nan)
    if seconds is not None:
        fine = (seconds >= EARLIEST) & (seconds < LATEST)
        lo[fine] = hi[fine] = seconds[fine]
        rest = np.flatnonzero(~fine).tolist()
    else:
        rest = list(range(n))
    for i in rest:
        found = period_of(values[i])
        if isinstance(found, str):
            why[found] += 1
        else:
            lo[i], hi[i] = found[0], found[1]
    return lo, hi


_FROM_ISO = dt.datetime.fromisoformat
_TIMESTAMP = dt.datetime.timestamp
_TZINFO = attrgetter("tzinfo")


def source_paths(
    results: list[AdapterResult], settings: Mapping[str, str], option: str
) -> dict[str, str]:
    """By lower-case source id, the path a source's rows hold ``option`` under: the
    setting's entry, else what the source itself says (its sources-file option)."""
    paths = {
        r.source_id.lower(): path
        for r in results
        if isinstance(r.source_id, str) and isinstance(path := getattr(r, option, None), str)
    }
    return {**paths, **settings}


def source_readers(
    paths: Mapping[str, str], source_ids: Sequence[str], warnings: RankWarnings, what: str
) -> list[Reader | None]:
    """Each source's reader of its ``paths`` entry (None: unmapped, or a path that is
    not one, warned about)."""
    out: list[Reader | None] = []
    for sid in source_ids:
        path = paths.get(sid.lower()) if isinstance(sid, str) else None
        read = getter(path) if path else None
        if isinstance(read, str):
            warnings.add(
                f"rank_{what}_path_invalid",
                source_id=sid,
                field=path,
                reason=read,
                action="unmapped",
            )
            read = None
        out.append(read)
    return out
