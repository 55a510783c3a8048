"""The plot of the position curve and the ratios: a PNG with matplotlib, else HTML."""

from __future__ import annotations

from pathlib import Path

import pytest
from simulated_feedback import simulate

from nautilus_ranking.proposal.logs import read_logs
from nautilus_ranking.proposal.plot import write_plot
from nautilus_ranking.proposal.propose import Proposal, Rules, propose


@pytest.fixture(scope="module")
def proposal(tmp_path_factory: pytest.TempPathFactory) -> Proposal:
    folder = tmp_path_factory.mktemp("logs")
    simulate(folder, 300, [0.8, 0.4, 0.3, 0.6], {"a": 0.5, "b": 0.4})
    return propose(read_logs(folder).answers, "h", Rules(resamples=20))


def test_a_png_through_matplotlib(tmp_path: Path, proposal: Proposal) -> None:
    pytest.importorskip("matplotlib")
    written = write_plot(proposal, tmp_path / "curve.png")
    assert written == tmp_path / "curve.png"
    assert written.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_any_other_name_is_one_html_page_with_no_script(tmp_path: Path, proposal: Proposal) -> None:
    written = write_plot(proposal, tmp_path / "curve.svg")
    assert written == tmp_path / "curve.html"
    page = written.read_text()
    assert (
        page.count("<svg") == 2
        and "<script" not in page
        and "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    )
