"""``eval``'s abstain table: each ``NAUTILUS_RANKING_MIN_CONFIDENCE`` on the same rows.

An abstain is a trade: below ``p`` an answer hands nothing over, which is right for a
query nothing answers and costs the whole answer of one that something does. Both
sides are measured on the operator's own sources: the judged queries (every one has a
relevant judgment, so an abstain there is a false abstain, and its nDCG@k is lost)
and, given ``eval --unanswerable FILE``, queries nothing in the sources answers (no
judgments needed: an abstain there is the point).

Per ``p``: the off-topic abstain rate and the false-abstain rate, each with its exact
(Clopper–Pearson) 95% interval, and the nDCG@k lost with its paired bootstrap interval,
on the ranking of the current settings (ranking on with its defaults when they pass
rows through), the abstain decided as the broker decides it.

``p`` is recommended under the sweep's Holm correction: each ``p``'s hypothesis is that
its false-abstain rate is above the target (``--max-false-abstain``, 2%), tested by the
exact one-sided binomial test; among the ``p`` whose hypothesis is rejected, the one
that abstains on the most off-topic queries.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from nautilus_ranking.embedders import Embedder
from nautilus_ranking.evaluation.alternatives import measured
from nautilus_ranking.evaluation.intervals import at_most_p_value, clopper_pearson
from nautilus_ranking.evaluation.metrics import DEFAULT_K, ndcg_at
from nautilus_ranking.evaluation.sweep import Fetched, FloatArray, abstains, bootstrap_ci, row_id
from nautilus_ranking.settings.model import NautilusSettings

#: The thresholds tried (with the current one): the documented 0.12 and its neighbours.
MIN_CONFIDENCE_SETTINGS = (0.05, 0.08, 0.10, 0.12, 0.15, 0.20, 0.25, 0.30, 0.40, 0.50)
#: The false-abstain rate a recommended threshold must be shown to stay within.
MAX_FALSE_ABSTAIN = 0.02


@dataclass
class AbstainScored:
    """One threshold's figures (``p`` None: off, the baseline)."""

    p: float | None
    current: bool  # the threshold the current settings deploy
    false_abstains: int  # judged queries it abstains on
    judged: int
    off_topic_abstains: int  # unanswerable queries it abstains on
    unanswerable: int
    ndcg: FloatArray  # per judged query: 0 where it abstains
    lost: tuple[float, float, float]  # mean nDCG@k lost against off, bootstrap 95% CI
    p_value: float = 1.0  # one-sided: its false-abstain rate is within the target

    @property
    def setting(self) -> str:
        return "off" if self.p is None else f"{self.p:g}"

    @property
    def false_rate(self) -> tuple[float, float, float]:
        """The false-abstain rate and its Clopper–Pearson 95% interval."""
        return _rate(self.false_abstains, self.judged)

    @property
    def off_topic_rate(self) -> tuple[float, float, float] | None:
        """The off-topic abstain rate and its interval (None: no unanswerable queries)."""
        return _rate(self.off_topic_abstains, self.unanswerable) if self.unanswerable else None


@dataclass
class AbstainTable:
    """Every threshold's figures, the target, and what the confidence read per query."""

    rows: list[AbstainScored]  # off first
    target: float  # the false-abstain rate a recommendation must stay within
    confidence_judged: list[float | None]  # per judged query (None: no confidence)
    confidence_unanswerable: list[float | None]
    hit_judged: list[bool]  # per judged query: a relevant row in the top k (no abstain)
    recommended: AbstainScored | None = None
    reason: str = ""  # why nothing is recommended

    @property
    def tested(self) -> list[AbstainScored]:
        """The thresholds in the family of the sweep's correction (every one but off and
        the current one), when there are unanswerable queries to weigh them against."""
        if not self.rows or self.rows[0].unanswerable == 0:
            return []
        return [r for r in self.rows if r.p is not None and not r.current]


def _rate(count: int, n: int) -> tuple[float, float, float]:
    low, high = clopper_pearson(count, n)
    return (count / n if n else 0.0), low, high


def thresholds(current: float | None) -> list[float | None]:
    """Off, :data:`MIN_CONFIDENCE_SETTINGS`, and the current one when it is none of them."""
    out: list[float | None] = [None, *MIN_CONFIDENCE_SETTINGS]
    if current is not None and current not in out:
        out.append(current)
    return sorted(out, key=lambda p: -1.0 if p is None else p)


def score_abstain(
    settings: NautilusSettings,
    embedder: Embedder,
    judged: Sequence[Fetched],
    unanswerable: Sequence[Fetched],
    id_field: str,
    k: int = DEFAULT_K,
    target: float = MAX_FALSE_ABSTAIN,
    step: Callable[[], None] | None = None,
) -> AbstainTable:
    """Every threshold of :func:`thresholds` on one ranking per query (see the module)."""
    ranked = settings.model_copy(update={"ranking_min_confidence": None})
    if not ranked.ranking_enabled:
        ranked = ranked.model_copy(update={"ranking_top_k": k})
    ranker = measured(ranked, embedder)
    ps = thresholds(settings.ranking_min_confidence)
    shape = (len(ps), len(judged))
    ndcg, abstained = np.zeros(shape), np.zeros(shape, dtype=bool)
    confidence_judged: list[float | None] = []
    hits: list[bool] = []
    for q, run in enumerate(judged):
        found = ranker.merge_ranked(run.results, run.context())
        confidence_judged.append(found.confidence.value if found.confidence else None)
        full = ndcg_at([row_id(r.row, id_field) for r in found.ranking], run.grades, k)
        hits.append(full > 0.0)  # nDCG@k is above 0 exactly when a relevant row is in the top k
        for i, p in enumerate(ps):
            abstained[i, q] = abstains(found, p, run)
            ndcg[i, q] = 0.0 if abstained[i, q] else full
        if step is not None:
            step()
    off_topic = np.zeros((len(ps), len(unanswerable)), dtype=bool)
    confidence_unanswerable: list[float | None] = []
    for q, run in enumerate(unanswerable):
        found = ranker.merge_ranked(run.results, run.context())
        confidence_unanswerable.append(found.confidence.value if found.confidence else None)
        for i, p in enumerate(ps):
            off_topic[i, q] = abstains(found, p, run)
        if step is not None:
            step()
    rows = [
        AbstainScored(
            p,
            p == settings.ranking_min_confidence,
            int(abstained[i].sum()),
            len(judged),
            int(off_topic[i].sum()),
            len(unanswerable),
            ndcg[i],
            bootstrap_ci(ndcg[0] - ndcg[i]),
            at_most_p_value(int(abstained[i].sum()), len(judged), target),
        )
        for i, p in enumerate(ps)
    ]
    return AbstainTable(rows, target, confidence_judged, confidence_unanswerable, hits)


def choose(table: AbstainTable, rejected: Sequence[bool], family: int) -> None:
    """Fill the table's recommendation, in place: among :attr:`AbstainTable.tested` whose
    hypothesis the sweep's Holm correction rejected (``rejected``, in that order), the
    threshold that abstains on the most off-topic queries (the lower one on a tie)."""
    tested = table.tested
    if not tested:
        table.reason = (
            "no unanswerable queries to weigh an abstain against (pass --unanswerable FILE)"
        )
        return
    passed = [r for r, ok in zip(tested, rejected, strict=True) if ok and r.off_topic_abstains]
    if passed:
        table.recommended = max(passed, key=lambda r: (r.off_topic_abstains, -(r.p or 0.0)))
        return
    needed = _queries_for_target(table.target, family)
    table.reason = (
        f"no threshold's false-abstain rate is measurably within {table.target:.0%} after "
        f"the correction for {family} alternatives: that takes at least {needed} judged "
        f"queries with no false abstain ({table.rows[0].judged} judged)"
    )


def _queries_for_target(target: float, family: int, alpha: float = 0.025) -> int:
    """The fewest judged queries with no false abstain that pass the first Holm bar:
    ``(1 - target)^n <= alpha / family``."""
    return int(np.ceil(np.log(alpha / max(family, 1)) / np.log1p(-target)))
