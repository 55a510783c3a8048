"""Recent requests' rankings by ``request_id``, bounded in memory: ``RankingStore``.

A long-running broker answers without end, and a ranking holds references to every
row it saw (each source's whole answer, so a verifier can recompute its hash), so the
store keeps at most the latest ``keep`` requests *and* at most ``max_bytes`` of them,
counted as the compact JSON of what each holds (:func:`kept_size`), least recently
filed first out. An answer larger than the whole bound is not kept (one warning, the
first time). ``NAUTILUS_UPSTREAM_RANKINGS_MAX_BYTES`` sets the bound (64 MiB by
default); ``keep=0`` or ``max_bytes=0`` keeps nothing (what a served broker does: its
ranked route reads the ranking from the request itself). Filed from the broker's loop,
read from any thread: one lock.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import Any

from nautilus_ranking.log import get_logger
from nautilus_ranking.upstream.outcome import RequestRanking

logger = get_logger("nautilus_ranking.upstream")

#: How many requests' rankings are kept by default.
DEFAULT_KEEP = 1024
#: How many bytes of rankings are kept by default (``NAUTILUS_UPSTREAM_RANKINGS_MAX_BYTES``).
DEFAULT_MAX_BYTES = 64 * 1024 * 1024


def _compact(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), default=str))


def kept_size(ranking: RequestRanking) -> int:
    """The bytes a ranking is counted as: the compact JSON of every row it holds (each
    source's answer: the rows handed over and the rows left out are among them) and of
    its scores (:meth:`RequestRanking.to_dict`)."""
    rows = sum(_compact(row) for rows in ranking.source_rows.values() for row in rows)
    if not ranking.source_rows:
        rows = sum(_compact(r.row) for r in ranking.ranking)
    return rows + _compact(ranking.to_dict())


class RankingStore:
    """The last ``keep`` rankings, within ``max_bytes``, by request id."""

    def __init__(self, keep: int = DEFAULT_KEEP, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        for name, value in (("keep", keep), ("max_bytes", max_bytes)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
        self.keep = keep
        self.max_bytes = max_bytes
        self._items: OrderedDict[str, tuple[RequestRanking, int]] = OrderedDict()
        self._bytes = 0
        self._warned = False
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        """Whether anything is kept at all."""
        return self.keep > 0 and self.max_bytes > 0

    def put(self, ranking: RequestRanking) -> None:
        if not self.enabled:
            return
        size = kept_size(ranking)
        if size > self.max_bytes:
            if not self._warned:
                self._warned = True
                logger.warning(
                    "upstream_ranking_not_kept",
                    request_id=ranking.request_id,
                    bytes=size,
                    max_bytes=self.max_bytes,
                    action="the answer is returned; its ranking is larger than "
                    "NAUTILUS_UPSTREAM_RANKINGS_MAX_BYTES and is not kept (this "
                    "warning is given once)",
                )
            return
        with self._lock:
            old = self._items.pop(ranking.request_id, None)
            if old is not None:
                self._bytes -= old[1]
            self._items[ranking.request_id] = (ranking, size)
            self._bytes += size
            while len(self._items) > self.keep or self._bytes > self.max_bytes:
                _, (_, freed) = self._items.popitem(last=False)
                self._bytes -= freed

    def get(self, request_id: str) -> RequestRanking | None:
        with self._lock:
            found = self._items.get(request_id)
        return found[0] if found is not None else None

    @property
    def bytes(self) -> int:
        """The bytes of the rankings kept now."""
        with self._lock:
            return self._bytes

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)
