"""The confidence's fit: a logistic model per scoring setup, fitted leave-one-collection-out.

Every shared collection is served by the three real sources of ``partitioned.py`` (fts,
sql, vector; partitioned and hybrid) and asked three kinds of query:

- **own**: its judged queries; the label is whether a relevant row is in the top 10 the
  ranking hands over (``answerable`` when it is);
- **in domain**: the same queries with every relevant document removed from the sources
  (each source asked for ``30 + relevant`` rows, the relevant ones dropped, the first 30
  kept: what a source without them answers); label 0;
- **off topic**: as many queries drawn from the other collections (fixed seed); label 0.

Each query is ranked under every scoring setup of its embedder (hashing and onnx, IDF on
and off, the default lexical scorer; top 10) and its signals recorded
(``nautilus_ranking/selection/confidence.py``). Per setup, a logistic regression (numpy,
L2, Newton steps) is fitted on three collections and applied to the fourth; the pooled
out-of-collection predictions give the expected calibration error (10 equal-width bins,
95% bootstrap interval over queries), the reliability table, and, per candidate ``p``,
the abstain rates (off topic, in domain, answerable wrongly) and the nDCG@10 lost over
the answerable queries, an abstained answer counted as 0. The shipped fit is on all four.

    python -m benchmarks.quality.confidence_fit [--datasets DIR] [--work-dir DIR]
        [--embedders hashing,onnx] [--out FILE.md] [--write]

``--write`` stores the fits in ``nautilus_ranking/selection/confidence_fit.json``. The
fetched rows and the signals are kept in ``--work-dir`` and reused by the next run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pickle
import random
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.quality.ir_collections import (
    DATASETS,
    NAMES,
    Collection,
    each_collection,
    ndcg_at,
)
from benchmarks.quality.partitioned import SOURCE_LIMIT, build_broker, onnx_embedder
from nautilus_ranking import AdapterResult, Broker, RankingSynthesizer
from nautilus_ranking.embedders import embedder_from_name
from nautilus_ranking.log import configure_logging
from nautilus_ranking.selection import confidence
from nautilus_ranking.selection import confidence_fitting as fitting

TOP_K = 10
SCENARIOS = ("partitioned", "hybrid")
#: The settings each embedder is fitted under: (lexical scorer, IDF).
SETUPS = (("bm25", True), ("bm25", False))
KINDS = ("own", "in_domain", "off_topic")
SEED = 59
MIN_BLOCK = fitting.MIN_BLOCK
#: The abstain thresholds the report compares.
THRESHOLDS = (0.02, 0.04, 0.06, 0.08, 0.1, 0.12, 0.15, 0.2, 0.3)
#: The bars a recommended p meets on held-out collections.
OFF_TOPIC_ABSTAIN = 0.80
WRONG_ABSTAIN = 0.02
NDCG_LOSS = 0.005
FIT_PATH = (
    Path(__file__).resolve().parents[2] / "nautilus_ranking" / "selection" / confidence.FIT_FILE
)


@dataclass
class Record:
    """One query ranked under one setup."""

    setup: str
    collection: str
    scenario: str
    kind: str
    qid: str
    features: list[float]
    label: int
    ndcg: float  # nDCG@10 of an own query (0 otherwise)


def _without(result: AdapterResult, drop: set[str], limit: int) -> AdapterResult:
    """``result`` as a source without the ``drop`` documents answers, ``limit`` rows."""
    keep = [i for i, r in enumerate(result.rows) if str(r.get("id")) not in drop][:limit]
    matrix = result.embeddings[keep] if result.embeddings is not None else None
    return replace(
        result, rows=[result.rows[i] for i in keep], embeddings=matrix, source_ranks=None
    )


def fetch_all(
    broker: Broker, collection: Collection, off_topic: dict[str, str]
) -> dict[str, dict[str, list[AdapterResult]]]:
    """kind -> query id -> the sources' answers."""

    async def run() -> dict[str, dict[str, list[AdapterResult]]]:
        out: dict[str, dict[str, list[AdapterResult]]] = {k: {} for k in KINDS}
        for qid, text in collection.queries.items():
            relevant = set(collection.qrels[qid])
            broker.limit = SOURCE_LIMIT + len(relevant)
            deep = await broker.fetch(text)
            out["own"][qid] = [_without(r, set(), SOURCE_LIMIT) for r in deep]
            out["in_domain"][qid] = [_without(r, relevant, SOURCE_LIMIT) for r in deep]
        broker.limit = SOURCE_LIMIT
        for qid, text in off_topic.items():
            out["off_topic"][qid] = await broker.fetch(text)
        return out

    return asyncio.run(run())


def off_topic_queries(collection: Collection, others: Sequence[Collection]) -> dict[str, str]:
    """As many queries as ``collection`` has, drawn from the other collections."""
    pool = sorted((f"{c.name}:{qid}", text) for c in others for qid, text in c.queries.items())
    chosen = random.Random(f"{SEED}-{collection.name}").sample(
        pool, min(len(pool), len(collection.queries))
    )
    return dict(sorted(chosen))


def fetched_path(work: Path, embedder: str, collection: str, scenario: str) -> Path:
    """Where :func:`collect` keeps one cell's fetched answers."""
    return work / embedder / collection / f"{scenario}-fetched.pickle"


def ensure_fetched(datasets: Path, work: Path, embedder: str, collections: Iterable[str]) -> None:
    """Fetch the cells of ``embedder`` into ``work`` unless every one is there already."""
    if not all(
        fetched_path(work, embedder, c, s).is_file() for c in collections for s in SCENARIOS
    ):
        collect(datasets, work, [embedder])


def own_answers(path: Path) -> dict[str, list[AdapterResult]]:
    """A cell's fetched answers to its collection's own queries, by query id."""
    with path.open("rb") as handle:
        answers: dict[str, list[AdapterResult]] = pickle.load(handle)["own"]
    return answers


def text_mode(results: list[AdapterResult]) -> list[AdapterResult]:
    """The answers as undeclared sources in text mode: no order declared, no vectors
    (the ranker embeds each row's text)."""
    return [replace(r, ranked=None, source_ranks=None, embeddings=None) for r in results]


def collect(datasets: Path, work: Path, embedders: Sequence[str]) -> list[Record]:
    collections = list(each_collection(datasets))
    records: list[Record] = []
    for name in embedders:
        vector_embedder = onnx_embedder() if name == "onnx" else None
        if name == "onnx" and vector_embedder is None:
            print("onnx: the embed extra is not installed; skipped", file=sys.stderr)
            continue
        ranker_embedder = embedder_from_name(
            name, cache_size=200_000, data_dir=work / "vectors", disk_cache_mb=512
        )
        for collection in collections:
            others = [c for c in collections if c.name != collection.name]
            off = off_topic_queries(collection, others)
            texts = {**collection.queries, **{q: t for q, t in off.items()}}
            for scenario in SCENARIOS:
                folder = work / name / collection.name
                cache = fetched_path(work, name, collection.name, scenario)
                if cache.is_file():
                    with cache.open("rb") as handle:
                        fetched = pickle.load(handle)
                else:
                    broker = build_broker(collection, scenario, folder, vector_embedder)
                    with broker:
                        fetched = fetch_all(broker, collection, off)
                    with cache.open("wb") as handle:
                        pickle.dump(fetched, handle)
                for lexical, idf in SETUPS:
                    ranker = RankingSynthesizer(
                        top_k=TOP_K, idf=idf, lexical=lexical, embedder=ranker_embedder
                    )
                    for kind in KINDS:
                        for qid, results in fetched[kind].items():
                            ranked = ranker.merge_ranked(results, {"query": texts[qid]})
                            rows, found = ranked.ranking, ranked.confidence
                            if found is None:
                                continue
                            ids = [str(r.row.get("id")) for r in rows]
                            grades = collection.qrels.get(qid, {}) if kind == "own" else {}
                            label = int(any(grades.get(d, 0) >= 1 for d in ids[:TOP_K]))
                            records.append(
                                Record(
                                    found.setup,
                                    collection.name,
                                    scenario,
                                    kind,
                                    qid,
                                    found.signals.vector().tolist(),
                                    label,
                                    ndcg_at(ids, grades, TOP_K) if kind == "own" else 0.0,
                                )
                            )
                print(
                    f"{name}/{collection.name}/{scenario}: {len(records)} records",
                    file=sys.stderr,
                    flush=True,
                )
    return records


# --- the model: the library's fitter (nautilus_ranking/selection/confidence_fitting.py) ---


def columns(setup: str) -> tuple[str, ...]:
    return fitting.features_for(setup)


def fit_setup(setup: str, x: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    """One setup's fit as ``confidence_fit.json`` stores it."""
    return fitting.fit_setup(columns(setup), x, y, MIN_BLOCK)


def predict(setup: str, fit: dict[str, Any], x: np.ndarray) -> np.ndarray:
    return fitting.predict(fit, x)


ece = fitting.ece


def ece_interval(p: np.ndarray, y: np.ndarray, resamples: int = 1000) -> tuple[float, float]:
    return fitting.ece_interval(p, y, resamples, SEED)


def features_of(records: list[Record]) -> np.ndarray:
    """The records' columns their setup's fit reads (one setup)."""
    at = [confidence.FEATURES.index(n) for n in columns(records[0].setup)]
    return np.array([[r.features[i] for i in at] for r in records])


def held_out(records: list[Record]) -> np.ndarray:
    """Each record's probability from the fit on the other collections (its setup's)."""
    out = np.zeros(len(records))
    y = np.array([r.label for r in records], dtype=float)
    setups = np.array([r.setup for r in records])
    names = np.array([r.collection for r in records])
    for setup in sorted(set(setups.tolist())):
        at = np.flatnonzero(setups == setup)
        x = features_of([records[i] for i in at])
        for name in sorted(set(names.tolist())):
            train, test = names[at] != name, names[at] == name
            if test.any() and train.any():
                fit = fit_setup(setup, x[train], y[at][train])
                out[at[test]] = predict(setup, fit, x[test])
    return out


def reliability(p: np.ndarray, y: np.ndarray, bins: int = 10) -> list[str]:
    lines = [
        "| confidence | queries | mean confidence | share with a relevant row |",
        "|---|---|---|---|",
    ]
    which = np.minimum((p * bins).astype(int), bins - 1)
    for b in range(bins):
        at = which == b
        if at.any():
            lines.append(
                f"| {b / bins:.1f}–{(b + 1) / bins:.1f} | {int(at.sum())} | "
                f"{p[at].mean():.3f} | {y[at].mean():.3f} |"
            )
    return lines


def deployment_mix(records: list[Record], p: np.ndarray, y: np.ndarray) -> list[str]:
    """The held-out ECE without the in-domain queries (made by removing the answers: a
    deployment's traffic has its own queries and off-topic ones), and how the answerable
    queries read: what the shipped number means on a collection it was not fitted on."""
    kinds = np.array([r.kind for r in records])
    lines = [
        "**Without the in-domain queries** (out of collection):",
        "",
        "| queries | n | ECE [95% CI] | answerable: mean confidence | share with a relevant row |",
        "|---|---|---|---|---|",
    ]
    for name, at in (("own + off topic", kinds != "in_domain"), ("own", kinds == "own")):
        low, high = ece_interval(p[at], y[at])
        own = at & (kinds == "own")
        lines.append(
            f"| {name} | {int(at.sum())} | {ece(p[at], y[at]):.3f} [{low:.3f}, {high:.3f}] | "
            f"{p[own & (y == 1)].mean():.3f} | {y[own].mean():.3f} |"
        )
    return lines


def rates(records: list[Record], p: np.ndarray, threshold: float) -> dict[str, float]:
    kinds = np.array([r.kind for r in records])
    labels = np.array([r.label for r in records])
    ndcg = np.array([r.ndcg for r in records])
    below = p < threshold
    own = kinds == "own"
    answerable = own & (labels == 1)
    return {
        "off_topic": float(below[kinds == "off_topic"].mean()),
        "in_domain": float(below[kinds == "in_domain"].mean()),
        "wrong": float(below[answerable].mean()),
        "own_unanswered": float(below[own & (labels == 0)].mean()),
        # over the answerable queries, an abstained answer counted 0
        "ndcg_loss": float(np.where(below[answerable], ndcg[answerable], 0.0).mean())
        if answerable.any()
        else 0.0,
    }


def report(records: list[Record]) -> tuple[str, dict[str, dict[str, Any]], dict[str, float]]:
    """The markdown report, the fits on every collection, and the recommended p per setup."""
    p = held_out(records)
    y = np.array([r.label for r in records], dtype=float)
    setups = sorted({r.setup for r in records})
    lines = [
        f"Queries ranked: {len(records)} ({len(setups)} setups × 4 collections × "
        f"{len(SCENARIOS)} scenarios; kinds: own, in domain, off topic). "
        "Every number below is out of collection: each collection's predictions come "
        "from the fit on the other three.",
        "",
        "| setup | queries | ECE (10 bins) [95% CI] |",
        "|---|---|---|",
    ]
    low, high = ece_interval(p, y)
    lines.append(f"| pooled | {len(p)} | {ece(p, y):.3f} [{low:.3f}, {high:.3f}] |")
    fits: dict[str, dict[str, Any]] = {}
    chosen: dict[str, float] = {}
    rate_lines = [
        "| setup | p | off topic abstained | in domain abstained | answerable wrongly "
        "abstained | own unanswered abstained | nDCG@10 lost |",
        "|---|---|---|---|---|---|---|",
    ]
    for setup in setups:
        at = np.array([r.setup == setup for r in records])
        sub = [r for r in records if r.setup == setup]
        low, high = ece_interval(p[at], y[at])
        lines.append(
            f"| {setup} | {int(at.sum())} | {ece(p[at], y[at]):.3f} [{low:.3f}, {high:.3f}] |"
        )
        fits[setup] = fit_setup(
            setup, features_of(sub), np.array([r.label for r in sub], dtype=float)
        )
        best = None
        for threshold in THRESHOLDS:
            r = rates(sub, p[at], threshold)
            ok = (
                r["off_topic"] >= OFF_TOPIC_ABSTAIN
                and r["wrong"] <= WRONG_ABSTAIN
                and r["ndcg_loss"] <= NDCG_LOSS
            )
            if ok:
                best = threshold
            rate_lines.append(
                f"| {setup} | {threshold:g}{' ✓' if ok else ''} | {r['off_topic']:.1%} | "
                f"{r['in_domain']:.1%} | {r['wrong']:.1%} | {r['own_unanswered']:.1%} | "
                f"{r['ndcg_loss']:.4f} |"
            )
        if best is not None:
            chosen[setup] = best
    lines += ["", *deployment_mix(records, p, y)]
    lines += ["", "**Reliability, pooled** (out of collection)", "", *reliability(p, y)]
    lines += ["", "**Abstain rates by p** (out of collection; ✓: meets every bar)", "", *rate_lines]
    lines += [
        "",
        "Recommended p (the largest meeting every bar): "
        + (", ".join(f"{s}: {v:g}" for s, v in chosen.items()) or "none"),
    ]
    return "\n".join(lines), fits, chosen


def provenance(before: dict[str, Any], records: list[Record]) -> dict[str, Any]:
    """What the shipped file says of how it was made: the command, the method, the held-out
    ECE per embedder (pooled, and over own and off-topic queries only)."""
    p = held_out(records)
    y = np.array([r.label for r in records], dtype=float)
    kinds = np.array([r.kind for r in records])
    embedders = np.array([r.setup.split("/")[0] for r in records])
    ece_of = dict(before.get("held_out_ece", {}))
    pooled = dict(ece_of.get("pooled, in domain included", {}))
    mix = dict(ece_of.get("own and off-topic queries", {}))
    for name in sorted(set(embedders.tolist())):
        at = embedders == name
        pooled[name] = round(ece(p[at], y[at]), 3)
        deployed = at & (kinds != "in_domain")
        mix[name] = round(ece(p[deployed], y[deployed]), 3)
    return {
        **before,
        "fitted_by": "python -m benchmarks.quality.confidence_fit --work-dir DIR --write",
        "fitted_on": list(NAMES),
        "queries_per_setup": len(records) // max(1, len({r.setup for r in records})),
        "held_out": "leave one collection out (docs/tuning-selection.md)",
        "held_out_ece": {"pooled, in domain included": pooled, "own and off-topic queries": mix},
        "calibrated_on_your_sources": False,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=Path, default=DATASETS)
    parser.add_argument("--work-dir", type=Path)
    parser.add_argument("--embedders", default="hashing,onnx")
    parser.add_argument("--out", type=Path, help="write the markdown report here")
    parser.add_argument("--write", action="store_true", help=f"store the fits in {FIT_PATH.name}")
    args = parser.parse_args()
    configure_logging("error", "console")
    with tempfile.TemporaryDirectory() as scratch:
        work = args.work_dir if args.work_dir is not None else Path(scratch)
        records: list[Record] = []
        for name in [e.strip() for e in args.embedders.split(",")]:
            records_file = work / f"records-{name}.pickle"
            if records_file.is_file():
                with records_file.open("rb") as handle:
                    records += pickle.load(handle)
                continue
            found = collect(args.datasets, work, [name])
            work.mkdir(parents=True, exist_ok=True)
            with records_file.open("wb") as handle:
                pickle.dump(found, handle)
            records += found
    text, fits, chosen = report(records)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    if args.write:
        shipped = json.loads(FIT_PATH.read_text(encoding="utf-8")) if FIT_PATH.is_file() else {}
        setups = dict(shipped.get("setups", {}))
        setups.update({k: {**v, "recommended_p": chosen.get(k)} for k, v in fits.items()})
        document = {
            "top_k": TOP_K,
            "fitted_on": list(NAMES),
            "provenance": provenance(shipped.get("provenance", {}), records),
            "setups": dict(sorted(setups.items())),
        }
        FIT_PATH.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
