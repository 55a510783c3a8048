"""The eval and calibrate reports in a real headless browser (Debian's
``chromium-headless-shell``, which ``.ci/run`` installs as the other real programs):
each page renders, its charts load (each image decoded at its PNG's size), and opening
it fetches nothing.

Nothing fetched is checked, not assumed: the browser runs with every request sent to a
recording proxy on loopback, and a control page that does load two remote images shows
the proxy sees a page's fetches. The full ``chromium`` browser is not used: it calls
its update and sign-in services on start, whatever the page, so the proxy's count would
not be the page's. ``--dump-dom`` returns once the page's load event has run, so no
test waits on a clock.
"""

from __future__ import annotations

import http.server
import re
import shutil
import struct
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
from fakes import DEMO
from inprocess import run_cli

from nautilus_ranking.report import REPORT_EXTRA, charts_available

BROWSER = shutil.which("chromium-headless-shell")
JUDGED = Path(__file__).resolve().parents[1] / "data" / "demo_judgments"
pytestmark = [
    pytest.mark.skipif(
        BROWSER is None,
        reason="chromium-headless-shell is not installed (Debian's package of that name; "
        ".ci/run installs it when it runs as root)",
    ),
    pytest.mark.skipif(not charts_available(), reason=f"needs the report extra: {REPORT_EXTRA}"),
]
#: Written after the load event into the DOM that --dump-dom prints: each image's size.
PROBE = (
    '<script>window.addEventListener("load", () => document.body.setAttribute('
    '"data-images", [...document.images].map(i => i.naturalWidth + "x" + i.naturalHeight)'
    '.join(",")));</script>'
)


class _Recorder(http.server.BaseHTTPRequestHandler):
    """A proxy that forwards nothing: it records each request and answers 502."""

    seen: ClassVar[list[str]] = []

    def _record(self) -> None:
        self.seen.append(f"{self.command} {self.path}")
        self.send_response(502)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST = do_HEAD = do_CONNECT = _record

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def proxy() -> Iterator[tuple[str, list[str]]]:
    seen: ClassVar[list[str]] = []
    handler = type("Recorder", (_Recorder,), {"seen": seen})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def dump_dom(page: Path, proxy: str, profile: Path) -> str:
    """The page's DOM after its load event, every request through ``proxy``."""
    assert BROWSER is not None
    done = subprocess.run(
        [
            BROWSER,
            "--no-sandbox",  # CI runs as root
            "--disable-gpu",
            f"--user-data-dir={profile}",
            f"--proxy-server={proxy}",
            "--proxy-bypass-list=<-loopback>",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def _png_size(path: Path) -> str:
    width, height = struct.unpack(">II", path.read_bytes()[16:24])  # the IHDR chunk
    return f"{width}x{height}"


def _eval_args(tmp_path: Path) -> list[str]:
    return [
        "eval",
        "--config",
        str(DEMO / "nautilus.yaml"),
        "--queries",
        str(JUDGED / "queries.jsonl"),
        "--judgments",
        str(JUDGED / "qrels.tsv"),
        "--unanswerable",
        str(JUDGED / "unanswerable.jsonl"),
        "--report",
        "report.html",
    ]


def _calibrate_args(tmp_path: Path) -> list[str]:
    null = tmp_path / "null.txt"
    null.write_text("how do I bake bread\nbest time to visit japan\nrules of cricket\n")
    return [
        *("calibrate", "--out", "fit.json", "--config", str(DEMO / "nautilus.yaml")),
        *("--no-shipped-null-queries", "--null-queries", str(null)),
        *("--queries", str(JUDGED / "queries.jsonl"), "--judgments", str(JUDGED / "qrels.tsv")),
        *("--report", "report.html"),
    ]


#: Each report: its command, its page's heading, a section of it, its charts in order,
#: and its environment (calibrate needs ranking on).
REPORTS = {
    "eval": (
        _eval_args,
        "<h1>nautilus-ranking eval: nDCG@10</h1>",
        "The abstain (NAUTILUS_RANKING_MIN_CONFIDENCE)",
        ("ndcg", "abstain", "reliability", "first-relevant"),
        {},
    ),
    "calibrate": (
        _calibrate_args,
        "<h1>nautilus-ranking calibrate: hashing/bm25/idf-off</h1>",
        "The threshold (NAUTILUS_RANKING_MIN_CONFIDENCE)",
        ("reliability", "abstain"),
        {"NAUTILUS_RANKING_TOP_K": "10"},
    ),
}


@pytest.mark.parametrize("report", list(REPORTS))
def test_the_report_renders_its_charts_and_fetches_nothing(
    tmp_path: Path, proxy: tuple[str, list[str]], report: str
) -> None:
    address, seen = proxy
    args, heading, section, charts, env = REPORTS[report]
    done = run_cli(
        args(tmp_path),
        tmp_path,
        {
            "NAUTILUS_DATA_DIR": str(tmp_path / "data"),
            "NAUTILUS_EMBEDDER": "hashing",
            **env,
        },
    )
    assert done.returncode == 0, done.stderr
    page = tmp_path / "report.html"
    probed = tmp_path / "probed.html"
    probed.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"))
    dom = dump_dom(probed, address, tmp_path / "profile")
    assert heading in dom and section in dom
    found = re.search(r'data-images="([^"]*)"', dom)
    assert found is not None, "the load event never ran"
    pngs = [tmp_path / f"report-{name}.png" for name in charts]
    assert found.group(1).split(",") == [_png_size(png) for png in pngs]
    assert seen == []
    # the control: a page that loads remote images is seen by the proxy
    control = tmp_path / "control.html"
    control.write_text(
        '<html><body><img src="http://example.invalid/a.png">'
        '<img src="https://example.invalid/b.png"></body></html>'
    )
    dump_dom(control, address, tmp_path / "profile")
    assert "GET http://example.invalid/a.png" in seen
    assert "CONNECT example.invalid:443" in seen
