"""Score the current settings and their alternatives on rows fetched once per query.

The alternatives (:mod:`.alternatives`) are deployable settings. The sources are asked
once per query; every alternative re-ranks the same fetched rows, so a sweep costs one
fan-out per query and the comparison between alternatives is paired, query by query:
per query, nDCG@k, recall@k, the reciprocal rank and the repeats in the top k
(:mod:`.repeats`); against the current settings, the mean difference with its paired
bootstrap interval and its one-sided sign-flip p-value (what :mod:`.familywise`
corrects).

The hijack check, for each boost: every *other* source's recall@k relative to
the same ranking without that boost. ``HIJACK_FLOOR`` (0.8) is the line a
recommended boost must keep — the field lesson of docs/design.md, "Boosts".
(Turning ranking or IDF on moves rows between sources by relevance, not by
preference: there the gate is nDCG@k alone, and each source's recall@k is
reported.)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from nautilus_ranking.evaluation.alternatives import Alternative
from nautilus_ranking.evaluation.delivered import Delivery
from nautilus_ranking.evaluation.metrics import (
    DEFAULT_K,
    ndcg_at,
    recall_at,
    reciprocal_rank,
    relevant,
)
from nautilus_ranking.evaluation.repeats import repeats_in_top
from nautilus_ranking.records import AdapterResult, RankedRow
from nautilus_ranking.selection import confidence
from nautilus_ranking.synthesis.basic import BasicSynthesizer
from nautilus_ranking.synthesis.ranking_result import RankingResult

FloatArray = npt.NDArray[np.float64]

#: Every other source must keep this share of its recall@k under a recommended change.
HIJACK_FLOOR = 0.8
BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0


@dataclass(frozen=True)
class Fetched:
    """One judged query and what every source returned for it (errors included)."""

    qid: str
    text: str
    grades: Mapping[str, int]
    results: list[AdapterResult]
    as_of: str | None = None  # the time the judgments hold at (eval --as-of)

    def context(self, as_of: bool = True) -> dict[str, Any]:
        """The ranking's request context: the query, and ``as_of`` when asked and given."""
        if as_of and self.as_of is not None:
            return {"query": self.text, "as_of": self.as_of}
        return {"query": self.text}


@dataclass
class Scored:
    """One alternative's per-query metrics and its comparison with the current settings."""

    alternative: Alternative
    ndcg: FloatArray
    recall: FloatArray
    rr: FloatArray
    share: dict[str, float]  # mean share of the top k, per source
    source_recall: dict[str, float]  # mean recall@k of the relevant rows each source placed
    repeats: FloatArray | None = None  # per query: top-k rows resembling a row above
    seconds: float = 0.0  # ranking every query under this alternative
    delta: tuple[float, float, float] | None = None  # mean nDCG diff vs current, 95% CI
    p_value: float = 1.0  # one-sided paired bootstrap p-value of a gain over current
    kept: dict[str, float | None] = field(default_factory=dict)  # boosts: others' recall
    reference: str = ""  # what ``kept`` is relative to

    @property
    def worst_kept(self) -> tuple[str, float] | None:
        """The source that kept the least of its recall@k, and how much."""
        known = [(sid, value) for sid, value in self.kept.items() if value is not None]
        return min(known, key=lambda item: item[1]) if known else None

    @property
    def safe(self) -> bool:
        worst = self.worst_kept
        return worst is None or worst[1] >= HIJACK_FLOOR

    @property
    def improves(self) -> bool:
        return self.delta is not None and self.delta[1] > 0.0


def row_id(row: Mapping[str, Any], id_field: str) -> str | None:
    value = row.get(id_field)
    return None if value is None else str(value)


def ranked_rows(
    alternative: Alternative, fetched: Fetched, delivery: Delivery | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """``(source_id, row)`` best first, as the broker would return them; under
    ``delivery``'s budget, only the rows that fit (what the agent is handed)."""
    if alternative.ranker is None:
        merged = BasicSynthesizer().merge(fetched.results)
        pairs = [(sid, row) for sid, rows in merged.items() for row in rows]
        if delivery is None:
            return pairs
        unscored = [RankedRow(sid, row, 0.0, i + 1, i + 1) for i, (sid, row) in enumerate(pairs)]
        return [(r.source_id, r.row) for r in delivery.deliver(unscored, fetched.text, False)]
    found = alternative.ranker.merge_ranked(fetched.results, fetched.context(alternative.as_of))
    settings = alternative.settings
    if settings is not None and abstains(found, settings.ranking_min_confidence, fetched):
        return []  # the answer abstains: it hands nothing over
    ranked = found.ranking
    if delivery is not None:
        ranked = delivery.deliver(ranked, fetched.text, True)
    return [(r.source_id, r.row) for r in ranked]


def abstains(found: RankingResult, min_confidence: float | None, fetched: Fetched) -> bool:
    """Whether the answer abstains under ``min_confidence``, decided as the broker decides
    it (:func:`~nautilus_ranking.selection.confidence.decide`: a failed source or rows
    scored by words past the deadline fail open)."""
    if min_confidence is None:
        return False
    errored = sum(1 for r in fetched.results if r.error is not None)
    lexical = int(found.embedding["rows_lexical"]) if found.embedding is not None else 0
    decided = confidence.decide(found.confidence, min_confidence, errored, lexical)
    return decided is not None and bool(decided["abstained"])


def score(
    alternative: Alternative,
    runs: Sequence[Fetched],
    source_ids: Sequence[str],
    id_field: str,
    k: int = DEFAULT_K,
    step: Callable[[], None] | None = None,
    count_repeats: bool = True,
    delivery: Delivery | None = None,
) -> Scored:
    """Per-query nDCG@k, recall@k and RR, and each source's share and recall of the top
    k; under ``delivery``'s budget, of the rows that fit."""
    started = time.perf_counter()
    n = len(runs)
    ndcg, recall, rr, repeats = np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n)
    share_sum = dict.fromkeys(source_ids, 0.0)
    recall_sum = dict.fromkeys(source_ids, 0.0)
    shared = 0
    for i, run in enumerate(runs):
        pairs = ranked_rows(alternative, run, delivery)
        ids = [row_id(row, id_field) for _, row in pairs]
        ndcg[i] = ndcg_at(ids, run.grades, k)
        recall[i] = recall_at(ids, run.grades, k)
        rr[i] = reciprocal_rank(ids, run.grades)
        if count_repeats:  # False: what the sweep did before it counted them (a benchmark's)
            repeats[i] = repeats_in_top([row for _, row in pairs], id_field, k)
        top = _first_copies(pairs, ids)[:k]
        if top:
            shared += 1
            for sid, _ in top:
                share_sum[sid] = share_sum.get(sid, 0.0) + 1 / len(top)
        wanted = relevant(run.grades)
        for sid, doc in top:
            if doc is not None and doc in wanted:
                recall_sum[sid] = recall_sum.get(sid, 0.0) + 1 / len(wanted)
        if step is not None:
            step()
    return Scored(
        alternative,
        ndcg,
        recall,
        rr,
        {sid: v / shared if shared else 0.0 for sid, v in share_sum.items()},
        {sid: v / n if n else 0.0 for sid, v in recall_sum.items()},
        repeats=repeats if count_repeats else None,
        seconds=time.perf_counter() - started,
    )


def _first_copies(
    pairs: list[tuple[str, dict[str, Any]]], ids: list[str | None]
) -> list[tuple[str, str | None]]:
    """``(source_id, id)`` with each repeated id dropped after its first place."""
    out: list[tuple[str, str | None]] = []
    seen: set[str] = set()
    for (sid, _), doc in zip(pairs, ids, strict=True):
        if doc is None:
            out.append((sid, None))
        elif doc not in seen:
            seen.add(doc)
            out.append((sid, doc))
    return out


def _resampled_means(values: FloatArray, resamples: int, seed: int) -> FloatArray:
    rng = np.random.default_rng(seed)
    means: FloatArray = values[rng.integers(0, len(values), size=(resamples, len(values)))].mean(
        axis=1
    )
    return means


def bootstrap_ci(
    diffs: Sequence[float] | FloatArray,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float, float]:
    """Mean of paired per-query differences and its 95% percentile bootstrap interval.

    A fixed seed: the same inputs give the same interval on every run and machine.
    """
    return paired_test(diffs, resamples, seed)[0]


def sign_flip_p_value(
    diffs: Sequence[float] | FloatArray,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> float:
    """One-sided p-value of a mean gain by random sign flips (a paired randomization
    test): ``(1 + #{flipped means >= the mean}) / (1 + resamples)``, each per-query
    difference's sign flipped at random, as it would be if the alternative and the
    current settings were exchangeable."""
    return paired_test(diffs, resamples, seed)[1]


def paired_test(
    diffs: Sequence[float] | FloatArray,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[tuple[float, float, float], float]:
    """:func:`bootstrap_ci` and :func:`sign_flip_p_value` of one set of differences.

    Why sign flips for the p-value and not the share of bootstrap means at or below
    zero: a knob that changed a few queries for the better and none for the worse has
    no bootstrap resample below zero, whatever the number of queries, so its bootstrap
    p-value is as small as the resamples allow; the sign flips ask how often chance
    alone would give such a mean. Measured (``benchmarks/quality/recommend_rule.py``,
    docs/eval.md): under Holm, the bootstrap p-values' picks were worse on the other
    half of the queries in most of the splits where they recommended anything.
    """
    values = np.asarray(diffs, dtype=np.float64)
    if len(values) == 0:
        return (0.0, 0.0, 0.0), 1.0
    means = _resampled_means(values, resamples, seed)
    low, high = np.percentile(means, [2.5, 97.5])
    signs = np.random.default_rng(seed).choice(np.array([-1.0, 1.0]), size=(resamples, len(values)))
    flipped = signs @ values / len(values)
    mean = float(values.mean())
    # a flipped mean equal to the observed one up to float rounding counts against it
    p = (1 + np.count_nonzero(flipped >= mean - 1e-12)) / (1 + resamples)
    return (mean, float(low), float(high)), float(p)


def compare(scored: list[Scored], references: Mapping[str, Scored]) -> None:
    """Fill each alternative's paired nDCG difference, its p-value and its hijack check,
    in place."""
    current = scored[0]
    others = {id(r): r for r in [*references.values(), *scored[1:]] if r is not current}
    for entry in others.values():
        entry.delta, entry.p_value = paired_test(entry.ndcg - current.ndcg)
    for entry in scored[1:]:
        alt = entry.alternative
        if alt.kind == "boost" and alt.source is not None:
            base = references[alt.source]
            entry.reference = f"{alt.source} unboosted"
            entry.kept = {
                sid: _ratio(entry.source_recall[sid], base.source_recall[sid])
                for sid in entry.source_recall
                if sid != alt.source
            }


def _ratio(value: float, base: float) -> float | None:
    return value / base if base > 0 else None
