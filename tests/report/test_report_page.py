"""The report page: one HTML file holding its CSS and every chart, a PNG beside it for
each chart, text escaped; without the ``report`` extra, the tables and the extra named.
The charts take plain arrays (what a calibration hands them too)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from nautilus_ranking.report import (
    REPORT_EXTRA,
    Section,
    Table,
    abstain_tradeoff,
    charts_available,
    first_relevant_positions,
    reliability_bins,
    reliability_diagram,
    values_with_intervals,
    write_report,
)

JUDGED = Path(__file__).resolve().parents[1] / "data" / "demo_judgments"
#: Anything a browser would fetch: a URL with a scheme, or a protocol-relative one.
FETCHABLE = re.compile(r"(?:https?|wss?|ftp)://|(?:src|href|url)\s*[=(]\s*[\"']?//", re.I)
needs_charts = pytest.mark.skipif(
    not charts_available(), reason=f"the report extra is not installed: {REPORT_EXTRA}"
)


def test_reliability_bins_are_the_mean_prediction_and_observed_rate_of_each_bin() -> None:
    predicted = [0.05, 0.07, 0.31, 0.35, 0.39, 0.95, 1.0]
    observed = [False, True, False, False, True, True, True]
    brute = []
    for b in range(10):  # each equal-width bin, the top edge in the last one
        inside = [i for i, p in enumerate(predicted) if min(int(p * 10), 9) == b]
        if inside:
            brute.append(
                (
                    sum(predicted[i] for i in inside) / len(inside),
                    sum(observed[i] for i in inside) / len(inside),
                    len(inside),
                )
            )
    got = reliability_bins(predicted, observed)
    assert [x for point in got for x in point] == pytest.approx([x for p in brute for x in p])
    assert [n for _, _, n in reliability_bins(predicted, observed)] == [2, 3, 2]


@needs_charts
def test_the_page_holds_every_chart_inline_and_writes_each_beside_it(tmp_path: Path) -> None:
    section = Section(
        "Charts <of> the run",
        ["a & b"],
        [Table(["setting", "nDCG@10"], [["<script>alert(1)</script>", "0.5"]], "caption")],
        [
            lambda: reliability_diagram([0.1, 0.4, 0.8], [False, True, True]),
            lambda: abstain_tradeoff([0.1, 0.2], [0.5, 0.9], [0.0, 0.05], chosen=0.2),
            lambda: values_with_intervals(["a", "b"], [0.4, 0.5], [0.3, 0.45], [0.5, 0.6]),
            lambda: first_relevant_positions({"current": [1, 2, None, 12]}, k=10),
        ],
    )
    written = write_report(tmp_path / "run.html", "a <title>", [section])
    page = written.page.read_text(encoding="utf-8")
    names = ["reliability", "abstain", "ndcg", "first-relevant"]
    assert [p.name for p in written.pngs] == [f"run-{n}.png" for n in names]
    for png in written.pngs:
        assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert page.count('src="data:image/png;base64,') == 4
    assert "<script>" not in page and "&lt;script&gt;" in page  # text is escaped
    assert "Charts &lt;of&gt; the run" in page and "a &amp; b" in page
    assert FETCHABLE.search(page) is None
    assert not written.charts_missing
    # the same arrays give the same bytes
    again = write_report(tmp_path / "again.html", "a <title>", [section])
    assert [p.read_bytes() for p in again.pngs] == [p.read_bytes() for p in written.pngs]


@needs_charts
def test_the_tradeoff_draws_one_rate_alone_with_the_chosen_threshold_marked() -> None:
    # a calibration without judged queries has the off-topic side only; an eval run
    # without unanswerable queries the false-abstain side only
    off_topic_only = abstain_tradeoff([0.1, 0.2, 0.3], [0.5, 0.8, 0.9], None, chosen=0.2)
    false_only = abstain_tradeoff([0.1, 0.2, 0.3], None, [0.0, 0.05, 0.1], chosen=0.2)
    unmarked = abstain_tradeoff([0.1, 0.2, 0.3], [0.5, 0.8, 0.9], None)
    for chart in (off_topic_only, false_only, unmarked):
        assert chart.name == "abstain" and chart.png.startswith(b"\x89PNG\r\n\x1a\n")
    assert len({off_topic_only.png, false_only.png, unmarked.png}) == 3  # what differs is drawn


def test_without_the_extra_the_eval_report_has_its_tables_and_names_it(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['matplotlib'] = None\n"
        "from nautilus_ranking.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("NAUTILUS_")},
        "NAUTILUS_DATA_DIR": str(tmp_path / "data"),
        "NAUTILUS_EMBEDDER": "hashing",
    }
    args = [
        "eval",
        "--queries",
        str(JUDGED / "queries.jsonl"),
        "--judgments",
        str(JUDGED / "qrels.tsv"),
        "--unanswerable",
        str(JUDGED / "unanswerable.jsonl"),
        "--report",
        str(tmp_path / "eval.html"),
    ]
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert f"tables only: the charts need the report extra, {REPORT_EXTRA}" in done.stderr
    page = (tmp_path / "eval.html").read_text(encoding="utf-8")
    assert REPORT_EXTRA.replace("'", "&#x27;") in page
    assert "<img" not in page
    assert "NAUTILUS_RANKING_MIN_CONFIDENCE" in page and "<table>" in page
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "eval.html"]


def test_a_report_that_cannot_be_written_is_one_line_naming_the_flag(tmp_path: Path) -> None:
    from inprocess import run_cli

    done = run_cli(
        [
            *("eval", "--queries", str(JUDGED / "queries.jsonl")),
            *("--judgments", str(JUDGED / "qrels.tsv")),
            *("--report", str(tmp_path / "missing" / "eval.html")),
        ],
        tmp_path,
        {"NAUTILUS_DATA_DIR": str(tmp_path / "data")},
    )
    assert done.returncode == 1
    assert f"--report: cannot write {tmp_path / 'missing'}" in done.stderr
    assert "Traceback" not in done.stderr
