"""An answer made citable: its ranking id, and each row's position and ``cite``.

With ``NAUTILUS_FEEDBACK`` on, every way in renders these beside the rows — the JSON
answer's ranking entries, the MCP results, the retrievers' metadata — and never in
``data``: ``response_hash`` and the determinism promise cover the rest unchanged.
``position`` is a row's 1-based place in the list this answer handed over (after the
budget); each page starts at 1 and the page is in the handle.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from nautilus_ranking.feedback.cites import Cite, Signer, make_cite
from nautilus_ranking.feedback.identity import object_id
from nautilus_ranking.records import RankedRow


@dataclass(frozen=True)
class Citations:
    """One answer's ranking id and its rows' handles, in the order handed over."""

    ranking_id: str
    page: int
    client: str
    #: When the handles were made (Unix seconds).
    issued: int
    #: Each row's ``cite``; its position is its index + 1.
    cites: tuple[str, ...]

    def entry(self, index: int) -> dict[str, Any]:
        """What a row's entry gains: its position and its cite."""
        return {"position": index + 1, "cite": self.cites[index]}

    def add_to(self, entries: list[dict[str, Any]]) -> None:
        """Add :meth:`entry` to each of ``entries`` (the answer's rows, in order)."""
        for index, entry in enumerate(entries):
            entry.update(self.entry(index))


def cite_rows(
    keys: Signer,
    ranking_id: str,
    page: int,
    profile: str | None,
    client: str,
    rows: Sequence[RankedRow],
    issued: int,
) -> Citations:
    """The citations of the ``rows`` one answer handed over, made for ``client``."""
    cites = tuple(
        make_cite(
            keys,
            Cite(
                ranking_id,
                page,
                index + 1,
                row.source_id,
                object_id(row.row),
                profile,
                client,
                issued,
            ),
        )
        for index, row in enumerate(rows)
    )
    return Citations(ranking_id, page, client, issued, cites)
