"""Score the current settings and their alternatives on rows fetched once per query.

Every alternative is a set of ``NAUTILUS_*`` values an operator could deploy, and
its synthesizer is the one the broker would build from them (all ranking knobs
unset: passthrough). The sources are asked once per query; every alternative
re-ranks the same fetched rows, so a sweep costs one fan-out per query and the
comparison between alternatives is paired, query by query.

The hijack check, for each boost: every *other* source's recall@k relative to
the same ranking without that boost. ``HIJACK_FLOOR`` (0.8) is the line a
recommended boost must keep — the field lesson of docs/design.md, "Boosts".
(Turning ranking or IDF on moves rows between sources by relevance, not by
preference: there the gate is nDCG@k alone, and each source's recall@k is
reported.)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from nautilus_ranking.boost_entries import VALID_LEVELS
from nautilus_ranking.config import NautilusSettings
from nautilus_ranking.embedders import Embedder
from nautilus_ranking.evaluation.metrics import (
    DEFAULT_K,
    ndcg_at,
    recall_at,
    reciprocal_rank,
    relevant,
)
from nautilus_ranking.records import AdapterResult
from nautilus_ranking.synthesis.basic import BasicSynthesizer
from nautilus_ranking.synthesis.ranking import RankingSynthesizer

FloatArray = npt.NDArray[np.float64]

#: Every other source must keep this share of its recall@k under a recommended change.
HIJACK_FLOOR = 0.8
BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0
#: The settings that turn ranking on; passthrough unsets every one of them.
RANKING_KNOBS = (
    "ranking_top_k",
    "ranking_idf",
    "source_boosts",
    "ranking_max_candidates",
    "ranking_dedup_key",
    "ranking_cut",
)


@dataclass(frozen=True)
class Fetched:
    """One judged query and what every source returned for it (errors included)."""

    qid: str
    text: str
    grades: Mapping[str, int]
    results: list[AdapterResult]


@dataclass(frozen=True)
class Alternative:
    """Deployable settings: the ``NAUTILUS_*`` lines that select them, and their synthesizer."""

    name: str
    kind: str  # current | passthrough | idf | boost
    ranker: RankingSynthesizer | None  # None: passthrough (what the broker does)
    env: tuple[tuple[str, str], ...] = ()  # changes against the current settings
    source: str | None = None  # boost rows: the boosted source
    level: str | None = None  # boost rows: low | medium | high | none
    same_as_current: bool = False


@dataclass
class Scored:
    """One alternative's per-query metrics and its comparison with the current settings."""

    alternative: Alternative
    ndcg: FloatArray
    recall: FloatArray
    rr: FloatArray
    share: dict[str, float]  # mean share of the top k, per source
    source_recall: dict[str, float]  # mean recall@k of the relevant rows each source placed
    delta: tuple[float, float, float] | None = None  # mean nDCG diff vs current, 95% CI
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


@dataclass
class Recommendation:
    """The best alternative that improves nDCG@k with a CI above zero and is safe, or None."""

    best: Scored | None
    qualifying: list[Scored]
    reason: str


def row_id(row: Mapping[str, Any], id_field: str) -> str | None:
    value = row.get(id_field)
    return None if value is None else str(value)


def ranked_rows(alternative: Alternative, fetched: Fetched) -> list[tuple[str, dict[str, Any]]]:
    """``(source_id, row)`` best first, as the broker would return them."""
    if alternative.ranker is None:
        merged = BasicSynthesizer().merge(fetched.results)
        return [(sid, row) for sid, rows in merged.items() for row in rows]
    ranked = alternative.ranker.rank(fetched.results, {"query": fetched.text})
    return [(r.source_id, r.row) for r in ranked]


def score(
    alternative: Alternative,
    runs: Sequence[Fetched],
    source_ids: Sequence[str],
    id_field: str,
    k: int = DEFAULT_K,
    step: Callable[[], None] | None = None,
) -> Scored:
    """Per-query nDCG@k, recall@k and RR, and each source's share and recall of the top k."""
    n = len(runs)
    ndcg, recall, rr = np.zeros(n), np.zeros(n), np.zeros(n)
    share_sum = dict.fromkeys(source_ids, 0.0)
    recall_sum = dict.fromkeys(source_ids, 0.0)
    shared = 0
    for i, run in enumerate(runs):
        pairs = ranked_rows(alternative, run)
        ids = [row_id(row, id_field) for _, row in pairs]
        ndcg[i] = ndcg_at(ids, run.grades, k)
        recall[i] = recall_at(ids, run.grades, k)
        rr[i] = reciprocal_rank(ids, run.grades)
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


def bootstrap_ci(
    diffs: Sequence[float] | FloatArray,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float, float]:
    """Mean of paired per-query differences and its 95% percentile bootstrap interval.

    A fixed seed: the same inputs give the same interval on every run and machine.
    """
    values = np.asarray(diffs, dtype=np.float64)
    if len(values) == 0:
        return 0.0, 0.0, 0.0
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), size=(resamples, len(values)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(values.mean()), float(low), float(high)


# --- the alternatives -------------------------------------------------------------------


def _synthesizer(settings: NautilusSettings, embedder: Embedder) -> RankingSynthesizer | None:
    """What ``Broker.from_config`` builds from these settings (None: passthrough)."""
    if not settings.ranking_enabled:
        return None
    return RankingSynthesizer.from_settings(settings, embedder=embedder)


def _signature(settings: NautilusSettings) -> tuple[Any, ...]:
    if not settings.ranking_enabled:
        return ("passthrough",)
    return (
        settings.ranking_top_k,
        settings.ranking_idf,
        tuple(sorted(settings.source_boosts.items())),
        settings.ranking_max_candidates,
        settings.ranking_dedup_key,
        settings.ranking_cut,
    )


def boosts_value(boosts: Mapping[str, str], order: Sequence[str]) -> str:
    """``NAUTILUS_SOURCE_BOOSTS`` as written, in the sources' order."""
    rank = {sid.lower(): i for i, sid in enumerate(order)}
    return ",".join(
        f"{sid}:{level}"
        for sid, level in sorted(boosts.items(), key=lambda item: rank.get(item[0], len(rank)))
    )


def alternatives(
    settings: NautilusSettings, source_ids: Sequence[str], embedder: Embedder, sweep: bool
) -> list[Alternative]:
    """The current settings first; with ``sweep``: passthrough, IDF off/on, and every
    source at every boost level (and unboosted, where it is boosted today)."""
    current = Alternative(
        "current" if settings.ranking_enabled else "current (passthrough)",
        "current",
        _synthesizer(settings, embedder),
    )
    if not sweep:
        return [current]
    seen = {_signature(settings): "current"}
    out = [current]

    def add(
        name: str,
        kind: str,
        changed: NautilusSettings,
        env: list[tuple[str, str]],
        source: str | None = None,
        level: str | None = None,
    ) -> None:
        signature = _signature(changed)
        same = seen.get(signature) == "current"
        if signature in seen and kind != "boost":
            return  # the same deployable settings as a row already listed
        seen.setdefault(signature, name)
        out.append(
            Alternative(
                name, kind, _synthesizer(changed, embedder), tuple(env), source, level, same
            )
        )

    unset = [
        ("NAUTILUS_" + knob.upper(), "")
        for knob in RANKING_KNOBS
        if getattr(settings, knob) not in (None, False, {})
    ]
    add(
        "passthrough",
        "passthrough",
        settings.model_copy(
            update={
                "ranking_top_k": None,
                "ranking_idf": False,
                "source_boosts": {},
                "ranking_max_candidates": None,
                "ranking_dedup_key": None,
                "ranking_cut": None,
            }
        ),
        unset,
    )
    for on in (False, True):
        add(
            f"IDF {'on' if on else 'off'}",
            "idf",
            settings.model_copy(update={"ranking_idf": on}),
            [("NAUTILUS_RANKING_IDF", "true" if on else "false")],
        )
    for sid in source_ids:
        key = sid.lower()
        levels: list[str] = list(VALID_LEVELS)
        if key in settings.source_boosts:
            levels.insert(0, "none")
        for level in levels:
            boosts = {k: v for k, v in settings.source_boosts.items() if k != key}
            if level != "none":
                boosts[key] = level
            add(
                f"{sid}:{level}",
                "boost",
                settings.model_copy(update={"source_boosts": boosts}),
                [("NAUTILUS_SOURCE_BOOSTS", boosts_value(boosts, source_ids))],
                sid,
                level,
            )
    return out


def unboosted_reference(settings: NautilusSettings, source: str, embedder: Embedder) -> Alternative:
    """The same ranking without ``source``'s boost (ranking kept on): the hijack baseline."""
    boosts = {k: v for k, v in settings.source_boosts.items() if k != source.lower()}
    changed = settings.model_copy(update={"source_boosts": boosts})
    name = (
        f"{source}:none (ranked)"
        if boosts != settings.source_boosts
        else "ranked, no boost (reference)"
    )
    return Alternative(
        name, "reference", RankingSynthesizer.from_settings(changed, embedder=embedder)
    )


def compare(scored: list[Scored], references: Mapping[str, Scored]) -> None:
    """Fill each alternative's paired nDCG difference and its hijack check, in place."""
    current = scored[0]
    for reference in {id(r): r for r in references.values() if r is not current}.values():
        reference.delta = bootstrap_ci(reference.ndcg - current.ndcg)
    for entry in scored[1:]:
        entry.delta = bootstrap_ci(entry.ndcg - current.ndcg)
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


def recommend(scored: list[Scored], k: int = DEFAULT_K) -> Recommendation:
    """The single measured alternative with the largest nDCG@k gain whose CI is above zero
    and under which every other source keeps ``HIJACK_FLOOR`` of its recall@k."""
    candidates = [s for s in scored[1:] if not s.alternative.same_as_current]
    qualifying = [s for s in candidates if s.improves and s.safe]
    if qualifying:
        best = max(qualifying, key=lambda s: s.delta[0] if s.delta else 0.0)
        return Recommendation(best, qualifying, "")
    improving = [s for s in candidates if s.improves]
    if improving:
        reason = (
            f"{len(improving)} alternative(s) improve nDCG@{k} but take another source "
            f"below {HIJACK_FLOOR:g} of its recall@{k}: "
            + ", ".join(s.alternative.name for s in improving)
        )
    else:
        reason = f"no alternative improves nDCG@{k} with a 95% CI above zero"
    return Recommendation(None, [], reason)
