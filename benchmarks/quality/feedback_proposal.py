"""Does ``feedback propose`` recover a source's planted level from simulated agents' use?

    python -m benchmarks.quality.feedback_proposal [--datasets DIR] [--work-dir DIR]
                                                   [--only NAME] [--answers 2000] [--seeds 10]
                                                   [--scenarios NAME ...] [--out FILE.md]

Each shared collection is served as ``nautilus-ranking eval`` serves it (fts, sql and
vector, partitioned, the hashing embedder; ``evaluation/collection.py``) and every
judged query is fetched once. The ranker: IDF on, top 10.

**The simulated agents.** An answer is a judged query drawn at random, ranked under the
*current* levels: that list is what the agent is shown and what the log records (its
impressions, with their score components). The agent's attention is U-shaped over the
10 positions (:data:`ATTENTION`: most at the top, least in the middle, rising again at
the bottom: "lost in the middle"). How useful a row is to it follows the same ranking
under the *planted* levels: a row the planted levels would put at rank ``r`` is useful
with :func:`usefulness` ``(r)``. The agent uses the row at position ``k`` with
probability ``ATTENTION[k] × usefulness(planted rank)``. When the planted levels are
the current ones, every source is placed as agents value it: nothing should change.

**The scenarios** (the planted source rotates over fts, sql and vector with the seed):

* ``boost``: current none, planted ``medium``: within one step is ``low`` (a proposal can
  move one step; "no change" is two steps off and fails);
* ``demote``: current none, planted ``-medium``: within one step is ``-low``;
* ``unbiased``: planted = current (none): pass is no change for any source;
* ``bottom``: in every other query, the planted source's best 3 rows are shown in the
  last 3 slots, after the other sources' best 7 (as a layout that appends one source
  does); the other queries are ranked as usual. Agents value every row as it is placed;
  U-shaped attention rises again there. Pass is no change for any source (a falling
  curve reads the uses at the bottom as a reason to step up);
* ``bottom-demote``: current ``-medium``, planted ``-high``: pass is any proposal that
  does not step up (the sign kept).

**The seeds are shared across scenarios.** Seed ``s`` draws the same queries and the
same random numbers for uses in every scenario logged under the same levels (``boost``,
``demote`` and ``unbiased``), so a draw that flatters a source's uses in ``unbiased``
flatters it in ``demote`` too. For a small source (CACM's ``sql``: about 900 rows shown
a run) such a tail draw is a move in the one cell and a miss in the other; a test
tuned to pass both is tuned to the seeds.

The simulated answers are what ``feedback/logs.py`` reads back from the server's logs
(each row's position, source, id and logged score components; the positions used), and
``feedback propose``'s own code decides, with 200 bootstrap resamples a run. Beside it,
the
**top-down cascade baseline** (Craswell et al., 2008): the agent reads from the top and
stops at its first use, so the rows down to the first used one were examined; a
source's attractiveness is its first uses over its examined rows, its ratio that over
the median source's. And a **top-down examination** baseline: uses over those nDCG's
falling curve (``1 / log2(1 + k)``) predicts. Each steps whichever way its ratio is past
the same smallest change, with no test (it never abstains). For each method the table
counts the runs whose step went the planted way (right), stayed, or went the other way
(flipped); for ``unbiased``, "right" is staying.
"""

from __future__ import annotations

import argparse
import asyncio
import pickle
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.quality.ir_collections import DATASETS, NAMES
from benchmarks.sections import markers, write_section
from nautilus_ranking import RankingSynthesizer
from nautilus_ranking.broker import Broker
from nautilus_ranking.embedders import HashingEmbedder
from nautilus_ranking.evaluation.collection import write_sources
from nautilus_ranking.evaluation.evaluate import fetch_all
from nautilus_ranking.evaluation.judgments import read_judgments, read_queries
from nautilus_ranking.evaluation.metrics import relevant
from nautilus_ranking.evaluation.progress import Progress
from nautilus_ranking.evaluation.sweep import Fetched
from nautilus_ranking.log import configure_logging
from nautilus_ranking.proposal.logs import Answer, Shown
from nautilus_ranking.proposal.proposal import LADDER, MIN_EFFECT, level_name
from nautilus_ranking.proposal.propose import Proposal, Rules, propose
from nautilus_ranking.settings.model import NautilusSettings

SOURCES = ("fts", "sql", "vector")
TOP_K = 10
#: The simulated agents' attention by position: U-shaped (high, a trough, high again).
ATTENTION = np.array([0.85, 0.6, 0.42, 0.32, 0.27, 0.27, 0.32, 0.42, 0.55, 0.7])
#: How deep the planted ranking is read for a row's planted rank.
PLANTED_DEPTH = 30
#: Bootstrap resamples a run (the command's default is 1,000): a step reads the
#: resampled ratios' standard deviation, which 200 estimate well, at a fifth of the cost.
RESAMPLES = 200
CONFIG_HASH = "simulated0000000"


def usefulness(planted_rank: int) -> float:
    """How useful a row is to the agents by its rank under the planted levels."""
    return 1.0 / (1.0 + (planted_rank - 1) / 8.0)


@dataclass(frozen=True)
class Scenario:
    name: str
    current: str | None  # the planted source's level in the logs
    planted: str | None  # its level as agents value it
    last: int = 0  # the planted source's rows shown in the last slots, this many

    def passes(self, proposed: Proposal, source: str) -> bool:
        """Whether the proposal is what the scenario asks (the module says)."""
        if self.current == self.planted:
            return not proposed.changes
        got = _proposed(proposed, source)
        if self.name == "bottom-demote":
            return _steps(self.current, got) <= 0
        return abs(_steps(self.planted, got)) <= 1


SCENARIOS = (
    Scenario("boost", None, "medium"),
    Scenario("demote", None, "-medium"),
    Scenario("unbiased", None, None),
    Scenario("bottom", None, None, last=3),
    Scenario("bottom-demote", "-medium", "-high"),
)


def _steps(a: str | None, b: str | None) -> int:
    return LADDER.index(b) - LADDER.index(a)


def _proposed(proposal: Proposal, source: str) -> str | None:
    return proposal.proposed_levels().get(source, proposal.levels.get(source))


def fetched(dataset: Path, work: Path) -> tuple[list[Fetched], dict[str, str]]:
    """Every judged query's sources' answers, fetched once and kept in ``work``."""
    cache = work / f"fetched-{dataset.name}.pkl"
    if cache.exists():
        kept: tuple[list[Fetched], dict[str, str]] = pickle.loads(cache.read_bytes())
        return kept
    settings = NautilusSettings(embedder="hashing", data_dir=work / "data")
    config = write_sources(dataset, work / dataset.name, settings=settings)
    queries = read_queries(dataset / "queries.jsonl").texts
    grades = read_judgments(dataset / "qrels" / "test.tsv").grades
    judged = [(q, t, grades[q]) for q, t in queries.items() if relevant(grades.get(q, {}))]
    with Broker.from_config(str(config), settings) as broker:
        runs = asyncio.run(fetch_all(broker, judged, Progress(0, "", enabled=False)))
    cache.write_bytes(pickle.dumps((runs, queries)))
    return runs, queries


def ranked(runs: Sequence[Fetched], boosts: dict[str, str], depth: int) -> list[list[Any]]:
    """Each query's ranked rows under ``boosts``."""
    ranker = RankingSynthesizer(
        idf=True, top_k=depth, embedder=HashingEmbedder(), source_boosts=boosts or None
    )
    return [ranker.rank(run.results, {"query": run.text}) for run in runs]


def _key(row: Any) -> tuple[str, str]:
    return row.source_id, str(row.row.get("id"))


def simulate(
    shown: list[list[Any]],
    planted: list[list[Any]],
    levels: dict[str, str],
    answers: int,
    rng: np.random.Generator,
) -> list[Answer]:
    """``answers`` simulated answers and their uses, as ``feedback/logs.py`` reads them
    back from the server's logs (the reading itself is tested in tests/feedback)."""
    out = []
    planted_rank = [{_key(r): i for i, r in enumerate(rows, start=1)} for rows in planted]
    for n in range(answers):
        q = int(rng.integers(len(shown)))
        answer = Answer(f"a{n}", "2026-12-07T00:00:00.000Z", None, CONFIG_HASH, dict(levels))
        for k, row in enumerate(shown[q], start=1):
            components = {
                "score": row.score,
                "relevance": row.relevance,
                "boost_bump": row.boost_bump,
            }
            answer.shown.append(Shown(k, row.source_id, str(row.row.get("id")), components))
            r = planted_rank[q].get(_key(row), PLANTED_DEPTH + 1)
            if rng.random() < ATTENTION[k - 1] * usefulness(r):
                answer.used.add(k)
        out.append(answer)
    return out


def _last(rows: list[Any], source: str, count: int) -> list[Any]:
    """The other sources' best rows, then ``source``'s best ``count`` last: ``TOP_K`` rows."""
    theirs = [r for r in rows if r.source_id != source][: TOP_K - count]
    return theirs + [r for r in rows if r.source_id == source][: TOP_K - len(theirs)]


def _step(level: str | None, ratio: float) -> str | None:
    """One step the way ``ratio`` points, past the smallest change (no test)."""
    here = LADDER.index(level)
    step = 1 if ratio >= 1 + MIN_EFFECT else -1 if ratio <= 1 / (1 + MIN_EFFECT) else 0
    return LADDER[min(max(here + step, 0), len(LADDER) - 1)]


def cascade_level(answers: Sequence[Answer], source: str, level: str | None) -> str | None:
    """The cascade baseline's step for ``source``: first uses over the rows examined
    down to the first use, over the median source's."""
    first_uses: dict[str, float] = {}
    examined: dict[str, float] = {}
    for answer in answers:
        first = min(answer.used, default=None)
        for s in answer.shown:
            if first is None or s.position <= first:
                examined[s.source] = examined.get(s.source, 0.0) + 1
                if s.position == first:
                    first_uses[s.source] = first_uses.get(s.source, 0.0) + 1
    attractive = {s: first_uses.get(s, 0.0) / n for s, n in examined.items() if n}
    median = float(np.median(list(attractive.values())))
    return _step(level, attractive.get(source, median) / median if median else 1.0)


def top_down_level(answers: Sequence[Answer], source: str, level: str | None) -> str | None:
    """The top-down examination baseline's step for ``source``: its uses over those a
    falling curve predicts (nDCG's, ``1 / log2(1 + k)``, scaled to the log's uses), over
    the median source's ratio."""
    observed: dict[str, float] = {}
    expected: dict[str, float] = {}
    for answer in answers:
        for s in answer.shown:
            expected[s.source] = expected.get(s.source, 0.0) + 1 / np.log2(1 + s.position)
            observed[s.source] = observed.get(s.source, 0.0) + (s.position in answer.used)
    ratio = {s: observed[s] / e for s, e in expected.items() if e}
    median = float(np.median(list(ratio.values())))
    return _step(level, ratio.get(source, median) / median if median else 1.0)


@dataclass
class Cell:
    """One collection × scenario over its seeds."""

    passed: int = 0
    others_moved: int = 0  # runs where a source other than the planted one changed
    ratio: float = 0.0  # the planted source's ratio, summed over the runs
    baselines: dict[str, list[int]] = field(default_factory=dict)  # right, stayed, flipped
    runs: int = 0
    seconds: float = 0.0

    def count(self, name: str, scenario: Scenario, got: str | None) -> None:
        counts = self.baselines.setdefault(name, [0, 0, 0])
        want = int(np.sign(_steps(scenario.current, scenario.planted)))
        moved = int(np.sign(_steps(scenario.current, got)))
        counts[0 if moved == want else 1 if moved == 0 else 2] += 1

    def baseline_text(self, name: str) -> str:
        right, stayed, flipped = self.baselines.get(name, [0, 0, 0])
        return f"{right} / {stayed} / {flipped}"


def run_cell(
    runs: list[Fetched], scenario: Scenario, seeds: int, answers: int, resamples: int
) -> Cell:
    cell = Cell()
    rankings: dict[tuple[str, str | None, int], list[list[Any]]] = {}

    def ranked_once(source: str, level: str | None, depth: int) -> list[list[Any]]:
        key = (source, level, depth)
        if key not in rankings:
            rankings[key] = ranked(runs, {source: level} if level else {}, depth)
        return rankings[key]

    for seed in range(seeds):
        source = SOURCES[seed % len(SOURCES)]
        current = {source: scenario.current} if scenario.current else {}
        shown = ranked_once(source, scenario.current, TOP_K)
        truth = ranked_once(source, scenario.planted, PLANTED_DEPTH)
        if scenario.last:
            depth = ranked_once(source, scenario.current, PLANTED_DEPTH)
            shown = truth = [
                _last(rows, source, scenario.last) if i % 2 == 0 else rows[:TOP_K]
                for i, rows in enumerate(depth)
            ]
        logged = simulate(shown, truth, current, answers, np.random.default_rng(seed))
        started = time.perf_counter()
        proposal = propose(logged, CONFIG_HASH, Rules(seed=seed, resamples=resamples))
        cell.seconds += time.perf_counter() - started
        cell.runs += 1
        cell.passed += scenario.passes(proposal, source)
        cell.others_moved += any(r.step.source != source for r in proposal.changes)
        cell.ratio += next(r.evidence.ratio for r in proposal.records if r.step.source == source)
        level = scenario.current
        cell.count("pbm", scenario, _proposed(proposal, source))
        cell.count("cascade", scenario, cascade_level(logged, source, level))
        cell.count("top-down", scenario, top_down_level(logged, source, level))
    return cell


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=Path, default=DATASETS)
    parser.add_argument("--work-dir", type=Path)
    parser.add_argument("--only", choices=NAMES)
    parser.add_argument("--answers", type=int, default=2000)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--resamples", type=int, default=RESAMPLES)
    parser.add_argument(
        "--scenarios", nargs="+", choices=[s.name for s in SCENARIOS], help="only these"
    )
    parser.add_argument("--out", type=Path, help="write the table into this markdown file")
    args = parser.parse_args(argv)
    configure_logging("error", "console")
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="feedback-bench-"))
    lines = [
        f"Simulated agents, U-shaped attention, {args.answers} answers a run, {args.seeds} "
        "seeds a scenario (twice as many where nothing is planted); pass as the module "
        "defines it; PBM, cascade, top-down: the planted source's step went the planted way "
        "/ stayed / went another way.",
        "",
        "| collection | scenario | current → planted | pass | others moved | ratio | "
        "PBM: right / stayed / flipped | cascade | top-down | s/run |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name in NAMES:
        if args.only and name != args.only:
            continue
        runs, _ = fetched(args.datasets / name, work)
        for scenario in SCENARIOS:
            if args.scenarios and scenario.name not in args.scenarios:
                continue
            seeds = args.seeds * (2 if scenario.current == scenario.planted else 1)
            cell = run_cell(runs, scenario, seeds, args.answers, args.resamples)
            moved = f"{level_name(scenario.current)} → {level_name(scenario.planted)}"
            lines.append(
                f"| {name} | {scenario.name} | {moved} | {cell.passed}/{cell.runs} | "
                f"{cell.others_moved}/{cell.runs} | {cell.ratio / max(cell.runs, 1):.3f} | "
                f"{cell.baseline_text('pbm')} | {cell.baseline_text('cascade')} | "
                f"{cell.baseline_text('top-down')} | {cell.seconds / max(cell.runs, 1):.2f} |"
            )
            print(lines[-1], flush=True)
    body = "\n".join(lines)
    if args.out is not None:
        begin, end = markers("feedback-proposal")
        write_section(args.out, f"{begin}\n{body}\n{end}\n", "feedback-proposal")
    else:
        print(body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
