"""Copies of one document in a ranking: the best copy kept, the others named in its
``also_from`` (``exact``, and ``near`` from ``near_duplicates.py``); the revision in
force shown in the place of the best-ranked revision (``supersession.py``), the
revisions it replaced listed after its copies; and, with
``NAUTILUS_RANKING_CANONICAL_SOURCES``, a canonical source's copy shown instead of the
kept one. Used by the selection stage (``select.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nautilus_ranking.records import Copy
from nautilus_ranking.rows import id_or_content_id
from nautilus_ranking.synthesis import recency, supersession
from nautilus_ranking.synthesis.candidates import Candidates
from nautilus_ranking.text.arrays import IntArray


def copy_of(cands: Candidates, i: int, kind: str) -> Copy:
    """Candidate ``i`` as a copy of another row."""
    row = cands.rows[i]
    try:
        name = id_or_content_id(row) if isinstance(row, dict) else None
    except Exception:  # rank() never raises: a row whose mapping methods break has no name
        name = None
    return Copy(cands.source_ids[cands.source_index[i]], name, int(cands.source_rank[i]), kind)


class Members(dict[int, list[int]]):
    """The candidates collapsed into each kept one, parallel to its ``also_from``;
    ``shown``: the copy a kept candidate is shown by, when a canonical source's; and
    ``revisions``: the revisions it replaced (each with its kind and its own copies), listed
    after its copies; made into :class:`Copy` entries only for the rows an answer shows."""

    def __init__(self) -> None:
        super().__init__()
        self.shown: dict[int, int] = {}
        self.revisions: dict[int, list[tuple[int, str, list[Copy]]]] = {}


def collapse_copies(
    cands: Candidates, order: IntArray, doc: IntArray
) -> tuple[IntArray, dict[int, list[Copy]], Members]:
    """Keep the best copy of each document (rows in ``order``, best first); record
    where the others came from."""
    first = np.zeros(len(doc), dtype=bool)
    _, where = np.unique(doc[order], return_index=True)
    first[where] = True
    members = Members()
    if first.all():
        return order, {}, members
    kept = order[first]
    best_of: dict[int, int] = {}
    also_from: dict[int, list[Copy]] = {}
    for i, is_first in zip(order.tolist(), first.tolist(), strict=True):
        d = int(doc[i])
        if is_first:
            best_of[d] = i
        else:
            also_from.setdefault(best_of[d], []).append(copy_of(cands, i, "exact"))
            members.setdefault(best_of[d], []).append(i)
    return kept, also_from, members


def supersede_revisions(
    cands: Candidates,
    order: IntArray,
    also_from: dict[int, list[Copy]],
    members: Members,
    timing: recency.Timing,
) -> tuple[IntArray, dict[int, int]]:
    """``order`` with each document's revision in force in its best place
    (``supersession.supersede``), and ``{in force: the row whose place it took}``: each
    revision replaced goes to its ``also_from`` after its copies (a ``revision`` or a
    ``later_revision``, with its time), its own copies with it. They are kept apart
    (``members.revisions``), so a canonical source chooses among copies of the revision
    in force, never another revision."""

    def mark(kept: int, other: int, kind: str) -> None:
        members.revisions.setdefault(kept, []).append((other, kind, also_from.get(other, [])))

    def drop(row: int) -> None:
        also_from.pop(row, None)
        members.pop(row, None)

    return supersession.supersede(order, timing, mark, drop)


def revision_copies(
    cands: Candidates,
    timing: recency.Timing,
    replaced: list[tuple[int, str, list[Copy]]] | None,
) -> list[Copy]:
    """The ``also_from`` entries of the revisions a row replaced: each, then its own
    copies, all marked with its kind (``revision``: older; ``later_revision``: dated
    after ``as_of``) and its time."""
    out: list[Copy] = []
    for other, kind, copies in replaced or ():
        time = timing.shown(other)
        out.append(copy_of(cands, other, kind)._replace(time=time))
        out.extend(c._replace(copy=kind, time=time) for c in copies)
    return out


def canonical_copies(
    cands: Candidates,
    also_from: dict[int, list[Copy]],
    members: Members,
    canonical: Sequence[str],
) -> dict[int, int]:
    """``{kept: shown}`` for each kept candidate that a canonical source's copy shows
    instead (the first source of ``canonical`` with a copy; the kept one's own source
    when it comes first); ``also_from`` then names the kept one in the shown copy's
    entry, first (it is the best-ranked copy)."""
    preference = {sid: at for at, sid in enumerate(canonical)}
    late = len(canonical)

    def rank_of(i: int) -> int:
        sid = cands.source_ids[cands.source_index[i]]
        return preference.get(sid.lower(), late) if isinstance(sid, str) else late

    shown: dict[int, int] = {}
    for kept, copies in members.items():
        best = min(range(len(copies)), key=lambda k: rank_of(copies[k]))
        if rank_of(copies[best]) >= rank_of(kept):
            continue
        shown[kept] = copies[best]
        entries = also_from[kept]
        replaced = copy_of(cands, kept, entries[best].copy)
        also_from[kept] = [replaced, *entries[:best], *entries[best + 1 :]]
    members.shown = shown
    return shown
