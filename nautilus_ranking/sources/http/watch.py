"""A wrong mapping is otherwise silent: a path that names no field of the engine's hits
(``title: document.name`` where documents have ``title``) reads null in every hit, and
every row of the source comes out with an empty text (scored 0 by content) or, for the
id, no row at all.

:class:`MappingWatch` looks at each answer of a source: every mapped path that was null
in every hit is a ``mapping_null`` warning in the response's ``sources_warned`` (the
service counts them in ``nautilus_source_warnings_total``), and a logged
``http_source_mapping_null`` (one line for the paths of an answer) the first time,
then again whenever a path that worked breaks, at most every :data:`REWARN_S` seconds
a path — never a line per request. An answer
with no hits says nothing either way.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from nautilus_ranking.log import get_logger
from nautilus_ranking.records import SourceWarning, WarnedRows
from nautilus_ranking.sources.http.mapping import MappedPage

logger = get_logger("nautilus_ranking.sources.http")

#: A path that breaks again is logged again at most this often (10 minutes).
REWARN_S = 600.0
#: How many of the first hit's keys a warning names.
KEYS_SHOWN = 20


@dataclass
class _PathState:
    broken: bool = False
    warned_at: float | None = None


class MappingWatch:
    """One source's mapped paths, answer after answer (on the HTTP loop: one thread)."""

    def __init__(self, source_id: str, clock: Any = time.monotonic) -> None:
        self.source_id = source_id
        self.clock = clock
        self.paths: dict[str, _PathState] = {}

    def check(self, pages: Sequence[MappedPage], rows: WarnedRows) -> None:
        """Warn (into ``rows``, and the log as the module says) about every mapped path
        null in every hit of ``pages``, one search's answer."""
        answered = [page for page in pages if page.hits]
        if not answered:
            return
        hits = sum(len(page.hits) for page in answered)
        null = dict(answered[0].unmapped)
        for page in answered[1:]:
            null = {option: path for option, path in page.unmapped if option in null}
        first = answered[0].hits[0]
        for option, path in null.items():
            where = keys_at(first, path)
            rows.unmapped.append((option, path, where))
            rows.warnings.append(
                SourceWarning(
                    self.source_id,
                    "mapping_null",
                    f"{option} {path!r} was null in every hit ({hits}); {where}",
                    hits,
                )
            )
        now = self.clock()
        due = []
        for option in {o for page in answered for o, _ in page.unmapped} | set(self.paths):
            state = self.paths.setdefault(option, _PathState())
            if option not in null:
                state.broken = False
            elif not state.broken:
                state.broken = True
                if state.warned_at is None or now - state.warned_at >= REWARN_S:
                    state.warned_at = now
                    due.append(option)
        if due:  # one line for the paths of this answer that broke
            due.sort()
            logger.warning(
                "http_source_mapping_null",
                source_id=self.source_id,
                paths={option: null[option] for option in due},
                hits=hits,
                first_hit=keys_at(first, null[due[0]]),
                action="set each path to a field the hits have "
                "(nautilus-ranking sources probe shows the first hit's keys)",
            )


def keys_at(hit: Any, path: str) -> str:
    """What a hit has where ``path`` finds nothing: the keys of the deepest object a
    dotted path reaches (``document has keys: body, id, title``), else the hit's own."""
    node, reached = hit, []
    parts = path.split(".")
    for part in parts[:-1]:
        key = part.strip('"')
        if not isinstance(node, dict) or not isinstance(node.get(key), dict):
            break
        node = node[key]
        reached.append(key)
    if not isinstance(node, dict):
        kind = "a list" if isinstance(node, list) else type(node).__name__
        return f"the first hit is {kind}, not an object"
    keys = sorted(map(str, node))
    shown = ", ".join(keys[:KEYS_SHOWN]) + (
        f", … ({len(keys)} in all)" if len(keys) > KEYS_SHOWN else ""
    )
    name = ".".join(reached) if reached else "the first hit"
    return f"{name} has keys: {shown or '(none)'}"
