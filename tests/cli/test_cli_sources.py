"""`nautilus-ranking config --strict --config FILE`, `config --schema`, `sources rebuild`, and the
`query` flags and exit codes, run as real subprocesses."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
from cli_process import NAUTILUS, cli_environment, run_nautilus
from plain_environment import plain_environment

from nautilus_ranking.cli import main

FAQS = [
    {"id": "f1", "question": "How do I reset my password?", "answer": "the reset link"},
    {"id": "f2", "question": "Where is my disk quota?", "answer": "settings, storage"},
]
GOOD = (
    "sources:\n  - {id: faqs, type: sqlite_fts, path: shop/faqs.db, seed: faqs.jsonl, "
    "columns: [question, answer]}\n"
)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "faqs.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in FAQS), encoding="utf-8"
    )
    (tmp_path / "empty.jsonl").write_text("", encoding="utf-8")
    (tmp_path / "faqs.csv").write_text("id,question\nf1,reset\n", encoding="utf-8")
    return tmp_path


BREAKS = {
    "missing file": (None, "cannot read sources config"),
    "malformed YAML": ("sources: [\n  - {id: faqs", "not valid YAML"),
    "unknown type": (
        GOOD.replace("sqlite_fts", "sqlite_ftz"),
        "unknown type 'sqlite_ftz' — did you mean 'sqlite_fts'?",
    ),
    "missing type": (GOOD.replace("type: sqlite_fts, ", ""), "missing 'type'"),
    "typo'd option": (
        GOOD.replace("}", ", timout_s: 0.5}"),
        "unknown option 'timout_s' — did you mean 'timeout_s'?",
    ),
    "missing option": (
        GOOD.replace(", columns: [question, answer]", ""),
        "missing option 'columns'",
    ),
    "missing seed": (GOOD.replace("faqs.jsonl", "nope.jsonl"), "nope.jsonl not found"),
    "CSV seed": (GOOD.replace("faqs.jsonl", "faqs.csv"), "not CSV"),
    "empty seed": (GOOD.replace("faqs.jsonl", "empty.jsonl"), "empty.jsonl has no rows"),
    "column not in seed": (
        GOOD.replace("[question, answer]", "[questoin, answer]"),
        "has no field 'questoin' — did you mean 'question'?",
    ),
    "path outside data dir": (
        GOOD.replace("shop/faqs.db", "../../victim.txt"),
        "is outside NAUTILUS_DATA_DIR",
    ),
    "nan timeout": (GOOD.replace("}", ", timeout_s: .nan}"), "Input should be a finite number"),
    "unset variable": (
        GOOD.replace("shop/faqs.db", "'${SHOP_DB_UNSET}'"),
        "SHOP_DB_UNSET is not set",
    ),
}


SUBPROCESS_KINDS = ("missing file", "typo'd option", "column not in seed")


@pytest.fixture
def in_process_cli() -> Iterator[None]:
    """main() configures logging for the process: undo it after the test."""
    yield
    structlog.reset_defaults()
    target = logging.getLogger("nautilus_ranking")
    for handler in list(target.handlers):
        target.removeHandler(handler)
    target.setLevel(logging.NOTSET)
    target.propagate = True


@pytest.mark.parametrize("kind", list(BREAKS))
def test_config_strict_exits_1_naming_each_kind_of_break(
    folder: Path, kind: str, capsys: pytest.CaptureFixture[str], in_process_cli: None
) -> None:
    """Three kinds as real subprocesses; the rest through the same main() in-process
    (each subprocess costs a second of imports)."""
    text, message = BREAKS[kind]
    path = folder / "broken.yaml"
    if text is not None:
        path.write_text(text, encoding="utf-8")
    if kind in SUBPROCESS_KINDS:
        result = run_nautilus("config", "--strict", "--config", str(path))
        code, out, err = result.returncode, result.stdout, result.stderr
    else:
        code = main(["config", "--strict", "--config", str(path)])
        out, err = capsys.readouterr()
    assert code == 1, (kind, out, err)
    assert message in err, (kind, err)
    assert "Traceback" not in err + out


def test_config_strict_passes_a_good_file_and_checks_boosts_against_it(folder: Path) -> None:
    (folder / "shop.yaml").write_text(GOOD, encoding="utf-8")
    good = run_nautilus(
        "config",
        "--strict",
        "--config",
        str(folder / "shop.yaml"),
        env={"NAUTILUS_SOURCE_BOOSTS": "faqs:high"},
    )
    assert good.returncode == 0, good.stderr
    assert "faqs" in good.stdout and "skipped: none" in good.stdout
    # the sources file's line ends with its name (its sources follow), no dangling colon
    assert f"\nsources: {folder / 'shop.yaml'}\n  - faqs  sqlite_fts\n" in good.stdout
    (folder / "none.yaml").write_text("sources: []\n", encoding="utf-8")
    none = run_nautilus("config", "--config", str(folder / "none.yaml"))
    assert f"\nsources: {folder / 'none.yaml'}: " in none.stdout
    bogus = run_nautilus(
        "config",
        "--strict",
        "--config",
        str(folder / "shop.yaml"),
        env={"NAUTILUS_SOURCE_BOOSTS": "bogus:high"},
    )
    assert bogus.returncode == 1 and "no source has id 'bogus'" in bogus.stderr


def test_config_without_strict_shows_the_sources_error_and_exits_0(folder: Path) -> None:
    result = run_nautilus("config", "--json", "--config", str(folder / "absent.yaml"))
    assert result.returncode == 0
    status = json.loads(result.stdout)["sources_file"]
    assert status["ok"] is False and "cannot read sources config" in status["error"]


def test_config_schema_is_json_schema_with_every_type() -> None:
    result = run_nautilus("config", "--schema")
    assert result.returncode == 0, result.stderr
    schema = json.loads(result.stdout)
    assert schema["$schema"].startswith("https://json-schema.org/")
    text = json.dumps(schema)
    for name in ("sqlite_table", "sqlite_fts", "sqlite_graph", "sqlite_vector"):
        assert f'"{name}"' in text
    assert "search_columns" in text and "additionalProperties" in text


def test_sources_rebuild_rebuilds_and_a_changed_seed_is_answered(folder: Path) -> None:
    (folder / "shop.yaml").write_text(GOOD, encoding="utf-8")
    config = str(folder / "shop.yaml")
    first = run_nautilus("query", "zebra", "--config", config, "--json")
    assert json.loads(first.stdout)["data"] == {"faqs": []}
    with (folder / "faqs.jsonl").open("a", encoding="utf-8") as seed:
        seed.write(json.dumps({"id": "f3", "question": "zebra?", "answer": "stripes"}) + "\n")
    second = run_nautilus(
        "query",
        "zebra",
        "--config",
        config,
        "--json",
        env={"NAUTILUS_LOG_FORMAT": "json", "NAUTILUS_LOG_LEVEL": "info"},
    )
    assert [r["id"] for r in json.loads(second.stdout)["data"]["faqs"]] == ["f3"]
    events = [json.loads(line) for line in second.stderr.splitlines()]
    assert {"event": "source_rebuilding", "reason": "the seed changed"}.items() <= next(
        e for e in events if e["event"] == "source_rebuilding"
    ).items()
    rebuilt = run_nautilus("sources", "rebuild", "--config", config)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert rebuilt.stdout.startswith("faqs: rebuilt ")


def test_query_exits_1_when_every_source_fails(folder: Path) -> None:
    data = Path(os.environ["NAUTILUS_DATA_DIR"]) / "shop"
    data.mkdir(parents=True)
    (data / "faqs.db").write_text("mine\n", encoding="utf-8")
    (folder / "shop.yaml").write_text(GOOD, encoding="utf-8")
    result = run_nautilus("query", "password", "--config", str(folder / "shop.yaml"))
    assert result.returncode == 1
    assert "error: faqs: ForeignFileError" in result.stdout
    assert "every source failed" in result.stderr


def test_header_shows_only_applied_boosts_and_passthrough_shows_no_scores(folder: Path) -> None:
    (folder / "shop.yaml").write_text(GOOD, encoding="utf-8")
    config = str(folder / "shop.yaml")
    # in the environment a boost naming no source is warned about and skipped ...
    boosted = run_nautilus(
        "query", "password", "--config", config, env={"NAUTILUS_SOURCE_BOOSTS": "faq:high,faqs:low"}
    )
    assert boosted.returncode == 0, boosted.stderr
    assert "(boosts: faqs:low)" in boosted.stdout and "faq:high" not in boosted.stdout
    # ... while a flag is the caller's own request: refused, as over HTTP
    flagged = run_nautilus(
        "query", "password", "--config", config, "--boost", "faq:high", "--boost", "faqs:low"
    )
    assert flagged.returncode == 2 and "--boost: 'faq': no source has id 'faq'" in flagged.stderr
    plain = run_nautilus("query", "password", "--config", config)
    rows = [line for line in plain.stdout.splitlines() if line.lstrip()[:1].isdigit()]
    assert rows and all(line.split()[2] == "-" for line in rows)
    assert "0.0000" not in plain.stdout


def test_a_typo_in_dot_env_is_reported_like_one_in_the_environment(tmp_path: Path) -> None:
    """Item 5: NAUTILUS_SOURCE_BOST in .env was silently ignored."""
    (tmp_path / ".env").write_text("NAUTILUS_SOURCE_BOST=faqs\nOTHER_TOOL=1\n", encoding="utf-8")
    result = run_nautilus("config", "--strict", cwd=tmp_path)
    assert result.returncode == 1
    assert (
        "NAUTILUS_SOURCE_BOST: '(set in .env)': unknown variable (did you mean "
        "NAUTILUS_SOURCE_BOOSTS?)"
    ) in result.stderr
    assert "OTHER_TOOL" not in result.stderr


def test_a_mistyped_variable_offers_the_three_names_nearest_it(tmp_path: Path) -> None:
    """Its warning listed all ~50 names as valid: a 2 KB line to find one name in."""
    result = run_nautilus(
        "config", env={"NAUTILUS_RANKING_TOPK": "5", "NAUTILUS_LOG_FORMAT": "json"}
    )
    assert result.returncode == 0, result.stderr
    [warning] = [
        json.loads(line) for line in result.stderr.splitlines() if "NAUTILUS_RANKING_TOPK" in line
    ]
    assert warning["event"] == "config_value_skipped"
    valid = warning["valid"].split(", ")
    assert len(valid) == 3 and valid[0] == "NAUTILUS_RANKING_TOP_K"
    assert all(name.startswith("NAUTILUS_") for name in valid)


LIBRARY = """
import sys
from nautilus_ranking import Broker
response = Broker.from_config(sys.argv[1]).request("password")
assert [e.source_id for e in response.sources_errored] == ["faqs"], response
"""


def test_the_library_writes_nothing_to_stdout_and_only_warnings_to_stderr(folder: Path) -> None:
    """Item 6: as a library, broker_ready and request_served were printed to stdout."""
    data = Path(os.environ["NAUTILUS_DATA_DIR"]) / "shop"
    data.mkdir(parents=True)
    (data / "faqs.db").write_text("mine\n", encoding="utf-8")  # makes the source fail: a warning
    (folder / "shop.yaml").write_text(GOOD, encoding="utf-8")
    env = plain_environment()
    env.update(
        {"NAUTILUS_DATA_DIR": os.environ["NAUTILUS_DATA_DIR"], "NAUTILUS_LOG_LEVEL": "debug"}
    )
    result = subprocess.run(
        [sys.executable, "-c", LIBRARY, str(folder / "shop.yaml")],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert "source_failed" in result.stderr  # a warning reaches the operator
    assert "broker_ready" not in result.stderr and "request_served" not in result.stderr
    turned_on = subprocess.run(
        [
            sys.executable,
            "-c",
            "import logging; logging.basicConfig(level=logging.INFO)\n" + LIBRARY,
            str(folder / "shop.yaml"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert turned_on.stdout == "" and "request_served" in turned_on.stderr


def test_the_table_view_shows_a_subject_field() -> None:
    """Item 11: a row's `subject` was dropped in favour of its body."""
    from nautilus_ranking.cli.output import summarize

    line = summarize({"id": "m1", "subject": "Printer jam on floor 3", "body": "paper stuck"})
    assert "Printer jam on floor 3" in line


def test_three_processes_on_a_fresh_data_dir_all_answer(folder: Path) -> None:
    """Across processes: the file lock lets one build while the others
    wait, and every process then reads the same database."""
    (folder / "shop.yaml").write_text(GOOD, encoding="utf-8")
    base = cli_environment()
    processes = [
        subprocess.Popen(
            [NAUTILUS, "query", "password", "--json", "--config", str(folder / "shop.yaml")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=base,
        )
        for _ in range(3)
    ]
    for process in processes:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
        response = json.loads(out)
        assert response["sources_errored"] == []
        assert [r["id"] for r in response["data"]["faqs"]] == ["f1"]
    built = [p.name for p in (Path(os.environ["NAUTILUS_DATA_DIR"]) / "shop").iterdir()]
    assert sorted(built) == [".faqs.db.lock", "faqs.db"]


def test_probe_with_no_hits_says_what_each_kind_of_source_matches(folder: Path) -> None:
    """No hits from a SQLite source is not a mapping to check nor an engine's documents:
    a graph matches entity names, the others their rows' words."""
    (folder / "services.jsonl").write_text('{"id": "orders-db"}\n', encoding="utf-8")
    (folder / "edges.jsonl").write_text("", encoding="utf-8")
    (folder / "n.yaml").write_text(
        GOOD + "  - {id: graph, type: sqlite_graph, path: shop/graph.db, entities: services.jsonl,"
        " edges: edges.jsonl}\n",
        encoding="utf-8",
    )
    out = run_nautilus("sources", "probe", "zebra", "--config", str(folder / "n.yaml"))
    assert out.returncode == 0, out.stderr
    lines = dict(line.split(None, 1) for line in out.stdout.splitlines())
    assert "mapping" not in out.stdout and "engine" not in out.stdout
    assert "no hits: no entity's name holds a word of the query" in lines["graph"]
    assert "no hits: no row holds a word of the query" in lines["faqs"]
    as_json = run_nautilus(
        "sources", "probe", "zebra", "--json", "--config", str(folder / "n.yaml")
    )
    notes = {p["source"]: p["note"] for p in map(json.loads, as_json.stdout.splitlines())}
    assert notes["graph"].startswith("no hits: no entity's name")


def test_a_time_field_the_source_does_not_return_is_one_plain_line(folder: Path) -> None:
    """The message read "sources[0] (faqs, sqlite_fts): : time_field …, got {'id': …}":
    an empty option name and the whole source definition after it."""
    (folder / "timed.yaml").write_text(
        GOOD.replace("answer]}", "answer], time_field: updated}"), encoding="utf-8"
    )
    result = run_nautilus("config", "--strict", "--config", str(folder / "timed.yaml"))
    assert result.returncode == 1
    assert (
        "timed.yaml: sources[0] (faqs, sqlite_fts): time_field 'updated' is not a field this "
        "source returns: add it to stored (returned, not searched) or to columns\n"
    ) in result.stderr
    assert ": :" not in result.stderr and "got {" not in result.stderr
