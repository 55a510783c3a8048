"""``nautilus-ranking calibrate --report`` as a real process on the bundled demo: one
static page holding its tables and its two charts (the reliability of the cross-fitted
confidence, the abstain trade-off with the recommended p marked) inline, a PNG beside
it for each; without the report extra, the tables and the extra named; a page that
cannot be written refused before the run."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from cli_process import cli_environment, run_nautilus

from nautilus_ranking.report import REPORT_EXTRA, charts_available

JUDGMENTS = Path(__file__).resolve().parents[1] / "data" / "demo_judgments"
HASHING = {"NAUTILUS_EMBEDDER": "hashing", "NAUTILUS_RANKING_TOP_K": "10"}
OFF_TOPIC = [
    "how do I bake sourdough bread",
    "best time to visit japan",
    "who won the 1998 world cup",
    "how to tune a guitar",
    "what is the capital of peru",
    "recipe for lasagna",
    "how tall is mount everest",
    "how to train a puppy",
    "symptoms of the flu",
    "how do tides work",
    "price of gold today",
    "how to knit a scarf",
    "rules of cricket",
    "how to plant tomatoes",
    "what is a black hole",
]
URL = re.compile(r"https?://", re.I)
needs_charts = pytest.mark.skipif(
    not charts_available(), reason=f"the report extra is not installed: {REPORT_EXTRA}"
)


def calibrate_args(tmp_path: Path, judged: bool = True) -> list[str]:
    """A small calibration of the demo: 15 off-topic queries (enough for a 0.7 off-topic
    abstain rate held with probability 0.95, not for 0.9) and, when ``judged``, the
    demo's 20 judged ones."""
    null = tmp_path / "null.txt"
    null.write_text("\n".join(OFF_TOPIC) + "\n", encoding="utf-8")
    args = ["calibrate", "--out", str(tmp_path / "fit.json"), "--no-shipped-null-queries"]
    args += ["--null-queries", str(null), "--null-rate", "0.7"]
    args += ["--report", str(tmp_path / "cal.html")]
    if judged:
        args += ["--queries", str(JUDGMENTS / "queries.jsonl")]
        args += ["--judgments", str(JUDGMENTS / "qrels.tsv")]
    return args


@needs_charts
@pytest.mark.parametrize("judged", [True, False], ids=["judged", "off-topic-only"])
def test_the_page_holds_its_tables_and_both_charts_inline(tmp_path: Path, judged: bool) -> None:
    done = run_nautilus(*calibrate_args(tmp_path, judged), env=HASHING, timeout=300)
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "cal.html").read_text(encoding="utf-8")
    fit = json.loads((tmp_path / "fit.json").read_text(encoding="utf-8"))
    assert f"report written to {tmp_path / 'cal.html'} (2 charts, PNGs beside it)" in (done.stderr)
    charts = re.findall(
        r'<img src="data:image/png;base64,[^"]+" alt="[^"]*" data-chart="(\w+)"', page
    )
    assert charts == ["reliability", "abstain"]
    for name in charts:
        assert (tmp_path / f"cal-{name}.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert URL.search(page) is None
    # the tables: what it was made for, the threshold and what it promises
    p = fit["threshold"]["recommended_p"]
    assert fit["made_for"]["config_hash"] in page and f"Recommended p: {p}" in page
    assert "Promise: " in page and "95% CI (Clopper-Pearson)" in page
    # the trade-off's grid holds the recommended p, marked
    assert f"<td>{p:g} (recommended)</td>" in page
    rows = re.findall(r"<tr><td>([0-9.]+)(?: \(recommended\))?</td><td>(\d+)/(\d+)", page)
    assert {float(row[0]) for row in rows} >= {0.02, 0.1, 0.5, p}
    assert {int(row[2]) for row in rows} == {fit["provenance"]["null_queries"]}
    if not judged:  # the off-topic side only
        assert "Without answerable judged queries: the off-topic side." in page


def test_without_the_extra_the_page_has_its_tables_and_names_it(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['matplotlib'] = None\n"
        "from nautilus_ranking.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *calibrate_args(tmp_path)],
        capture_output=True,
        text=True,
        env=cli_environment(HASHING),
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert f"tables only: the charts need the report extra, {REPORT_EXTRA}" in done.stderr
    page = (tmp_path / "cal.html").read_text(encoding="utf-8")
    assert REPORT_EXTRA.replace("'", "&#x27;") in page
    assert "<img" not in page and "Recommended p: " in page and "<table>" in page
    assert not list(tmp_path.glob("*.png"))


@pytest.mark.parametrize("where", ["missing-folder", "a-folder", "under-a-file"])
def test_a_page_that_cannot_be_written_is_refused_before_the_run(
    tmp_path: Path, where: str
) -> None:
    (tmp_path / "a-file").write_text("", encoding="utf-8")
    (tmp_path / "a-folder").mkdir()
    report = {
        "missing-folder": tmp_path / "missing" / "cal.html",
        "a-folder": tmp_path / "a-folder",
        "under-a-file": tmp_path / "a-file" / "cal.html",
    }[where]
    args = calibrate_args(tmp_path)
    args[args.index("--report") + 1] = str(report)
    done = run_nautilus(*args, env=HASHING, timeout=300)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("nautilus-ranking: --report: ")
    assert str(report) in lines[0]
    assert not (tmp_path / "fit.json").exists()  # refused before the run, not after it
