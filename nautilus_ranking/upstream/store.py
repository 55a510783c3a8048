"""Recent requests' rankings by ``request_id``, bounded in memory: ``RankingStore``.

A long-running broker answers without end, and a ranking holds references to every
row it saw, so only the latest ``keep`` are kept (least recently filed first out).
Filed from the broker's loop, read from any thread: one lock.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from nautilus_ranking.upstream.outcome import RequestRanking

#: How many requests' rankings are kept by default.
DEFAULT_KEEP = 1024


class RankingStore:
    """The last ``keep`` rankings, by request id."""

    def __init__(self, keep: int = DEFAULT_KEEP) -> None:
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
            raise ValueError(f"keep must be an integer >= 1, got {keep!r}")
        self.keep = keep
        self._items: OrderedDict[str, RequestRanking] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, ranking: RequestRanking) -> None:
        with self._lock:
            self._items[ranking.request_id] = ranking
            self._items.move_to_end(ranking.request_id)
            while len(self._items) > self.keep:
                self._items.popitem(last=False)

    def get(self, request_id: str) -> RequestRanking | None:
        with self._lock:
            return self._items.get(request_id)

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)
