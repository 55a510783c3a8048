"""How likely a ranking holds something relevant: a calibrated confidence, and the abstain.

An agent handed ten rows assumes one of them answers it. ``confidence`` is the estimated
probability that at least one of the top 10 rows is relevant, from what the ranking
already computed, read before any boost (the rows the candidate cap keeps without
boosts, their unboosted relevance), so favouring a source never moves it:

- ``top_similarity``: the best raw content similarity of the batch (the cosine with a
  model, BM25 with the hashing embedder), and ``similarity_z``, how far it stands above
  the batch's others in standard deviations;
- ``top_lexical``: with a model, the best lexical (IDF-weighted hashing) cosine beside it;
- ``top_relevance`` and ``margin``: the best document's fused relevance and its lead over
  the second, in votes (one vote: a rank-1 vote, ``1 / 61``);
- ``agreement``: the share of the 10 best documents that two or more sources returned;
- ``query_words``: how many distinct words the query has.

A logistic model per scoring setup (embedder × lexical scorer × IDF: their scores have
different scales) turns them into a probability. Its parameters are data
(``confidence_fit.json``), fitted leave-one-collection-out on the shared collections by
``python -m benchmarks.quality.confidence_fit`` (docs/tuning-selection.md). A setup with
no fit has no confidence (``None``) and never abstains.

``NAUTILUS_RANKING_MIN_CONFIDENCE=p`` (opt-in) makes an answer whose confidence is below
``p`` abstain (:func:`decide`). It fails open: without a confidence, with a source that
failed, or with rows scored by words past the embedding deadline, an answer never
abstains, and says why not.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np

from nautilus_ranking.text.arrays import FloatArray, IntArray

#: The rows the confidence is about: at least one relevant among the best ``TOP_K``.
TOP_K = 10
#: One vote: a ranked source's vote at rank 1 (fusion.py), the unit of relevance margins.
_VOTE = 61.0
#: The features, in the order the fit's coefficients are stored.
FEATURES: tuple[str, ...] = (
    "top_similarity",
    "similarity_z",
    "top_lexical",
    "top_relevance",
    "margin",
    "agreement",
    "query_words",
)
FIT_FILE = "confidence_fit.json"


@dataclass(frozen=True, slots=True)
class Signals:
    """What a ranking says about whether it found anything (the module docstring)."""

    top_similarity: float
    similarity_z: float
    top_lexical: float
    top_relevance: float
    margin: float
    agreement: float
    query_words: int

    def vector(self, names: tuple[str, ...] = FEATURES) -> FloatArray:
        """The features ``names`` as a fit reads them (``query_words`` as ``log(1 + n)``)."""
        values = [
            math.log1p(max(0, self.query_words)) if name == "query_words" else getattr(self, name)
            for name in names
        ]
        return np.asarray(values, dtype=np.float64)


@dataclass(frozen=True, slots=True)
class Confidence:
    """A ranking's confidence: ``value`` (None: no fit for ``setup``, or a signal was
    not finite), the scoring ``setup`` it was read for, and the ``signals``."""

    value: float | None
    setup: str
    signals: Signals
    #: Which fit gave ``value``: ``shipped`` (fitted on public collections, not on these
    #: sources) or ``local`` (``nautilus-ranking calibrate`` on these sources).
    fit: str = "shipped"

    def as_dict(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "setup": self.setup,
            "signals": asdict(self.signals),
            "fit": self.fit,
        }


def setup_key(embedder: str | None, lexical: str, idf: bool) -> str:
    """``embedder/lexical/idf-on|off``: the scoring setups whose scores share a scale. A
    model's content has no lexical scorer of its own (its lexical half is the cosine
    under either), so its key names none."""
    scorer = lexical if embedder in (None, "hashing") else "-"
    return f"{embedder or 'unknown'}/{scorer}/idf-{'on' if idf else 'off'}"


def signals(
    similarity: FloatArray,
    lexical: FloatArray | None,
    relevance: FloatArray,
    voters: IntArray,
    doc: IntArray,
    query_words: int,
) -> Signals:
    """The signals of one batch: arrays over the reference rows (unboosted), one
    document counted once (its first row)."""
    _, first = np.unique(doc, return_index=True)
    sim = similarity[first]
    rel = relevance[first]
    top = float(sim.max()) if len(sim) else 0.0
    spread = float(sim.std()) if len(sim) > 1 else 0.0
    z = (top - float(sim.mean())) / spread if spread > 0 else 0.0
    order = np.argsort(-rel, kind="stable")
    best = [*rel[order[:2]].tolist(), 0.0, 0.0]
    agree = float(np.mean(voters[first][order[:TOP_K]] >= 2)) if len(order) else 0.0
    return Signals(
        top_similarity=top,
        similarity_z=z,
        top_lexical=float(lexical[first].max()) if lexical is not None and len(first) else 0.0,
        top_relevance=best[0] * _VOTE,
        margin=(best[0] - best[1]) * _VOTE,
        agreement=agree,
        query_words=int(query_words),
    )


@dataclass(frozen=True)
class Fit:
    """One setup's model: a logistic score over standardised ``features``, turned into a
    probability by an isotonic map (``knots``: score, probability; linear between them,
    flat beyond): a logistic alone rises towards 1, where the share of queries with a
    relevant row levels off (a query on the sources' topic whose answer they lack looks
    like one they hold). Each feature is first held to the range it had in the fit
    (``bounds``): a batch unlike any fitted on (four rows, one source) is read as the
    nearest fitted one, never extrapolated into a confident zero."""

    features: tuple[str, ...]
    mean: FloatArray
    scale: FloatArray
    coef: FloatArray
    intercept: float
    knots: tuple[FloatArray, FloatArray]
    bounds: tuple[FloatArray, FloatArray]

    def probability(self, features: FloatArray) -> float:
        held = np.clip(features, self.bounds[0], self.bounds[1])
        z = float(np.dot((held - self.mean) / self.scale, self.coef)) + self.intercept
        return float(np.interp(z, self.knots[0], self.knots[1]))


def parse_fits(data: dict[str, Any]) -> dict[str, Fit]:
    """The fits of a ``confidence_fit.json`` document (a setup naming a feature this
    module does not compute is left out: it would read the wrong numbers)."""
    fits = {}
    for key, fit in dict(data.get("setups", {})).items():
        names = tuple(str(n) for n in fit["features"])
        if not set(names) <= set(FEATURES):
            continue
        scale = np.asarray(fit["scale"], dtype=np.float64)
        fits[str(key)] = Fit(
            names,
            np.asarray(fit["mean"], dtype=np.float64),
            np.where(scale > 0, scale, 1.0),
            np.asarray(fit["coef"], dtype=np.float64),
            float(fit["intercept"]),
            (
                np.asarray(fit["knots"][0], dtype=np.float64),
                np.asarray(fit["knots"][1], dtype=np.float64),
            ),
            (
                np.asarray(fit["bounds"][0], dtype=np.float64),
                np.asarray(fit["bounds"][1], dtype=np.float64),
            ),
        )
    return fits


@lru_cache(maxsize=1)
def shipped_fits() -> dict[str, Fit]:
    """The fits shipped in the package (read once)."""
    text = resources.files("nautilus_ranking.selection").joinpath(FIT_FILE).read_text("utf-8")
    return parse_fits(json.loads(text))


def estimate(setup: str, observed: Signals, fits: Mapping[str, Fit] | None = None) -> Confidence:
    """The confidence of a batch with these signals under ``setup``'s fit (``fits``: a
    local fit's, else the shipped ones)."""
    fit = (fits if fits is not None else shipped_fits()).get(setup)
    value = None
    if fit is not None:
        features = observed.vector(fit.features)
        if bool(np.all(np.isfinite(features))):
            value = round(fit.probability(features), 4)
    return Confidence(value, setup, observed, "local" if fits is not None else "shipped")


def decide(
    confidence: Confidence | None,
    min_confidence: float | None,
    sources_errored: int,
    rows_lexical: int,
) -> dict[str, Any] | None:
    """The answer's ``abstain`` field under ``min_confidence`` (None: the knob is off):
    ``abstained`` and ``reason``. Below ``p`` the answer abstains, unless it fails open:
    no confidence (no fit for the setup, a signal not finite, nothing ranked), a source
    that failed (what it held is unknown), or rows scored by words past the embedding
    deadline (their scores are not the fitted setup's)."""
    if min_confidence is None:
        return None
    out: dict[str, Any] = {"min_confidence": min_confidence, "abstained": False}
    if confidence is None or confidence.value is None:
        why = "nothing ranked" if confidence is None else "no fit for this scoring setup"
        out["reason"] = f"fail open: no confidence ({why})"
        return out
    value = confidence.value
    if value >= min_confidence:
        return out
    if sources_errored:
        out["reason"] = f"fail open: {sources_errored} source(s) failed"
    elif rows_lexical:
        out["reason"] = (
            f"fail open: {rows_lexical} row(s) scored by words past the embedding deadline"
        )
    else:
        out["abstained"] = True
        out["reason"] = f"confidence {value:.3f} below min_confidence {min_confidence:g}"
    return out
