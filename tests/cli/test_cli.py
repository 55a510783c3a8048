"""The `nautilus-ranking` command, run as a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from cli_process import NAUTILUS, run_nautilus

QUERY = "orders database disk full"


def test_config_json_with_nothing_set_shows_every_ranking_knob_unset() -> None:
    result = run_nautilus("config", "--json")
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    settings = out["settings"]
    assert settings["NAUTILUS_RANKING_TOP_K"] is None
    assert settings["NAUTILUS_RANKING_IDF"] is False
    assert settings["NAUTILUS_SOURCE_BOOSTS"] == {}
    assert settings["NAUTILUS_RANKING_MAX_CANDIDATES"] is None
    assert settings["NAUTILUS_RANKING_DEDUP_KEY"] is None
    assert out["ranking_enabled"] is False and out["skipped"] == []


def test_config_strict_rejects_a_bad_boost_naming_entry_level_and_choices() -> None:
    result = run_nautilus("config", "--strict", env={"NAUTILUS_SOURCE_BOOSTS": "graph:hgih"})
    assert result.returncode == 1
    assert (
        "NAUTILUS_SOURCE_BOOSTS: 'graph:hgih': unknown level 'hgih' for 'graph' "
        "(valid: -high, -medium, -low, low, medium, high)"
    ) in result.stderr
    assert "Traceback" not in result.stderr


def test_config_strict_passes_a_good_manifest() -> None:
    result = run_nautilus(
        "config",
        "--strict",
        env={"NAUTILUS_SOURCE_BOOSTS": "graph:high", "NAUTILUS_RANKING_TOP_K": "5"},
    )
    assert result.returncode == 0, result.stderr
    assert "graph:high" in result.stdout and "skipped: none" in result.stdout


def test_config_strict_checks_boosted_ids_against_the_sources() -> None:
    result = run_nautilus("config", "--strict", env={"NAUTILUS_SOURCE_BOOSTS": "grpah:high"})
    assert result.returncode == 1
    assert "no source has id 'grpah'" in result.stderr


def test_config_without_strict_lists_skipped_entries_and_exits_0() -> None:
    result = run_nautilus(
        "config", env={"NAUTILUS_SOURCE_BOOSTS": ":high,sql:low", "NAUTILUS_RANKING_TOP_K": "ten"}
    )
    assert result.returncode == 0
    assert "':high': empty source id" in result.stdout
    assert "NAUTILUS_RANKING_TOP_K: 'ten'" in result.stdout


def test_strict_env_makes_a_bad_value_a_startup_error() -> None:
    result = run_nautilus(
        "query", QUERY, env={"NAUTILUS_CONFIG_STRICT": "true", "NAUTILUS_RANKING_TOP_K": "-1"}
    )
    assert result.returncode == 1
    assert "NAUTILUS_RANKING_TOP_K" in result.stderr and "Traceback" not in result.stderr
    assert result.stdout == ""


def test_query_json_is_one_object_on_stdout_and_logs_go_to_stderr() -> None:
    result = run_nautilus("query", QUERY, "--json", env={"NAUTILUS_LOG_FORMAT": "json"})
    assert result.returncode == 0, result.stderr
    response = json.loads(result.stdout)
    assert set(response) == {
        "request_id",
        "data",
        "ranking",
        "sources_queried",
        "sources_errored",
        "duration_ms",
        "response_hash",
        "source_response_hashes",
        "sources_warned",
        "ranking_enabled",
        "synthesizer",
        "vectors_included",
        "next_cursor",
    }
    assert response["next_cursor"] is None  # a passthrough: no top K to page past
    assert response["sources_queried"] == ["tickets", "graph", "runbooks", "postmortems"]
    for line in result.stderr.strip().splitlines():
        assert "event" in json.loads(line)  # every log line is a JSON object


def test_top_k_and_boost_from_the_environment_change_the_ranking() -> None:
    """The score components come with --explain (an entry without it is lean)."""
    plain = json.loads(
        run_nautilus(
            "query", QUERY, "--json", "--explain", env={"NAUTILUS_RANKING_TOP_K": "5"}
        ).stdout
    )
    boosted = json.loads(
        run_nautilus(
            "query",
            QUERY,
            "--json",
            "--explain",
            env={"NAUTILUS_RANKING_TOP_K": "5", "NAUTILUS_SOURCE_BOOSTS": "graph:high"},
        ).stdout
    )
    assert len(plain["ranking"]) == len(boosted["ranking"]) == 5
    graph_plain = [r for r in plain["ranking"] if r["source_id"] == "graph"]
    graph_boosted = [r for r in boosted["ranking"] if r["source_id"] == "graph"]
    assert len(graph_boosted) >= len(graph_plain)
    # a share of the batch's spread, at most a quarter of one vote
    assert all(0.0 <= r["boost_bump"] <= 0.25 / 61 for r in graph_boosted)
    assert any(r["boost_bump"] > 0 for r in graph_boosted)
    # the place each row had without the boost, beside the one it has
    assert all(r["unboosted_rank"] >= 1 for r in boosted["ranking"])
    assert all(r["unboosted_rank"] == 0 for r in plain["ranking"])  # no boost: none
    assert {r["source_id"] for r in boosted["ranking"]} - {"graph"}  # others still there
    for r in boosted["ranking"]:
        assert r["score"] == pytest.approx(
            r["content"] + r["evidence"] + r["unranked_vote"] + r["boost_bump"]
        )


def test_cli_flags_override_the_environment() -> None:
    result = run_nautilus(
        "query",
        QUERY,
        "--json",
        "--explain",
        "--top-k",
        "3",
        "--boost",
        "runbooks:low",
        env={"NAUTILUS_RANKING_TOP_K": "9", "NAUTILUS_SOURCE_BOOSTS": "graph:high"},
    )
    response = json.loads(result.stdout)
    assert len(response["ranking"]) == 3
    assert all(r["boost_bump"] == 0.0 for r in response["ranking"] if r["source_id"] != "runbooks")


def test_a_demotion_from_the_command_line_lowers_its_source() -> None:
    plain = json.loads(run_nautilus("query", QUERY, "--json", "--explain", "--top-k", "10").stdout)
    demoted = json.loads(
        run_nautilus(
            "query", QUERY, "--json", "--explain", "--top-k", "10", "--boost", "graph:-high"
        ).stdout
    )
    graph = [r for r in demoted["ranking"] if r["source_id"] == "graph"]
    assert all(r["boost_bump"] <= 0.0 for r in graph) and any(r["boost_bump"] < 0 for r in graph)
    assert all(r["boost_bump"] == 0.0 for r in demoted["ranking"] if r["source_id"] != "graph")
    assert sum(r["source_id"] == "graph" for r in demoted["ranking"]) <= sum(
        r["source_id"] == "graph" for r in plain["ranking"]
    )
    # a demoted row never moves up
    assert all(r["rank"] >= r["unboosted_rank"] for r in graph)
    bad = run_nautilus("query", QUERY, "--boost", "graph:--high")
    assert bad.returncode != 0 and "unknown level '--high'" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_explain_shows_the_place_without_the_boost() -> None:
    result = run_nautilus("query", QUERY, "--top-k", "6", "--explain", "--boost", "graph:high")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    head = next(line for line in lines if "relev." in line)
    assert "unb." in head.split()
    column = head.split().index("unb.")
    rows = lines[lines.index(head) + 1 : lines.index(head) + 7]
    assert all(int(line.split()[column]) >= 1 for line in rows)  # a place on every row


def test_a_high_boost_is_felt_on_the_demo() -> None:
    """The runbook that answers the query sits at rank 9 behind graph rows sharing only
    the service's name; runbooks:high brings it up, the exact ticket stays first."""
    query = "orders-db disk full"
    plain = json.loads(run_nautilus("query", query, "--json", "--explain", "--top-k", "10").stdout)[
        "ranking"
    ]
    boosted = json.loads(
        run_nautilus(
            "query", query, "--json", "--explain", "--top-k", "10", "--boost", "runbooks:high"
        ).stdout
    )["ranking"]
    [runbook] = [r for r in plain if r["id"] == "RB-01"]
    [lifted] = [r for r in boosted if r["id"] == "RB-01"]
    assert runbook["rank"] == 9 and lifted["unboosted_rank"] == 9
    assert lifted["rank"] <= 5
    assert boosted[0]["id"] == plain[0]["id"] == "INC-1043"


def test_query_table_and_explain() -> None:
    result = run_nautilus("query", QUERY, "--top-k", "4", "--explain", "--idf")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"query: {QUERY}"
    assert "sim" in lines[2] and "idf" in lines[2] and "relev." in lines[2]
    assert "stage1" not in lines[2]  # with --wide
    assert [line.split()[0] for line in lines[3:7]] == ["1", "2", "3", "4"]
    at = next(i for i, line in enumerate(lines) if line.startswith("response_hash: sha256:"))
    assert lines[at + 1].startswith("confidence: ") and " that one of the top 10" in lines[at + 1]
    assert lines[at + 2].startswith("confidence signals: top_similarity ")
    assert lines[-1].startswith("more rows past these 4; next: nautilus-ranking query ")
    # the table, its legend and the confidence fit a 120-column terminal; what "clearly
    # better" means
    assert max(len(line) for line in lines[:-1]) <= 120
    legend = " ".join(" ".join(lines[8:at]).split())
    assert "leads its own by less than their bumps differ" in legend
    assert "so it can lead with a lower sim" in legend
    wide = run_nautilus("query", QUERY, "--top-k", "4", "--explain", "--idf", "--wide").stdout
    head = wide.splitlines()[2]
    assert "stage1" in head and "c.rank" in head and "unrank." in head
    assert max(len(line) for line in wide.splitlines()) > 120


def test_a_failing_source_is_listed_while_the_others_answer(tmp_path: Path) -> None:
    (tmp_path / "ok.jsonl").write_text('{"id": "a", "title": "disk full"}\n', encoding="utf-8")
    config = tmp_path / "nautilus.yaml"
    config.write_text(
        """
sources:
  - {id: ok, type: sqlite_table, path: ok.db, seed: ok.jsonl, table: t, search_columns: [title]}
  - {id: broken, type: sqlite_fts, path: notes.txt, seed: ok.jsonl, columns: [title]}
""",
        encoding="utf-8",
    )
    data = Path(os.environ["NAUTILUS_DATA_DIR"])
    data.mkdir(parents=True, exist_ok=True)
    (data / "notes.txt").write_text("someone else's file\n", encoding="utf-8")
    result = run_nautilus("query", "disk", "--config", str(config), "--top-k", "5")
    assert result.returncode == 0, result.stderr
    assert "error: broken: ForeignFileError: refusing to replace" in result.stdout
    assert "ok" in result.stdout and "disk full" in result.stdout
    assert (data / "notes.txt").read_text(encoding="utf-8") == "someone else's file\n"


@pytest.mark.parametrize(
    ("args", "env", "code", "message"),
    [
        (["query", "x", "--top-k", "abc"], {}, 2, "argument --top-k: 'abc' is not an integer >= 1"),
        (["query", "x", "--top-k", "0"], {}, 2, "argument --top-k: '0' is not an integer >= 1"),
        (
            ["query", "x"],
            {"NAUTILUS_CONFIG": "/nonexistent/nautilus.yaml"},
            1,
            "cannot read sources config",
        ),
        (["query", "x"], {"NAUTILUS_RANKING_IDF": "perhaps"}, 0, "config_value_skipped"),
        (
            ["query", "x", "--boost", "faqs:hgih"],
            {},
            2,
            "argument --boost: 'faqs:hgih': unknown level 'hgih' for 'faqs' "
            "(valid levels: -high, -medium, -low, low, ",
        ),
        (["bogus"], {}, 2, "invalid choice"),
        ([], {}, 2, "required"),
    ],
)
def test_no_input_gives_a_traceback(
    args: list[str], env: dict[str, str], code: int, message: str
) -> None:
    result = run_nautilus(*args, env=env)
    assert result.returncode == code
    assert message in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


def test_demo_prints_passthrough_beside_ranked() -> None:
    result = run_nautilus("demo")
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("query: ") == 3
    assert "passthrough" in result.stdout and "ranked (top 8, IDF on)" in result.stdout
    assert "INC-1043" in result.stdout


def test_demo_says_which_embedder_ranked_its_column() -> None:
    """It ranked by words while the header of `query` said the model ranks by default,
    and said neither: it names its embedder, and the one `query` uses when another."""
    same = run_nautilus("demo", "--top-k", "2")  # the suite's NAUTILUS_EMBEDDER=hashing
    assert same.returncode == 0, same.stderr
    assert same.stdout.splitlines()[1] == "ranked by the hashing embedder"
    other = run_nautilus("demo", "--top-k", "2", env={"NAUTILUS_EMBEDDER": "noop"})
    assert other.returncode == 0, other.stderr
    assert other.stdout.splitlines()[1] == (
        "ranked by the hashing embedder; nautilus-ranking query ranks with noop (NAUTILUS_EMBEDDER)"
    )


def test_log_format_and_level_are_honoured() -> None:
    bad = {"NAUTILUS_RANKING_IDF": "perhaps"}
    console = run_nautilus("config", env={**bad, "NAUTILUS_LOG_FORMAT": "console"})
    assert "config_value_skipped" in console.stderr
    assert not console.stderr.lstrip().startswith("{")  # key=value lines, not JSON
    as_json = run_nautilus("config", env={**bad, "NAUTILUS_LOG_FORMAT": "json"})
    event = json.loads(as_json.stderr.strip().splitlines()[0])
    assert event["event"] == "config_value_skipped" and event["level"] == "warning"
    quiet = run_nautilus("config", env={**bad, "NAUTILUS_LOG_LEVEL": "error"})
    assert quiet.stderr == "" and "NAUTILUS_RANKING_IDF" in quiet.stdout


def test_a_reader_that_leaves_early_is_not_an_error(tmp_path: Path) -> None:
    """``nautilus-ranking query … | head``: the pipe closes under an answer longer than the pipe's
    buffer; exit 0, quietly (it was 'unexpected BrokenPipeError', exit 1)."""
    rows = [{"id": f"r{i}", "title": f"disk full {i} " + "x" * 300} for i in range(600)]
    (tmp_path / "big.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = tmp_path / "nautilus.yaml"
    config.write_text(
        "limit: 1000\nsources:\n  - {id: big, type: sqlite_table, path: big.db, "
        "seed: big.jsonl, table: t, search_columns: [title]}\n",
        encoding="utf-8",
    )
    process = subprocess.Popen(
        [NAUTILUS, "query", "disk", "--config", str(config), "--top-k", "600", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    assert process.stdout.read(10)
    process.stdout.close()
    errors = process.stderr.read().decode()
    process.stderr.close()
    assert process.wait(timeout=120) == 0, errors
    assert "BrokenPipe" not in errors and "Traceback" not in errors


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--boost", "wikki:high"], "--boost: 'wikki': no source has id 'wikki' (valid: tickets,"),
        (["--source", "wikki"], "--source: 'wikki': unknown source id (valid: tickets,"),
    ],
)
def test_an_unknown_source_in_a_flag_is_a_usage_error(args: list[str], message: str) -> None:
    result = run_nautilus("query", QUERY, *args)
    assert (result.returncode, result.stdout) == (2, "")
    assert message in result.stderr


def test_an_empty_query_is_a_usage_error() -> None:
    result = run_nautilus("query", "")
    assert result.returncode == 2
    assert "nautilus-ranking: query: '': string should have at least 1 character" in result.stderr


def test_a_cursor_with_characters_inserted_is_refused() -> None:
    first = run_nautilus("query", QUERY, "--top-k", "2", "--page", "1")
    cursor = first.stdout.rsplit("--cursor ", 1)[1].strip()
    for tampered in (
        cursor[:5] + "!" + cursor[5:],
        cursor[:5] + " " + cursor[5:],
        cursor + "\u00e9",
    ):
        result = run_nautilus("query", QUERY, "--top-k", "2", "--cursor", tampered)
        assert result.returncode == 2, tampered
        assert "not a cursor nautilus made" in result.stderr
    assert run_nautilus("query", QUERY, "--top-k", "2", "--cursor", cursor).returncode == 0


def test_the_text_has_a_confidence_line_exactly_when_the_docs_say() -> None:
    """The docs implied a `confidence:` line in every answer's text: it is there with
    --explain or a minimum confidence, and the docs say so."""

    def confidence_lines(*flags: str) -> list[str]:
        result = run_nautilus("query", QUERY, "--top-k", "3", *flags)
        assert result.returncode == 0, result.stderr
        return [line for line in result.stdout.splitlines() if line.startswith("confidence:")]

    assert confidence_lines() == []
    assert len(confidence_lines("--explain")) == 1
    assert len(confidence_lines("--min-confidence", "0.01")) == 1
    docs = (Path(__file__).parents[2] / "docs" / "configuration.md").read_text(encoding="utf-8")
    said = " ".join(docs.split())
    assert "a `confidence:` line in `query`'s text only with `--explain` or a minimum" in said
