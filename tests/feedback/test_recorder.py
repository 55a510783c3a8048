"""The writer off the request path: a full buffer drops and counts, never waits; a
failing sink loses its batch, counted and warned, and the writer goes on."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from structlog.testing import capture_logs

from nautilus_ranking.feedback.events import EVENTS, EventRecord
from nautilus_ranking.feedback.recorder import BUFFER_ITEMS, Recorder, SinkSettings
from nautilus_ranking.request.cursor_keys import CursorKeys

KEYS = CursorKeys(b"k" * 32)


def _config(tmp: Path) -> SinkSettings:
    return SinkSettings(tmp / "feedback", 1 << 20, 30, None, plain=False)


def _event(n: int) -> list[EventRecord]:
    return [
        {
            "application": "nautilus-ranking",
            "event_id": f"e{n}",
            "action_name": "used",
            "query_id": "q",
            "client_id": "anonymous",
            "timestamp": "2026-01-01T00:00:00.000Z",
            "message_type": "feedback",
            "event_attributes": {},
        }
    ]


class HeldSink:
    """A sink that holds the writer until the test lets it go, then keeps each batch."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.go = threading.Event()
        self.written: list[dict[str, Any]] = []

    def write(self, family: str, records: list[dict[str, Any]]) -> None:
        self.entered.set()
        self.go.wait()
        self.written.extend(records)

    def close(self) -> None:
        return None


class BrokenSink:
    def __init__(self) -> None:
        self.calls = 0

    def write(self, family: str, records: list[dict[str, Any]]) -> None:
        self.calls += 1
        raise OSError(28, "No space left on device")

    def close(self) -> None:
        return None


def test_a_full_buffer_drops_and_counts_without_waiting(tmp_path: Path) -> None:
    sink = HeldSink()
    recorder = Recorder(_config(tmp_path), KEYS, [sink])
    assert recorder.submit(_event(0))
    assert sink.entered.wait(10)  # the writer holds item 0: the buffer is empty
    with capture_logs() as logs:
        accepted = [recorder.submit(_event(n)) for n in range(1, BUFFER_ITEMS + 11)]
    assert accepted.count(True) == BUFFER_ITEMS and accepted.count(False) == 10
    assert recorder.dropped == {"buffer_full": 10}
    warned = [e for e in logs if e["event"] == "feedback_records_dropped"]
    assert [e["dropped"] for e in warned] == [1, 2, 4, 8]  # 1, 2, 4, 8 …: never a flood
    assert warned[0]["reason"] == "buffer_full"
    sink.go.set()
    assert recorder.flush(30)
    assert len(sink.written) == BUFFER_ITEMS + 1


def test_a_failing_sink_loses_its_batch_and_the_others_are_written(tmp_path: Path) -> None:
    broken, held = BrokenSink(), HeldSink()
    held.go.set()
    recorder = Recorder(_config(tmp_path), KEYS, [broken, held])
    with capture_logs() as logs:
        for n in range(5):
            recorder.submit(_event(n))
        assert recorder.flush(30)
    assert broken.calls >= 1
    assert recorder.dropped["BrokenSink_failed"] == 5
    assert [r["event_id"] for r in held.written] == [f"e{n}" for n in range(5)]
    [first, *_] = [e for e in logs if e["event"] == "feedback_records_dropped"]
    assert "No space left" in first["error"]


def test_the_jsonl_sink_is_written_by_the_writer_thread(tmp_path: Path) -> None:
    recorder = Recorder(_config(tmp_path), KEYS)
    recorder.submit(_event(1))
    assert recorder.flush(30)
    [events] = (tmp_path / "feedback").glob(f"{EVENTS}-*.jsonl")
    assert '"event_id":"e1"' in events.read_text()
