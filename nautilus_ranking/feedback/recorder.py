"""Writing the feedback log off the request path: a bounded buffer, one writer thread.

A request only puts what it handed over (or the events a caller reported) in a
bounded queue and returns; the process's writer thread wakes once a second (sooner
when the queue is half full), builds the records and writes them to the sinks in
batches, so it seldom holds the interpreter while a request runs. When the queue is
full the item is dropped and counted, never waited for; a sink that fails (a full
disk, OpenSearch down) loses its batch, counted the same way, and OpenSearch is left
alone for a while after a failure. Either way a structured warning
(``feedback_records_dropped``, at the 1st, 2nd, 4th, 8th … loss of each reason) and
the ``nautilus_feedback_dropped_total`` counter (where the server's metrics are) say
so. Writing never slows or fails a request.
"""

from __future__ import annotations

import atexit
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nautilus_ranking.feedback.cites import Signer
from nautilus_ranking.feedback.events import EVENTS, FEEDBACK_FOLDER, QUERIES, EventRecord
from nautilus_ranking.feedback.records import HandedOver, impressions, query_record
from nautilus_ranking.feedback.sinks import JsonlSink, OpenSearchSink, Sink
from nautilus_ranking.log import get_logger
from nautilus_ranking.settings.model import NautilusSettings

logger = get_logger("nautilus_ranking.feedback")

#: Items (answers or reported batches) the buffer holds before dropping.
BUFFER_ITEMS = 2048
#: Items the writer takes at once into one write per sink.
_BATCH_ITEMS = 256
#: How often the writer wakes to write what was queued (seconds).
FLUSH_INTERVAL_S = 1.0
#: How long a failed OpenSearch sink is left alone before it is tried again.
_RETRY_AFTER_S = 30.0
#: What a drop is reported to besides the log: ``(reason, count)`` (the server's metrics).
DROP_LISTENERS: list[Callable[[str, int], None]] = []


@dataclass(frozen=True)
class SinkSettings:
    """What the writer needs of the settings (one writer per distinct value)."""

    folder: Path
    max_bytes: int
    retention_days: int
    opensearch_url: str | None
    plain: bool

    @classmethod
    def of(cls, settings: NautilusSettings) -> SinkSettings:
        return cls(
            settings.data_dir.expanduser() / FEEDBACK_FOLDER,
            settings.feedback_max_mb * 1024 * 1024,
            settings.feedback_retention_days,
            settings.feedback_opensearch_url,
            settings.feedback_text,
        )


class Recorder:
    """One process's buffer and writer thread for one set of sink settings."""

    def __init__(self, config: SinkSettings, keys: Signer, sinks: list[Sink] | None = None) -> None:
        self.config = config
        self.keys = keys
        self.sinks: list[Sink] = sinks if sinks is not None else _sinks(config)
        self.buffer: queue.Queue[HandedOver | list[EventRecord]] = queue.Queue(BUFFER_ITEMS)
        self.dropped: dict[str, int] = {}
        self._resting: dict[int, float] = {}  # a failed sink's index → when to try again
        self._wake = threading.Event()
        self._idle = threading.Condition()
        self._counting = threading.Lock()
        self._pending = 0
        self._thread = threading.Thread(target=self._run, name="nautilus-feedback", daemon=True)
        self._thread.start()

    def submit(self, item: HandedOver | list[EventRecord]) -> bool:
        """Queue ``item`` for writing; False (dropped, counted) when the buffer is full."""
        with self._idle:
            self._pending += 1
        try:
            self.buffer.put_nowait(item)
        except queue.Full:
            self._done(1)
            self._drop("buffer_full", 1)
            return False
        if 2 * self.buffer.qsize() >= self.buffer.maxsize:
            self._wake.set()
        return True

    def flush(self, timeout_s: float) -> bool:
        """Wait until everything queued so far is written (or dropped); False on timeout."""
        self._wake.set()
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout_s)

    def _run(self) -> None:
        while True:
            # a batch a second (or sooner when the buffer is half full or a flush asks):
            # a writer woken for each answer would take the interpreter from requests
            self._wake.wait(FLUSH_INTERVAL_S)
            self._wake.clear()
            while items := self._take():
                try:
                    self._write(items)
                except Exception as exc:  # never let the writer die: a lost batch is counted
                    self._drop("record_failed", len(items), exc)
                finally:
                    self._done(len(items))

    def _take(self) -> list[HandedOver | list[EventRecord]]:
        items: list[HandedOver | list[EventRecord]] = []
        while len(items) < _BATCH_ITEMS:
            try:
                items.append(self.buffer.get_nowait())
            except queue.Empty:
                break
        return items

    def _write(self, items: list[HandedOver | list[EventRecord]]) -> None:
        queries: list[dict[str, Any]] = []
        events: list[dict[str, Any]] = []
        for item in items:
            if isinstance(item, HandedOver):
                queries.append(dict(query_record(item, self.keys, self.config.plain)))
                events.extend(dict(e) for e in impressions(item))
            else:
                events.extend(dict(e) for e in item)
        for index, sink in enumerate(self.sinks):
            if time.monotonic() < self._resting.get(index, 0.0):
                self._drop(f"{type(sink).__name__}_resting", len(queries) + len(events))
                continue
            try:
                for family, records in ((QUERIES, queries), (EVENTS, events)):
                    if records:
                        sink.write(family, records)
            except Exception as exc:
                if isinstance(sink, OpenSearchSink):
                    self._resting[index] = time.monotonic() + _RETRY_AFTER_S
                self._drop(f"{type(sink).__name__}_failed", len(queries) + len(events), exc)

    def _done(self, count: int) -> None:
        with self._idle:
            self._pending -= count
            if self._pending == 0:
                self._idle.notify_all()

    def _drop(self, reason: str, count: int, exc: BaseException | None = None) -> None:
        with self._counting:
            before = self.dropped.get(reason, 0)
            total = before + count
            self.dropped[reason] = total
        for listener in DROP_LISTENERS:
            listener(reason, count)
        if before == 0 or total.bit_length() > before.bit_length():  # 1, 2, 4, 8 …
            logger.warning(
                "feedback_records_dropped",
                reason=reason,
                dropped=total,
                error=f"{type(exc).__name__}: {exc}" if exc is not None else None,
                effect="these feedback records are lost; answers are unaffected",
            )

    def close(self, timeout_s: float = 2.0) -> None:
        self.flush(timeout_s)
        for sink in self.sinks:
            sink.close()


def _sinks(config: SinkSettings) -> list[Sink]:
    sinks: list[Sink] = [JsonlSink(config.folder, config.max_bytes, config.retention_days)]
    if config.opensearch_url is not None:
        sinks.append(OpenSearchSink(config.opensearch_url))
    return sinks


_RECORDERS: dict[SinkSettings, Recorder] = {}
#: Each settings object's recorder (the object kept, so its id is not reused).
_BY_SETTINGS: dict[int, tuple[NautilusSettings, Recorder]] = {}
_LOCK = threading.Lock()


def recorder_for(settings: NautilusSettings, keys: Signer) -> Recorder:
    """The process's recorder for ``settings``' sinks (made, and its thread started,
    on first use; closed when the process exits)."""
    known = _BY_SETTINGS.get(id(settings))
    if known is not None and known[0] is settings:
        return known[1]
    config = SinkSettings.of(settings)
    with _LOCK:
        found = _RECORDERS.get(config)
        if found is None:
            found = _RECORDERS[config] = Recorder(config, keys)
            if len(_RECORDERS) == 1:
                atexit.register(_close_all)
        if len(_BY_SETTINGS) > 64:
            _BY_SETTINGS.clear()
        _BY_SETTINGS[id(settings)] = (settings, found)
        return found


def _close_all() -> None:
    for recorder in list(_RECORDERS.values()):
        recorder.close()


def record_answer(settings: NautilusSettings, keys: Signer, handed: HandedOver) -> None:
    """Queue one answer's query record and impressions (never raises: a request is
    never failed by its log)."""
    try:
        recorder_for(settings, keys).submit(handed)
    except Exception as exc:  # a recorder that cannot even start: counted, not raised
        logger.warning("feedback_records_dropped", reason="recorder_failed", error=str(exc))


def record_events(settings: NautilusSettings, keys: Signer, events: list[EventRecord]) -> bool:
    """Queue reported events; False when they were dropped."""
    try:
        return recorder_for(settings, keys).submit(events)
    except Exception as exc:
        logger.warning("feedback_records_dropped", reason="recorder_failed", error=str(exc))
        return False
