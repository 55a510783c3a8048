"""Reading the feedback logs back: duplicates, uses, bad lines, config hashes."""

from __future__ import annotations

from pathlib import Path

from simulated_feedback import CONFIG_HASH, event, query_record, write_jsonl
from structlog.testing import capture_logs

from nautilus_ranking.proposal.logs import read_logs

COMPONENTS = {"score": 0.02, "relevance": 0.02, "boost_bump": 0.0}
HITS = [("wiki", "1"), ("tickets", "T-7")]


def _impressions(qid: str = "q1") -> list[dict[str, object]]:
    return [
        event(f"{qid}-i{k}", "impression", qid, s, i, k, COMPONENTS)
        for k, (s, i) in enumerate(HITS, start=1)
    ]


def test_a_repeated_event_id_counts_once(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "ubi_queries-1.jsonl", [query_record("q1", HITS)])
    used = event("e-1", "used", "q1", "wiki", "1", 1)
    write_jsonl(tmp_path / "ubi_events-1.jsonl", [*_impressions(), used])
    write_jsonl(tmp_path / "ubi_events-2.jsonl", [used, _impressions()[0]])  # sent twice
    log = read_logs(tmp_path)
    (answer,) = log.answers
    assert log.duplicates == 2
    assert [s.position for s in answer.shown] == [1, 2]
    assert answer.used == {1}


def test_an_impression_is_never_a_use(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "ubi_queries-1.jsonl", [query_record("q1", HITS)])
    rejected = event("r-1", "rejected", "q1", "tickets", "T-7", 2)
    write_jsonl(tmp_path / "ubi_events-1.jsonl", [*_impressions(), rejected])
    (answer,) = read_logs(tmp_path).answers
    assert answer.used == set()
    assert len(answer.shown) == 2


def test_each_use_action_counts(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "ubi_queries-1.jsonl", [query_record("q1", HITS)])
    uses = [
        event("c-1", "cited", "q1", "wiki", "1", 1),
        event("f-2", "fetched", "q1", "tickets", "T-7", 2),
    ]
    write_jsonl(tmp_path / "ubi_events-1.jsonl", [*_impressions(), *uses])
    (answer,) = read_logs(tmp_path).answers
    assert answer.used == {1, 2}


def test_malformed_lines_are_skipped_with_a_warning(tmp_path: Path) -> None:
    write_jsonl(
        tmp_path / "ubi_queries-1.jsonl",
        ["{not json", '"a string"', {"query_id": "q9"}, query_record("q1", HITS)],
    )
    no_position = event("u-x", "used", "q1", "wiki", "1", 1)
    no_position["event_attributes"] = {"object": {"object_id": "1"}}
    write_jsonl(
        tmp_path / "ubi_events-1.jsonl",
        [*_impressions(), "\x00\xff garbage", {"action_name": "used"}, no_position],
    )
    with capture_logs() as logs:
        log = read_logs(tmp_path)
    warned = [e for e in logs if e["event"] == "feedback_log_line_skipped"]
    assert len(warned) == 6
    assert {e["file"] for e in warned} == {"ubi_queries-1.jsonl", "ubi_events-1.jsonl"}
    assert all(isinstance(e["line"], int) and e["reason"] for e in warned)
    (answer,) = log.answers  # the good lines are all read
    assert len(answer.shown) == 2 and answer.used == set()
    assert sum(log.skipped.values()) == 6


def test_answers_are_kept_apart_by_config_hash(tmp_path: Path) -> None:
    records = [
        query_record("q1", HITS),
        query_record("q2", HITS, config_hash="ffffffffffffffff"),
    ]
    write_jsonl(tmp_path / "ubi_queries-1.jsonl", records)
    write_jsonl(tmp_path / "ubi_events-1.jsonl", [*_impressions("q1"), *_impressions("q2")])
    log = read_logs(tmp_path)
    assert [a.query_id for a in log.under(CONFIG_HASH)] == ["q1"]
    assert dict(log.hashes) == {CONFIG_HASH: 1, "ffffffffffffffff": 1}


def test_each_page_is_a_list_of_its_own(tmp_path: Path) -> None:
    """Page 2 of one ranking starts again at position 1: a use names its page."""
    page2 = [("wiki", "3"), ("tickets", "T-9")]
    write_jsonl(
        tmp_path / "ubi_queries-1.jsonl",
        [query_record("q1", HITS), query_record("q1", page2, page=2)],
    )
    shown2 = [
        event(f"p2-i{k}", "impression", "q1", s, i, k, COMPONENTS, page=2)
        for k, (s, i) in enumerate(page2, start=1)
    ]
    used = event("u-p2", "used", "q1", "wiki", "3", 1, page=2)
    write_jsonl(tmp_path / "ubi_events-1.jsonl", [*_impressions(), *shown2, used])
    first, second = sorted(read_logs(tmp_path).answers, key=lambda a: a.page)
    assert [s.object_id for s in first.shown] == ["1", "T-7"] and first.used == set()
    assert [s.object_id for s in second.shown] == ["3", "T-9"] and second.used == {1}
