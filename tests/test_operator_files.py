"""Operator files other than seeds — eval queries and judgments, ``config --manifest``,
the API keys file — are read as seeds are: a regular file only, bounded, so ``/dev/zero``
is refused instead of filling memory and a FIFO instead of waiting for a writer; the TREC
topics parser is linear. And ``nautilus-ranking config --strict`` passes only what then works:
seeds SQLite or PostgreSQL could not store, a missing keys file, a keys file with a BOM.
Every command a real subprocess; a hang is a failure (subprocess timeout), not a wait."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_process import run_nautilus
from fakes import write_jsonl


def cli(
    folder: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    env = {"NAUTILUS_DATA_DIR": str(folder / "data"), **(env or {})}
    return run_nautilus(*args, env=env, cwd=folder, timeout=timeout)


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


def test_eval_refuses_a_device_and_a_fifo(tmp_path: Path, fifo: Path) -> None:
    (tmp_path / "q.tsv").write_text("q1\tdisk full\n")
    (tmp_path / "j.tsv").write_text("q1\td1\t1\n")
    for queries, judgments, named in (
        ("/dev/zero", "j.tsv", "/dev/zero is a character device"),
        (str(fifo), "j.tsv", "pipe is a named pipe"),
        ("q.tsv", "/dev/zero", "/dev/zero is a character device"),
        ("q.tsv", str(fifo), "pipe is a named pipe"),
    ):
        run = cli(tmp_path, "eval", "--queries", queries, "--judgments", judgments)
        assert run.returncode == 1 and named in run.stderr, run.stderr
        assert "Traceback" not in run.stderr


def test_config_manifest_refuses_a_device_and_a_fifo(tmp_path: Path, fifo: Path) -> None:
    for manifest, named in (
        ("/dev/zero", "/dev/zero is a character device"),
        (str(fifo), "pipe is a named pipe"),
    ):
        run = cli(tmp_path, "config", "--strict", "--manifest", manifest)
        assert run.returncode != 0 and named in run.stderr, run.stderr
        assert "Traceback" not in run.stderr


@pytest.mark.parametrize("keys", ["/dev/zero", "pipe", "missing-keys"])
def test_config_strict_refuses_a_keys_file_serve_could_not_read(
    tmp_path: Path, keys: str, fifo: Path
) -> None:
    path = keys if keys.startswith("/") else str(tmp_path / keys)
    run = cli(tmp_path, "config", "--strict", env={"NAUTILUS_SERVE_API_KEYS_FILE": path})
    assert run.returncode == 1, run.stdout + run.stderr
    assert "NAUTILUS_SERVE_API_KEYS_FILE" in run.stderr and "cannot read it" in run.stderr


def test_a_keys_file_with_a_bom_keeps_its_first_key(tmp_path: Path) -> None:
    from nautilus_ranking.startup.keys_file import load_api_keys

    keys = tmp_path / "keys"
    keys.write_bytes("\ufeffk-first\nk-second\n".encode())
    keys.chmod(0o600)  # a secret: owner-only
    assert load_api_keys(str(keys)) == (b"k-first", b"k-second")
    run = cli(tmp_path, "config", "--strict", env={"NAUTILUS_SERVE_API_KEYS_FILE": str(keys)})
    assert run.returncode == 0, run.stderr


def test_trec_topics_parse_in_linear_time(tmp_path: Path) -> None:
    # 40,000 spaces took 15 s with the old title pattern (quadratic): a million would
    # take hours, so finishing inside the subprocess timeout is the test.
    topics = tmp_path / "topics.txt"
    topics.write_text(
        "<top>\n<num> Number: 7\n<title> Topic:"
        + " " * 1_000_000
        + "disk full\n</top>\n"
        + "<top>" * 200_000
    )
    script = (
        "import sys; from pathlib import Path; "
        "from nautilus_ranking.evaluation.judgments import read_queries; "
        "print(read_queries(Path(sys.argv[1])).texts)"
    )
    run = subprocess.run(
        [sys.executable, "-c", script, str(topics)], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "{'7': 'disk full'}"


def test_a_sqlite_seed_integer_past_64_bits_is_stored_not_fatal(tmp_path: Path) -> None:
    write_jsonl(
        tmp_path / "t.jsonl",
        [{"id": 1, "title": "disk full", "n": 2**64}, {"id": 2, "title": "disk \ud800 alarm"}],
    )
    path = tmp_path / "s.yaml"
    path.write_text(
        "sources:\n"
        "  - {id: t, type: sqlite_table, path: t.db, seed: t.jsonl, table: t, "
        "search_columns: [title]}\n"
        "  - {id: f, type: sqlite_fts, path: f.db, seed: t.jsonl, "
        "columns: [title, n]}\n"
    )
    assert cli(tmp_path, "config", "--strict", "--config", str(path)).returncode == 0
    query = cli(tmp_path, "query", "disk", "--json", "--config", str(path))
    body = json.loads(query.stdout)
    assert body["sources_errored"] == [], body["sources_errored"]
    assert {r["id"]: r.get("n") for r in body["data"]["t"]} == {1: str(2**64), 2: None}
    assert sorted(r["title"] for r in body["data"]["f"]) == ["disk full", "disk \ufffd alarm"]


@pytest.mark.parametrize(
    ("row", "said"),
    [
        ({"id": "a", "title": "disk\u0000full"}, "row 1, field 'title': a NUL character"),
        ({"id": "a", "title": "disk \ud800"}, "row 1, field 'title': a lone surrogate"),
        (
            {"id": "a", "title": "x", "meta": {"score": float("nan")}},
            "row 1, field 'meta': nan in a JSON value",
        ),
        (  # a primary key's btree entry holds 2,704 bytes at most: load refused it
            {"id": "i" * 9000, "title": "x"},
            "row 1, field 'id': an id of 9,000 bytes, longer than the 2,000",
        ),
    ],
)
def test_config_strict_refuses_postgres_seed_rows_load_would_refuse(
    tmp_path: Path, row: dict[str, object], said: str
) -> None:
    (tmp_path / "kb.jsonl").write_text(json.dumps(row) + "\n")
    path = tmp_path / "s.yaml"
    path.write_text(
        "sources:\n  - {id: kb, type: postgres_table, dsn: 'postgresql://u@db/kb', "
        "table: kb, columns: [title], seed: kb.jsonl}\n"
    )
    run = cli(tmp_path, "config", "--strict", "--config", str(path))
    assert run.returncode == 1 and said in run.stderr, run.stderr


def test_a_seed_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    (tmp_path / "t.jsonl").write_bytes("\ufeff".encode() + b'{"id": "a1", "title": "disk full"}\n')
    path = tmp_path / "s.yaml"
    path.write_text(
        "sources:\n  - {id: t, type: sqlite_fts, path: t.db, seed: t.jsonl, columns: [title]}\n"
    )
    assert cli(tmp_path, "config", "--strict", "--config", str(path)).returncode == 0
    query = cli(tmp_path, "query", "disk", "--json", "--config", str(path))
    assert [r["id"] for r in json.loads(query.stdout)["data"]["t"]] == ["a1"]


def test_a_fifo_as_the_sources_file_is_refused_not_waited_on(tmp_path: Path, fifo: Path) -> None:
    """Before: ``config --strict`` and ``query`` waited for a writer for ever."""
    for args, code in (
        (["config", "--strict", "--config", str(fifo)], 1),
        (["query", "disk", "--config", str(fifo)], 1),
        (["config", "--config", str(fifo)], 0),
    ):
        run = cli(tmp_path, *args)
        assert run.returncode == code, run.stderr
        said = run.stdout + run.stderr
        assert "cannot read sources config" in said and "pipe is a named pipe" in said, said
        assert "Traceback" not in said
    run = cli(tmp_path, "query", "disk", env={"NAUTILUS_CONFIG": str(fifo)})
    assert run.returncode == 1 and "pipe is a named pipe" in run.stderr, run.stderr


@pytest.mark.parametrize("nesting", ["[" * 5000 + "]" * 5000, "{a: " * 3000 + "1" + "}" * 3000])
def test_a_deeply_nested_manifest_is_refused_by_its_depth(tmp_path: Path, nesting: str) -> None:
    """Before: "unexpected RecursionError"."""
    (tmp_path / "deep.yaml").write_text("kind: Deployment\nspec: " + nesting + "\n")
    run = cli(tmp_path, "config", "--strict", "--manifest", "deep.yaml")
    assert run.returncode != 0
    assert "--manifest: 'deep.yaml': not valid YAML (nested more than 64 levels deep" in run.stderr
    assert "unexpected" not in run.stderr and "Traceback" not in run.stderr
