"""What an answer says of the per-source cap and of collapsed copies: a page where the cap
was relaxed to fill it says so (text, JSON and MCP alike), and the plain table marks a
row that absorbed copies, within 120 columns."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_process import run_nautilus
from fakes import FakeSource, write_jsonl
from plain_environment import plain_environment

from nautilus_ranking.broker import Broker
from nautilus_ranking.request.answer import Answer, answer_sync
from nautilus_ranking.request.engine import Engine
from nautilus_ranking.request.model import parse_request


def flood() -> Broker:
    """Three sources: ``tickets`` floods with four rows, ``wiki`` and ``runbooks`` have one."""
    return Broker(
        [
            FakeSource(
                "tickets", [{"id": f"T{i}", "text": f"disk full on db{i}"} for i in range(4)]
            ),
            FakeSource("wiki", [{"id": "W1", "text": "disk full: grow the volume"}]),
            FakeSource("runbooks", [{"id": "R1", "text": "disk full runbook"}]),
        ]
    )


def ask(body: dict[str, Any]) -> Answer:
    with flood() as broker:
        return answer_sync(Engine.of(broker), parse_request({"query": "disk full", **body}))


def test_a_page_filled_over_the_cap_says_so_in_json_and_mcp() -> None:
    """Cap 1, a page of 6 and 6 rows of 3 sources: after one row each only tickets has
    rows left, so the page takes three more of them — the cap relaxed, and said."""
    answer = ask({"top_k": 6, "max_per_source": 1})
    out = answer.to_json()
    assert [e["source_id"] for e in out["ranking"]].count("tickets") == 4
    assert out["per_source_cap"] == {
        "max_per_source": 1,
        "relaxed": True,
        "rows_over": {"tickets": 3},
    }
    pytest.importorskip("mcp")
    from nautilus_ranking.mcp.results import search_content, search_text

    content = search_content(answer)
    assert content["per_source_cap"] == out["per_source_cap"]
    assert "relaxed" in search_text(content)


def test_a_page_within_the_cap_says_it_held_and_no_cap_says_nothing() -> None:
    held = ask({"top_k": 3, "max_per_source": 1}).to_json()
    assert held["per_source_cap"] == {"max_per_source": 1, "relaxed": False, "rows_over": {}}
    assert "per_source_cap" not in ask({"top_k": 3}).to_json()


def run(config: Path, *args: str) -> str:
    env = plain_environment()
    env["NAUTILUS_DATA_DIR"] = str(config.parent / "data")
    env["NAUTILUS_CONFIG"] = str(config)
    done = run_nautilus("query", "disk full", *args, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout


def sources(tmp: Path) -> Path:
    """tickets floods; archive holds an exact copy of the first ticket; wiki a row."""
    ticket = {"id": "T0", "title": "disk full on the orders primary, writes failing for an hour"}
    tickets = [ticket] + [{"id": f"T{i}", "title": f"disk full on db{i}"} for i in range(1, 4)]
    seeds = {
        "tickets": write_jsonl(tmp / "tickets.jsonl", tickets),
        "archive": write_jsonl(tmp / "archive.jsonl", [ticket]),
        "wiki": write_jsonl(tmp / "wiki.jsonl", [{"id": "W1", "title": "disk full: grow it"}]),
    }
    text = "sources:\n" + "".join(
        f"  - id: {name}\n    type: sqlite_fts\n    path: demo/{name}.db\n"
        f"    seed: {seed}\n    columns: [title]\n"
        for name, seed in seeds.items()
    )
    path = tmp / "nautilus.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_plain_table_marks_a_row_that_absorbed_copies(tmp_path: Path) -> None:
    out = run(sources(tmp_path), "--top-k", "5")
    [line] = [line for line in out.splitlines() if "T0" in line]
    assert "(+1 copy)" in line
    assert "--explain" in out  # where the copies are named
    assert all(len(line) <= 120 for line in out.splitlines()), out


def test_the_text_says_when_the_cap_was_relaxed(tmp_path: Path) -> None:
    out = run(sources(tmp_path), "--top-k", "5", "--max-per-source", "1")
    [said] = [line for line in out.splitlines() if line.startswith("max_per_source")]
    assert "relaxed" in said and "tickets" in said
    assert all(len(line) <= 120 for line in out.splitlines()), out
    as_json = json.loads(run(sources(tmp_path), "--top-k", "5", "--max-per-source", "1", "--json"))
    assert as_json["per_source_cap"]["relaxed"] is True
