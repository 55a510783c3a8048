"""How useful each source's rows were to agents, beyond what their positions predict.

A source's **ratio** is its rows' uses over the uses a typical source's rows would get
at the same positions: ``O / E`` with ``E = Σ θ[profile, position] × γ_ref`` over its
impressions (``position_model.py``: θ free per position, ``γ_ref`` the median source's
attractiveness). Above 1, agents used its rows more than their places predict: the
ranking under-places it; below 1, over-places it.

The interval and the p-value come from a bootstrap that resamples whole answers (an
answer's rows are seen and used together: resampling rows would pretend they are
independent), seeded, so the same logs give the same numbers. Each resample refits the
model. The interval is the resampled ratios' 2.5th to 97.5th percentile; the p-value is
two-sided, ``ratio - 1`` over the resampled ratios' standard deviation, and Holm's
step-down corrects it across the sources tested. A source with
fewer than ``min_impressions`` rows shown, or fewer than ``min_expected`` uses
predicted, or most of whose rows sit at positions no other source shares (its
usefulness cannot be told from those positions' attention), is not tested: "not enough
evidence".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from nautilus_ranking.proposal.logs import Answer
from nautilus_ranking.proposal.position_model import (
    FloatArray,
    PbmFit,
    fit_pbm,
    reference_gamma,
)

IntArray = npt.NDArray[np.int64]

#: Positions past this one are pooled into it (a long list's tail is thinly shown).
MAX_POSITION = 30
#: Bootstrap resamples of whole answers, and the seed that makes them reproducible.
RESAMPLES = 1000
SEED = 0
#: Below these a source is "not enough evidence": rows shown, and uses predicted.
MIN_IMPRESSIONS = 200
MIN_EXPECTED = 20.0
#: A source's usefulness is told apart from its positions' only where other sources'
#: rows are shown too: at least this share of its rows must be at positions where other
#: sources hold at least :data:`MIXED` of the rows (a source always shown in the last
#: slots, and only it, fits any curve there).
MIN_SHARED = 0.5
MIXED = 0.1
_CHUNK = 100  # resamples fitted at once


@dataclass(frozen=True)
class Impressions:
    """Every row shown, as parallel arrays: its answer, profile, position (0-based,
    pooled past ``MAX_POSITION``), source, and whether it was used."""

    answer: IntArray
    profile: IntArray
    position: IntArray
    source: IntArray
    used: npt.NDArray[np.bool_]
    profiles: list[str | None]
    sources: list[str]
    positions: int
    answers: int

    def cell(self) -> IntArray:
        """Each impression's flat index into ``[profile, position, source]``."""
        out: IntArray = (self.profile * self.positions + self.position) * len(
            self.sources
        ) + self.source
        return out

    def counts(self, weights: FloatArray | None = None) -> tuple[FloatArray, FloatArray]:
        """Shown and used counts ``[profile, position, source]``, each answer weighted."""
        shape = (len(self.profiles), self.positions, len(self.sources))
        w = np.ones(len(self.answer)) if weights is None else weights[self.answer]
        cells = self.cell()
        size = int(np.prod(shape))
        shown = np.bincount(cells, weights=w, minlength=size).reshape(shape)
        used = np.bincount(cells, weights=w * self.used, minlength=size).reshape(shape)
        return shown.astype(np.float64), used.astype(np.float64)


def impressions(answers: Sequence[Answer], max_position: int = MAX_POSITION) -> Impressions:
    """The answers' rows as arrays (profiles and sources in sorted order)."""
    profiles = sorted({a.profile for a in answers}, key=lambda p: (p is not None, p or ""))
    sources = sorted({s.source for a in answers for s in a.shown})
    p_index = {p: i for i, p in enumerate(profiles)}
    s_index = {s: i for i, s in enumerate(sources)}
    rows = [
        (
            i,
            p_index[a.profile],
            min(s.position, max_position),
            s_index[s.source],
            s.position in a.used,
        )
        for i, a in enumerate(answers)
        for s in a.shown
    ]
    table = np.array(rows, dtype=np.int64).reshape(-1, 5)
    deepest = int(table[:, 2].max()) if len(table) else 1
    return Impressions(
        table[:, 0], table[:, 1], table[:, 2] - 1, table[:, 3], table[:, 4].astype(bool),
        profiles, sources, deepest, len(answers),
    )  # fmt: skip


@dataclass(frozen=True)
class SourceUsefulness:
    """One source's uses against its positions' prediction, and whether it is evidence."""

    source: str
    answers: int  # answers that showed at least one of its rows
    impressions: int
    uses: int
    expected: float
    ratio: float
    low: float  # 95% bootstrap interval of the ratio
    high: float
    p_value: float  # two-sided, uncorrected
    p_holm: float | None  # Holm-adjusted across the sources tested; None: not tested
    enough: bool
    shared: float = 1.0  # the share of its rows at positions other sources share


@dataclass(frozen=True)
class Usefulness:
    """The position curve per profile and each source's usefulness."""

    impressions: Impressions
    fit: PbmFit  # the whole log's (leading axis of one)
    curve: FloatArray  # [profile, position]: a typical row's use rate, θ × γ_ref
    sources: list[SourceUsefulness]
    resamples: int
    seed: int


def _ratios(shown: FloatArray, used: FloatArray, fit: PbmFit) -> tuple[FloatArray, FloatArray]:
    """Each weighting's ``O / E`` per source (``[B, source]``) and ``E``."""
    present = shown[0].sum(axis=(0, 1)) > 0
    ref = reference_gamma(fit.gamma, present)
    expected = np.einsum("bpks,bpk->bs", shown, fit.theta) * ref[:, None]
    observed = used.sum(axis=(1, 2))
    return observed / np.maximum(expected, 1e-12), expected


def usefulness(
    answers: Sequence[Answer],
    resamples: int = RESAMPLES,
    seed: int = SEED,
    min_impressions: int = MIN_IMPRESSIONS,
    min_expected: float = MIN_EXPECTED,
    on_step: Callable[[int], None] | None = None,
) -> Usefulness:
    """Fit the whole log, then ``resamples`` resamples of its answers (``on_step(n)``
    after each chunk of them)."""
    imp = impressions(answers)
    shown, used = imp.counts()
    fit = fit_pbm(shown[None], used[None])
    ratio, expected = _ratios(shown[None], used[None], fit)
    boot = _bootstrap(imp, fit, resamples, seed, on_step)
    present = shown.sum(axis=(0, 1)) > 0
    gamma_ref = reference_gamma(fit.gamma, present)[0]
    # no use at all: EM only creeps toward 0, so say 0
    curve: FloatArray = fit.theta[0] * gamma_ref if used.sum() > 0 else np.zeros_like(fit.theta[0])
    at_cell = shown.sum(axis=2, keepdims=True)
    mixed = (at_cell - shown) >= MIXED * np.maximum(at_cell, 1e-12)  # others hold >= 10%
    per_answer = np.zeros((imp.answers, len(imp.sources)), dtype=bool)
    per_answer[imp.answer, imp.source] = True
    rows = []
    for j, source in enumerate(imp.sources):
        draws = boot[:, j]
        low, high = (float(x) for x in np.quantile(draws, [0.025, 0.975]))
        n = int(shown[..., j].sum())
        shared = float(shown[..., j][mixed[..., j]].sum()) / max(n, 1)
        enough = (
            n >= min_impressions and float(expected[0, j]) >= min_expected and shared >= MIN_SHARED
        )
        rows.append(
            SourceUsefulness(
                source, int(per_answer[:, j].sum()), n, int(used[..., j].sum()),
                float(expected[0, j]), float(ratio[0, j]), low, high,
                _p_value(float(ratio[0, j]), draws), None, enough, shared,
            )
        )  # fmt: skip
    return Usefulness(imp, fit, curve, _with_holm(rows), resamples, seed)


def _bootstrap(
    imp: Impressions,
    fit: PbmFit,
    resamples: int,
    seed: int,
    on_step: Callable[[int], None] | None,
) -> FloatArray:
    """``[resamples, source]``: the ratios of each resample of whole answers."""
    rng = np.random.default_rng(seed)
    out = []
    for start in range(0, resamples, _CHUNK):
        size = min(_CHUNK, resamples - start)
        shown_b, used_b = [], []
        for _ in range(size):
            weights = np.bincount(rng.integers(0, imp.answers, imp.answers), minlength=imp.answers)
            s, u = imp.counts(weights.astype(np.float64))
            shown_b.append(s)
            used_b.append(u)
        shown, used = np.stack(shown_b), np.stack(used_b)
        refit = fit_pbm(shown, used, start=fit)
        out.append(_ratios(shown, used, refit)[0])
        if on_step is not None:
            on_step(size)
    return np.concatenate(out) if out else np.ones((0, len(imp.sources)))


def _p_value(ratio: float, draws: FloatArray) -> float:
    """Two-sided p of "the ratio is 1": ``ratio - 1`` over the resampled ratios' standard
    deviation, read on the normal.

    On the ratio's own scale, not its log's: the resampled ratios of uses over expected
    uses are near symmetric, their logs skewed low (a long tail toward small ratios). A
    normal read of the logs then overstates the evidence for a ratio above 1 and
    understates it for one below. Not the share of draws past 1, which cannot go below
    ``1 / resamples`` and so, after Holm's correction, could never pass with many
    sources and few resamples."""
    spread = float(np.std(draws, ddof=1)) if len(draws) > 1 else 0.0
    if spread == 0:  # every resample alike: no doubt left either way
        return 1.0 if ratio == 1 else 0.0
    return math.erfc(abs(ratio - 1) / spread / math.sqrt(2))


def holm_adjusted(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in input order: the i-th smallest is
    ``max over j <= i of min(1, (m - j + 1) p_(j))``, so a source passes at familywise
    ``alpha`` when its adjusted p is at most ``alpha``."""
    p = np.asarray(p_values, dtype=np.float64)
    m = len(p)
    order = np.argsort(p, kind="stable")
    adjusted = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = adjusted
    return [float(x) for x in out]


def _with_holm(rows: list[SourceUsefulness]) -> list[SourceUsefulness]:
    tested = [r for r in rows if r.enough]
    holm = holm_adjusted([r.p_value for r in tested])
    adjusted = dict(zip((r.source for r in tested), holm, strict=True))
    return [replace(r, p_holm=adjusted.get(r.source)) for r in rows]
