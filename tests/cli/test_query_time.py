"""Time through the command line, on real SQLite sources: a sources file's time_field and
document_key, `--recency`, `--as-of`, what `--explain` shows, and the unset no-op (real
`nautilus-ranking` subprocesses)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cli_process import run_nautilus

QUERY = "when are incidents reported to the regulator"
FAQ = [
    {
        "id": "R-01",
        "text": "Incidents are reported to the regulator within 48 hours.",
        "updated": "2026-02-01T09:00:00Z",
    },
    {"id": "R-07", "text": "The regulator reads incident reports in order.", "updated": "2025"},
]
ARCHIVE = [
    {
        "id": "R-01",
        "text": "Incidents are reported to the regulator within 24 hours.",
        "meta": {"modified": 1736467200},
    },
    {"id": "R-09", "text": "Old incident reports to the regulator are kept.", "meta": {}},
]


@pytest.fixture
def sources(tmp_path: Path) -> Path:
    for name, rows in (("faq", FAQ), ("archive", ARCHIVE)):
        (tmp_path / f"{name}.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8"
        )
    config = tmp_path / "sources.yaml"
    config.write_text(
        "sources:\n"
        "  - {id: faq, type: sqlite_fts, path: faq.db, seed: faq.jsonl, columns: [text],"
        " stored: [updated], time_field: updated, document_key: id}\n"
        "  - {id: archive, type: sqlite_table, path: archive.db, seed: archive.jsonl,"
        " table: archive, search_columns: [text], time_field: meta.modified,"
        " document_key: id}\n",
        encoding="utf-8",
    )
    return config


def run(
    config: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The command with ``args`` and ``--config config``, in a plain environment."""
    env = {"NAUTILUS_DATA_DIR": str(config.parent / "data"), **(env or {})}
    return run_nautilus(*args, "--config", str(config), env=env)


def query(config: Path, *flags: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    done = run(config, "query", QUERY, "--json", *flags, env=env)
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def test_a_mapped_time_alone_changes_no_byte_of_the_answer(sources: Path) -> None:
    plain = query(sources, "--top-k", "3")
    mapped = query(
        sources, "--top-k", "3", env={"NAUTILUS_RANKING_TIME_FIELDS": "faq:updated,archive:id"}
    )
    assert "time" not in plain and "time" not in mapped
    for answer in (plain, mapped):
        answer.pop("request_id")
        answer.pop("duration_ms")
    assert mapped == plain


def test_supersession_and_recency_from_the_sources_file(sources: Path) -> None:
    answer = query(
        sources,
        "--top-k",
        "3",
        "--recency",
        "half_life:90d",
        "--as-of",
        "2026-03-01",
        "--explain",
        env={"NAUTILUS_RANKING_SUPERSEDE": "true", "NAUTILUS_RANKING_MAY_REVISE": "faq:archive"},
    )
    assert answer["time"] == {
        "reference": "2026-03-01",
        "from": "as_of",
        "recency": "half_life:90d",
        "dated": 3,
        "undated": 1,
        "ahead": 0,
        "superseded": 1,
        "later_revisions": 0,
        "after_as_of": 0,
    }
    by_id = {(e["source_id"], e["id"]): e for e in answer["ranking"]}
    assert ("archive", "R-01") not in by_id  # the older revision, in the newer's provenance
    current = by_id[("faq", "R-01")]
    assert current["also_from"] == [
        {
            "source_id": "archive",
            "id": "R-01",
            "source_rank": 1,
            "copy": "revision",
            "time": "2025-01-10T00:00:00Z",
        }
    ]
    assert current["time"]["time"] == "2026-02-01T09:00:00Z"
    assert current["time"]["age_days"] == pytest.approx(28.625)
    assert by_id[("faq", "R-07")]["time"]["time"] == "2025"  # a year stays a year
    assert by_id[("archive", "R-09")]["time"] == {
        "time": None,
        "age_days": None,
        "freshness": 1.0,
        "recency": 0.0,
    }
    assert [r["id"] for r in answer["data"]["archive"]] == ["R-09"]


def test_as_of_answers_the_revision_in_force_that_day(sources: Path) -> None:
    """SOP revisions of 2025-01-10 (archive) and 2026-02-01 (faq) share a document key:
    as of a day between them, the archive's text is what was in force."""
    env = {"NAUTILUS_RANKING_SUPERSEDE": "true", "NAUTILUS_RANKING_MAY_REVISE": "faq:archive"}
    answer = query(sources, "--as-of", "2025-06-01", env=env)
    by_id = {(e["source_id"], e["id"]): e for e in answer["ranking"]}
    assert ("faq", "R-01") not in by_id
    assert by_id[("archive", "R-01")]["also_from"] == [
        {
            "source_id": "faq",
            "id": "R-01",
            "source_rank": 2,
            "copy": "later_revision",
            "time": "2026-02-01T09:00:00Z",
        }
    ]
    assert answer["time"]["later_revisions"] == 1 and answer["time"]["after_as_of"] == 1
    unnamed = query(sources, "--as-of", "2025-06-01", env={"NAUTILUS_RANKING_SUPERSEDE": "true"})
    assert {("faq", "R-01"), ("archive", "R-01")} <= {
        (e["source_id"], e["id"]) for e in unnamed["ranking"]
    }  # faq may not revise archive: two documents


def test_explain_shows_each_rows_age_and_the_reference(sources: Path) -> None:
    done = run(sources, "query", QUERY, "--recency", "window:365d", "--explain")
    assert done.returncode == 0, done.stderr
    assert "age(d)" in done.stdout and "recency" in done.stdout
    assert "time: ages from 2026-02-01T09:00:00Z (the newest row's time); recency window:365d" in (
        done.stdout
    )


def test_a_bad_recency_flag_is_a_clear_error(sources: Path) -> None:
    done = run(sources, "query", QUERY, "--recency", "half_life:soon")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "recency" in done.stderr and "not a duration" in done.stderr


def test_a_time_field_a_full_text_source_does_not_return_is_refused_at_start(
    sources: Path,
) -> None:
    text = sources.read_text(encoding="utf-8").replace(" stored: [updated],", "")
    sources.write_text(text, encoding="utf-8")
    done = run(sources, "config", "--strict")
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "time_field 'updated' is not a field this source returns" in done.stderr
    assert "stored" in done.stderr


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("NAUTILUS_RANKING_TIME_FIELDS", "fqa:updated"),
        ("NAUTILUS_RANKING_DOCUMENT_KEYS", "archiv:id"),
        ("NAUTILUS_RANKING_RECENCY", "half_life:30d,fqa:off"),
    ],
)
def test_a_source_id_no_source_has_is_named_by_strict_mode(
    sources: Path, variable: str, value: str
) -> None:
    done = run(sources, "config", "--strict", env={variable: value})
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert f"{variable}: " in done.stderr and "no source has id" in done.stderr


def test_a_mistyped_decay_flag_says_which_decay_was_meant(sources: Path) -> None:
    done = run(sources, "query", QUERY, "--recency", "halflife:30d")
    assert done.returncode == 2
    assert "--recency: 'halflife:30d': unknown decay 'halflife' (did you mean half_life?)" in (
        done.stderr
    )
    assert "Traceback" not in done.stderr
