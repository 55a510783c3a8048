"""The sweep: which alternatives, the paired bootstrap, the hijack check, the recommendation."""

from __future__ import annotations

import io
import json
import math
import os
from pathlib import Path

import numpy as np
import pytest

from nautilus_ranking.broker import Broker
from nautilus_ranking.embedders import HashingEmbedder
from nautilus_ranking.evaluation.alternatives import Alternative, alternatives
from nautilus_ranking.evaluation.evaluate import run_eval
from nautilus_ranking.evaluation.familywise import recommend
from nautilus_ranking.evaluation.progress import Progress
from nautilus_ranking.evaluation.report import text_report
from nautilus_ranking.evaluation.sweep import HIJACK_FLOOR, Scored, bootstrap_ci, compare
from nautilus_ranking.settings.model import NautilusSettings
from nautilus_ranking.settings.parsing import LEXICAL_SCORERS
from nautilus_ranking.source_settings import applied_settings

SOURCES = ["fts", "sql", "vector"]


def test_bootstrap_is_deterministic_and_exact_on_a_constant_difference() -> None:
    assert bootstrap_ci(np.full(20, 0.1)) == pytest.approx((0.1, 0.1, 0.1))
    diffs = np.random.default_rng(1).normal(0.05, 0.2, size=40)
    first, second = bootstrap_ci(diffs), bootstrap_ci(diffs)
    assert first == second  # fixed seed: the same interval every run
    mean, low, high = first
    assert mean == pytest.approx(diffs.mean()) and low < mean < high


def names_and_env(settings: NautilusSettings) -> list[tuple[str, dict[str, str]]]:
    current = applied_settings(settings, SOURCES)
    return [
        (a.name, dict(a.env)) for a in alternatives(current, SOURCES, HashingEmbedder(), sweep=True)
    ]


def test_from_passthrough_the_sweep_tries_idf_on_and_every_source_at_every_level() -> None:
    rows = names_and_env(NautilusSettings())
    assert [name for name, _ in rows] == [
        "current (passthrough)",
        "IDF on",  # IDF off is passthrough itself: not listed twice
        "near duplicates on",  # and so are near duplicates off, diversity off, no cap
        "diversity 0.3",
        "at most 4 per source",
        *(f"lexical {s}" for s in LEXICAL_SCORERS if s != NautilusSettings().ranking_lexical),
        *(
            f"{source}:{level}"
            for source in ("fts", "sql", "vector")
            for level in ("-high", "-medium", "-low", "low", "medium", "high")
        ),
    ]
    assert dict(rows)["IDF on"] == {"NAUTILUS_RANKING_IDF": "true"}
    assert dict(rows)["sql:high"] == {"NAUTILUS_SOURCE_BOOSTS": "sql:high"}
    assert dict(rows)["sql:-high"] == {"NAUTILUS_SOURCE_BOOSTS": "sql:-high"}  # a demotion


def test_from_boosted_settings_alternatives_change_one_thing_each() -> None:
    rows = dict(
        names_and_env(NautilusSettings(ranking_idf=True, source_boosts="fts:high,ghost:low"))
    )
    assert rows["passthrough"] == {"NAUTILUS_RANKING_IDF": "", "NAUTILUS_SOURCE_BOOSTS": ""}
    assert rows["IDF off"] == {"NAUTILUS_RANKING_IDF": "false"}
    assert "IDF on" not in rows  # the current settings already
    assert rows["fts:none"] == {"NAUTILUS_SOURCE_BOOSTS": ""}
    assert rows["sql:low"] == {"NAUTILUS_SOURCE_BOOSTS": "fts:high,sql:low"}  # no 'ghost'
    alts = alternatives(
        applied_settings(NautilusSettings(ranking_idf=True, source_boosts="fts:high"), SOURCES),
        SOURCES,
        HashingEmbedder(),
        sweep=True,
    )
    assert [a.name for a in alts if a.same_as_current] == ["fts:high"]


def scored(
    name: str,
    ndcg: list[float],
    recall: dict[str, float],
    kind: str = "boost",
    source: str | None = "fts",
) -> Scored:
    alternative = Alternative(name, kind, None, (("NAUTILUS_SOURCE_BOOSTS", name),), source)
    values = np.array(ndcg)
    return Scored(alternative, values, values, values, dict.fromkeys(SOURCES, 1 / 3), recall)


def test_a_gain_that_hijacks_another_source_is_never_recommended() -> None:
    base_recall = {"fts": 0.3, "sql": 0.2, "vector": 0.3}
    current = scored("current", [0.3] * 30, base_recall, kind="current", source=None)
    # fts:high gains +0.2 on every query but leaves sql 0.1 / 0.2 = 0.5 of its recall
    hijack = scored("fts:high", [0.5] * 30, {"fts": 0.6, "sql": 0.1, "vector": 0.3})
    # sql:low gains +0.05 on every query and keeps the others' recall
    gentle = scored("sql:low", [0.35] * 30, {"fts": 0.3, "sql": 0.25, "vector": 0.27}, source="sql")
    entries = [current, hijack, gentle]
    compare(entries, {"fts": current, "sql": current})
    assert hijack.worst_kept == ("sql", pytest.approx(0.5)) and not hijack.safe
    assert gentle.worst_kept == ("vector", pytest.approx(0.9)) and gentle.safe
    assert HIJACK_FLOOR == 0.8
    rec = recommend(entries)
    assert rec.best is gentle and rec.qualifying == [gentle]


def test_nothing_is_recommended_without_a_ci_above_zero() -> None:
    recall = {"fts": 0.3, "sql": 0.2, "vector": 0.3}
    current = scored("current", [0.3, 0.5] * 15, recall, kind="current", source=None)
    noisy = scored("fts:low", [0.5, 0.3] * 15, recall)  # +0.2 / -0.2: mean 0, CI spans it
    entries = [current, noisy]
    compare(entries, {"fts": current})
    rec = recommend(entries)
    assert noisy.delta is not None and noisy.delta[1] < 0 < noisy.delta[2]
    assert rec.best is None and "no alternative improves nDCG@10" in rec.reason


@pytest.fixture
def small(tmp_path: Path) -> dict[str, Path]:
    """A real sources file: one good FTS source, one table source whose database path holds
    a file nautilus did not build (it fails every query: it is never overwritten);
    three queries (one unjudged), judgments with an id no source holds and an unknown query."""
    seed = tmp_path / "docs.jsonl"
    seed.write_text(
        "".join(
            json.dumps({"id": f"d{i}", "text": text}) + "\n"
            for i, text in enumerate(
                ["disk full on the orders database", "login loop", "checkout payment timeout"]
            )
        ),
        encoding="utf-8",
    )
    config = tmp_path / "nautilus.yaml"
    config.write_text(
        """
sources:
  - {id: kb, type: sqlite_fts, path: kb.db, seed: docs.jsonl, columns: [text]}
  - {id: broken, type: sqlite_table, path: b.db, seed: docs.jsonl,
      table: t, search_columns: [text]}
""",
        encoding="utf-8",
    )
    data = Path(os.environ["NAUTILUS_DATA_DIR"])
    data.mkdir(parents=True, exist_ok=True)
    (data / "b.db").write_text("not a database nautilus built\n", encoding="utf-8")
    queries = tmp_path / "q.tsv"
    queries.write_text(
        "q1\torders disk full\nq2\tpayment timeout\nq3\tunjudged\n", encoding="utf-8"
    )
    judgments = tmp_path / "qrels.txt"
    judgments.write_text("q1 0 d0 1\nq2 0 d2 2\nq2 0 gone 1\nq9 0 d1 1\n", encoding="utf-8")
    return {"config": config, "queries": queries, "judgments": judgments}


def test_a_failing_source_is_counted_and_the_others_are_still_scored(
    small: dict[str, Path],
) -> None:
    queries, judgments, config = small["queries"], small["judgments"], small["config"]
    result = run_eval(queries, judgments, str(config), NautilusSettings(), progress=False)
    cov = result.coverage
    assert cov.errors == {"broken": 2} and cov.evaluated == 2
    assert cov.never_seen == ["gone"] and cov.judged_unknown_query == ["q9"]
    assert cov.unjudged == ["q3"] and cov.relevant_returned == 2
    assert result.scored[0].ndcg.tolist() == [1.0, pytest.approx(2 / (2 + 1 / math.log2(3)))]
    text = text_report(result)
    assert "source errors: broken failed 2 of 2 queries" in text
    assert "never seen: 1 of 3 judged-relevant ids" in text and "'gone'" in text
    assert "judged queries missing from the queries file: 1 ('q9')" in text


def test_the_progress_bar_draws_on_a_terminal_only() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    shown = Terminal()
    with Progress(3, "ranking", stream=shown) as bar:
        for _ in range(3):
            bar.step()
    assert "ranking [" in shown.getvalue() and "3/3" in shown.getvalue()
    assert shown.getvalue().endswith("\r\033[K")  # erased when done
    piped = io.StringIO()
    with Progress(3, "ranking", stream=piped) as bar:
        bar.step(3)
    assert piped.getvalue() == ""


def test_a_sweep_asks_the_sources_once_per_query(
    small: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    fetch = Broker.fetch

    async def counted(self: Broker, query: str, context: object = None) -> object:
        calls.append(query)
        return await fetch(self, query)

    monkeypatch.setattr(Broker, "fetch", counted)
    result = run_eval(
        small["queries"],
        small["judgments"],
        str(small["config"]),
        NautilusSettings(),
        sweep=True,
        progress=False,
    )
    assert len(result.scored) > 5  # passthrough, IDF on, two sources at three levels
    assert sorted(calls) == ["orders disk full", "payment timeout"]  # one fan-out each
