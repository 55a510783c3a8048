"""Pagination: ask page after page until the source's row limit is filled.

``by: offset`` sends ``{{offset}}`` (hits returned so far) and ``{{size}}``; ``by: page``
sends ``{{page}}`` (from ``first_page``) with a constant ``{{size}}`` (the page size);
``by: search_after`` sends ``{{search_after}}``, the value at ``after`` of the last hit
of the previous page (Elasticsearch's ``sort`` array, on a tiebreaker field the operator
names). ``by: none`` asks once for the whole limit. A walk stops when the limit is
filled, a page comes back short, the cursor is missing, or ``max_pages`` were asked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from nautilus_ranking.sources.http.mapping import Getter, compile_path

PagingKind = Literal["none", "offset", "page", "search_after"]
#: The placeholder each way of paging needs in the template.
NEEDS: dict[str, str] = {"offset": "offset", "page": "page", "search_after": "search_after"}


@dataclass(frozen=True)
class Paging:
    by: PagingKind = "none"
    page_size: int | None = None  # None: the whole limit in one page
    max_pages: int = 10
    first_page: int = 1
    after: str | None = None  # by search_after: the path of a hit's cursor value

    def __post_init__(self) -> None:
        getter = None
        if self.by == "search_after":
            getter = compile_path(self.after or "sort", "paging.after")
        object.__setattr__(self, "_after", getter)

    def walk(self, wanted: int) -> PageWalk:
        return PageWalk(self, wanted)


class PageWalk:
    """One search's pages: the values of each request, and whether to ask for another."""

    def __init__(self, paging: Paging, wanted: int) -> None:
        self.paging = paging
        self.wanted = wanted
        self.size = wanted if paging.by == "none" else min(paging.page_size or wanted, wanted)
        self.asked = 0  # pages asked
        self.returned = 0  # hits returned (mapped or dropped)
        self.cursor: Any = None
        self._after: Getter | None = paging.__dict__["_after"]

    def values(self, query: str) -> dict[str, Any]:
        """The placeholders' values for the next page."""
        p = self.paging
        size = self.size
        if p.by == "offset":
            size = min(self.size, self.wanted - self.returned)
        values: dict[str, Any] = {
            "query": query,
            "size": size,
            "offset": self.returned,
            "page": p.first_page + self.asked,
        }
        if self.cursor is not None:
            values["search_after"] = self.cursor
        return values

    def advance(self, hits: list[Any], rows_so_far: int, asked_size: int) -> bool:
        """Count a page of raw ``hits``; whether another page should be asked for."""
        self.asked += 1
        self.returned += len(hits)
        p = self.paging
        if p.by == "none" or rows_so_far >= self.wanted or self.asked >= p.max_pages:
            return False
        if len(hits) < asked_size or not hits:
            return False
        if p.by == "search_after":
            last = next((h for h in reversed(hits) if h is not None), None)
            self.cursor = None if last is None or self._after is None else self._after(last)
            return self.cursor is not None
        return True
