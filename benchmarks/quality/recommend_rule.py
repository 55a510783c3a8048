"""Does ``eval --recommend`` recommend what holds up on queries it has not seen?

    python -m benchmarks.quality.recommend_rule [--datasets DIR] [--work-dir DIR] [--splits 200]
                                                [--out FILE.md]

Each shared collection is served as ``nautilus-ranking eval`` serves it
(``python -m nautilus_ranking.evaluation.collection``: fts, sql and vector, partitioned,
the hashing embedder) and every judged query is fetched once. Every alternative of the
sweep (the hashing embedder only: the model's re-embedding is left out for time) and
every relevance-cut setting is ranked once per query; a split is then a choice of
queries, not a new ranking.

Per collection with at least ``2n`` judged queries, ``--splits`` random splits (fixed
seeds) each draw ``2n`` of its queries: a recommendation is made on the first ``n`` and
checked on the other ``n`` — the recommended alternative's mean nDCG@10 difference from
the current settings there (worse: below 0). Two rules, on the same splits:

* **today's**: the largest gain whose own paired bootstrap 95% CI is above zero, among
  the safe ones (the hijack check);
* **Holm, bootstrap p**: Holm's correction over the share of each alternative's
  bootstrap means at or below zero (what was tried first, and why it is not used);
* **corrected**: :func:`nautilus_ranking.evaluation.familywise.recommend`, Holm over the
  one-sided paired sign-flip p-values of every alternative, cuts included (what
  ``eval`` does).

Both from the same current settings: IDF on (where the docs' workflow stands after the
first sweep; from passthrough every alternative turns ranking on and wins). The
intervals and sign flips are ``sweep.paired_test``'s (10,000 resamples, seed 0),
computed for all alternatives of a split at once over the same resamples. Below 30 queries the
corrected rule's line is printed commented out; it is counted here as recommended.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.quality.ir_collections import DATASETS, NAMES
from benchmarks.sections import markers, write_section
from nautilus_ranking.broker import Broker
from nautilus_ranking.embedders import HashingEmbedder
from nautilus_ranking.evaluation.alternatives import alternatives
from nautilus_ranking.evaluation.collection import write_sources
from nautilus_ranking.evaluation.cuts import score_cuts
from nautilus_ranking.evaluation.evaluate import fetch_all
from nautilus_ranking.evaluation.familywise import recommend
from nautilus_ranking.evaluation.judgments import read_judgments, read_queries
from nautilus_ranking.evaluation.metrics import relevant
from nautilus_ranking.evaluation.progress import Progress
from nautilus_ranking.evaluation.sweep import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    HIJACK_FLOOR,
    Fetched,
    Scored,
    score,
)
from nautilus_ranking.log import configure_logging
from nautilus_ranking.settings.model import NautilusSettings
from nautilus_ranking.source_settings import applied_settings

SIZES = (10, 20, 50)
SPLITS = 200
K = 10
RULES = ("today", "Holm, bootstrap p", "corrected")


def fetched(
    dataset: Path, work: Path, settings: NautilusSettings
) -> tuple[list[Fetched], list[str]]:
    config = write_sources(dataset, work / dataset.name, settings=settings)
    queries = read_queries(dataset / "queries.jsonl").texts
    grades = read_judgments(dataset / "qrels" / "test.tsv").grades
    judged = [(q, t, grades[q]) for q, t in queries.items() if relevant(grades.get(q, {}))]
    with Broker.from_config(str(config), settings) as broker:
        sources = [s.id for s in broker.sources]
        runs = asyncio.run(fetch_all(broker, judged, Progress(0, "", enabled=False)))
    return runs, sources


class Table:
    """Per alternative, per query: nDCG@10 and each source's recall@10 (what a split needs)."""

    def __init__(self, runs: list[Fetched], sources: list[str], settings: NautilusSettings):
        current = applied_settings(settings, sources)
        embedder = HashingEmbedder()
        self.alts = alternatives(current, sources, embedder, sweep=True, k=K)
        self.sources = sources
        n = len(runs)
        self.ndcg = np.zeros((len(self.alts), n))
        self.recall = np.zeros((len(self.alts), len(sources), n))
        for a, alt in enumerate(self.alts):
            for q, run in enumerate(runs):
                one = score(alt, [run], sources, "id", K)
                self.ndcg[a, q] = one.ndcg[0]
                self.recall[a, :, q] = [one.source_recall[s] for s in sources]
        cuts = score_cuts(current, embedder, runs, "id", K)
        self.cuts = np.array([c.ndcg for c in cuts if not c.current])

    def half(self, at: np.ndarray, indices: np.ndarray, signs: np.ndarray | None) -> list[Scored]:
        """Scored entries over the queries ``at`` (the interval from ``indices``, the
        resamples of ``sweep.paired_test``; the p-value from ``signs``, its sign flips, or
        from the bootstrap resamples when None)."""
        diffs = self.ndcg[:, at] - self.ndcg[0, at]
        means = diffs[:, indices].mean(axis=2)  # alternatives x resamples
        low, high = np.percentile(means, [2.5, 97.5], axis=1)
        p = p_values(diffs, indices, signs)
        out = []
        base = self.recall[0][:, at].mean(axis=1)
        for a, alt in enumerate(self.alts):
            recall = self.recall[a][:, at].mean(axis=1)
            entry = Scored(
                alt,
                self.ndcg[a, at],
                self.ndcg[a, at],
                self.ndcg[a, at],
                {},
                dict(zip(self.sources, recall.tolist(), strict=True)),
            )
            if a:
                entry.delta = (float(diffs[a].mean()), float(low[a]), float(high[a]))
                entry.p_value = float(p[a])
                if alt.kind == "boost":
                    entry.kept = {
                        s: (recall[i] / base[i] if base[i] > 0 else None)
                        for i, s in enumerate(self.sources)
                        if s != alt.source
                    }
            out.append(entry)
        return out

    def cut_p_values(
        self, at: np.ndarray, indices: np.ndarray, signs: np.ndarray | None
    ) -> list[float]:
        diffs = self.cuts[:, at] - self.ndcg[0, at]
        return list(p_values(diffs, indices, signs).tolist())


def p_values(diffs: np.ndarray, indices: np.ndarray, signs: np.ndarray | None) -> np.ndarray:
    """One-sided p-values of each row's mean gain: ``sweep.paired_test``'s sign flips
    (``signs``), or the share of bootstrap means at or below zero (``signs`` None)."""
    if signs is None:
        means = diffs[:, indices].mean(axis=2)
        return (1 + np.count_nonzero(means <= 1e-12, axis=1)) / (1 + BOOTSTRAP_RESAMPLES)
    flipped = diffs @ signs.T / diffs.shape[1]  # rows x resamples
    observed = diffs.mean(axis=1, keepdims=True)
    return (1 + np.count_nonzero(flipped >= observed - 1e-12, axis=1)) / (1 + BOOTSTRAP_RESAMPLES)


def todays_rule(entries: list[Scored]) -> Scored | None:
    """The largest gain whose own 95% CI is above zero, among the safe ones."""
    ok = [
        e
        for e in entries[1:]
        if not e.alternative.same_as_current
        and e.delta is not None
        and e.delta[1] > 0
        and all(v is None or v >= HIJACK_FLOOR for v in e.kept.values())
    ]
    return max(ok, key=lambda e: e.delta[0] if e.delta else 0.0, default=None)


def simulate(table: Table, n: int, splits: int) -> dict[str, tuple[int, int]]:
    """Per rule: (splits with a recommendation, of those, worse on the other half)."""
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    indices = rng.integers(0, n, size=(BOOTSTRAP_RESAMPLES, n))  # paired_test's resamples
    signs = np.random.default_rng(BOOTSTRAP_SEED).choice(
        np.array([-1.0, 1.0]), size=(BOOTSTRAP_RESAMPLES, n)
    )
    counts = {rule: [0, 0] for rule in RULES}
    total = table.ndcg.shape[1]
    for split in range(splits):
        order = np.random.default_rng(1000 + split).permutation(total)
        first, second = order[:n], order[n : 2 * n]
        boot = table.half(first, indices, None)
        flip = table.half(first, indices, signs)
        picks = {
            "today": (boot, todays_rule(boot)),
            "Holm, bootstrap p": (
                boot,
                recommend(boot, K, table.cut_p_values(first, indices, None)).best,
            ),
            "corrected": (
                flip,
                recommend(flip, K, table.cut_p_values(first, indices, signs)).best,
            ),
        }
        for rule, (entries, pick) in picks.items():
            if pick is None:
                continue
            a = next(i for i, e in enumerate(entries) if e is pick)
            counts[rule][0] += 1
            if (table.ndcg[a, second] - table.ndcg[0, second]).mean() < 0:
                counts[rule][1] += 1
    return {rule: (c[0], c[1]) for rule, c in counts.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=Path, default=DATASETS)
    parser.add_argument("--work-dir", type=Path)
    parser.add_argument("--splits", type=int, default=SPLITS)
    parser.add_argument("--out", type=Path, help="write the table into this markdown file")
    args = parser.parse_args(argv)
    configure_logging("error", "console")
    started = time.perf_counter()
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="recommend-rule-"))
    settings = NautilusSettings(data_dir=work / "data", ranking_idf=True)
    head = "| collection | n | splits | " + " | ".join(
        f"{rule}: recommended | {rule}: worse on the other half" for rule in RULES
    )
    lines = [head + " |", "|---|---:|---:|" + "---:|---:|" * len(RULES)]
    for name in NAMES:
        runs, sources = fetched(args.datasets / name, work, settings)
        table = Table(runs, sources, settings)
        for n in SIZES:
            if len(runs) < 2 * n:
                continue
            result = simulate(table, n, args.splits)
            cells = []
            for rule in RULES:
                made, worse = result[rule]
                cells += [
                    f"{made / args.splits:.1%}",
                    f"{worse / args.splits:.1%} ({worse}/{made})",
                ]
            lines.append(f"| {name} | {n} | {args.splits} | " + " | ".join(cells) + " |")
            print(lines[-1], flush=True)
    took = time.perf_counter() - started
    note = (
        f"\n{len(table.alts) - 1} alternatives and {len(table.cuts)} cut settings a split "
        f"(from IDF on); {took:.0f} s in all."
    )
    print(note)
    if args.out is not None:
        begin, end = markers("recommend-rule")
        body = "\n".join([begin, *lines, note.strip(), end])
        write_section(args.out, body + "\n", "recommend-rule")
    return 0


if __name__ == "__main__":
    sys.exit(main())
