"""The onnx embedder's graphs side by side: speed, fidelity and ranking quality.

Variants (nautilus_ranking/embedders/onnx_graph.py): ``shipped`` (the model file as it is:
int8 weights, float32 products), ``fused`` (attention and GELU fused, float32
products), ``int8`` (fused, every weight product in int8: the default) and
``int8-ffn-down-float32`` (the feed-forward down projections left in float32).

* speed: embedding N distinct real English texts with an empty cache (the demo's
  rows, as benchmarks/speed/speed.py's cold rank()), rounds interleaved across variants,
  median and min;
* fidelity: cosine of each variant's vectors to the shipped graph's, on the demo
  texts and on documents and queries of the shared collections;
* quality (``--quality``): nDCG@10 of ``nautilus (onnx)`` as benchmarks/quality/quality.py
  runs it (its sources, its vector source built with the same variant), per query,
  and the paired 95% bootstrap interval of each variant minus ``fused``.

    python -m benchmarks.speed.onnx_int8 [--counts 30 60] [--rounds 7] [--quality]
                                         [--variants shipped fused int8 ...] [--batch N]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.quality.ir_collections import (
    DATASETS,
    NAMES,
    ci_text,
    load,
    ndcg_at,
    paired_ci,
)
from nautilus_ranking.embedders.onnx import OnnxEmbedder
from nautilus_ranking.embedders.onnx_graph import ALL_KINDS

ROOT = Path(__file__).resolve().parents[2]
VARIANTS = ("shipped", "fused", "int8", "int8-ffn-down-float32")
BATCH: int | None = None  # --batch


class ShippedGraph(OnnxEmbedder):
    """The model file as shipped, without the rewrite (the reference vectors)."""

    def _graph(self, model: bytes) -> bytes:
        return model


class FfnDownFloat32(OnnxEmbedder):
    int8_kinds = ALL_KINDS - {"ffn_down"}


def make(variant: str, cache_size: int = 0) -> OnnxEmbedder:
    if variant == "shipped":
        embedder: OnnxEmbedder = ShippedGraph(cache_size=cache_size, int8=False)
        embedder.model_id += "-shipped"
    elif variant == "fused":
        embedder = OnnxEmbedder(cache_size=cache_size, int8=False)
    elif variant == "int8":
        embedder = OnnxEmbedder(cache_size=cache_size)
    else:
        embedder = FfnDownFloat32(cache_size=cache_size)
        embedder.model_id += "-ffn-down-float32"
    if BATCH:
        embedder.batch = BATCH
    return embedder


def demo_texts() -> list[str]:
    demo = ROOT / "nautilus_ranking" / "demo"
    docs = [
        json.loads(line)
        for name in ("tickets", "runbooks", "postmortems")
        for line in (demo / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    return [" ".join(str(v) for k, v in d.items() if k != "id") for d in docs]


def collection_texts(datasets: Path, per: int = 100, queries: int = 25) -> list[str]:
    out = []
    for name in NAMES:
        collection = load(name, datasets)
        docs = collection.docs[:: max(1, len(collection.docs) // per)][:per]
        out += [f"{d.get('title', '')} {d.get('text', '')}".strip() for d in docs]
        out += list(collection.queries.values())[:queries]
    return out


def speed(variants: list[str], counts: list[int], rounds: int) -> dict[str, dict[int, list[float]]]:
    texts = demo_texts()
    embedders = {}
    for v in variants:
        embedders[v] = make(v)
        started = time.perf_counter()
        embedders[v].embed("load")
        print(f"{v:>9}: load {time.perf_counter() - started:.2f} s", file=sys.stderr)
    times: dict[str, dict[int, list[float]]] = {v: {n: [] for n in counts} for v in variants}
    for r in range(rounds):
        for n in counts:
            batch = [f"{texts[i % len(texts)]} row-{r}-{i}" for i in range(n)]  # all new
            for v in variants:
                started = time.perf_counter()
                embedders[v].embed_batch(batch)
                times[v][n].append(time.perf_counter() - started)
    return times


def fidelity(variants: list[str], datasets: Path) -> dict[str, dict[str, np.ndarray]]:
    sets = {"demo": demo_texts(), "collections": collection_texts(datasets)}
    reference = make("shipped")
    ref = {k: reference.embed_batch(t) for k, t in sets.items()}
    return {
        v: {k: np.sum(make(v).embed_batch(t) * ref[k], axis=1) for k, t in sets.items()}
        for v in variants
        if v != "shipped"
    }


def quality(variants: list[str], datasets: Path) -> dict[str, dict[str, list[float]]]:
    """Per variant, per collection/scenario: nDCG@10 of nautilus (onnx) per query."""
    from benchmarks.quality import quality as bench

    out: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for v in variants:
            embedder = make(v, cache_size=100_000)
            strategy = bench.ranking(idf=True, embedder=embedder)
            out[v] = {}
            started = time.perf_counter()
            for name in NAMES:
                collection = load(name, datasets)
                for scenario in ("partitioned", "hybrid"):
                    broker = bench.build_broker(
                        collection, scenario, Path(scratch) / v / name, embedder
                    )
                    fetched = bench.fetch(broker, collection)
                    out[v][f"{name} {scenario}"] = [
                        ndcg_at(strategy(results, collection.queries[qid]), collection.qrels[qid])
                        for qid, results in fetched.items()
                    ]
            print(f"{v:>9}: quality {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    parser.add_argument("--counts", nargs="+", type=int, default=[30, 60])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--datasets", type=Path, default=DATASETS)
    parser.add_argument(
        "--quality", action="store_true", help="also nDCG@10 on the shared collections (minutes)"
    )
    parser.add_argument("--no-speed", action="store_true")
    parser.add_argument(
        "--batch",
        type=int,
        default=None,
        help="texts per session.run, every variant (default: the embedder's)",
    )
    args = parser.parse_args()
    global BATCH
    BATCH = args.batch
    variants = list(args.variants)
    if not args.no_speed:
        times = speed(variants, args.counts, args.rounds)
        print(
            "| variant | " + " | ".join(f"{n} texts cold: median (min)" for n in args.counts) + " |"
        )
        print("|---|" + "---|" * len(args.counts))
        for v in variants:
            cells = [
                f"{np.median(times[v][n]) * 1000:.0f} ms ({min(times[v][n]) * 1000:.0f})"
                for n in args.counts
            ]
            print(f"| {v} | " + " | ".join(cells) + " |")
        print()
        cos = fidelity(variants, args.datasets)
        print("| variant | cosine to shipped: demo min / mean | collections min / 1st pct / mean |")
        print("|---|---|---|")
        for v, c in cos.items():
            d, k = c["demo"], c["collections"]
            print(
                f"| {v} | {d.min():.4f} / {d.mean():.4f} | "
                f"{k.min():.4f} / {np.percentile(k, 1):.4f} / {k.mean():.4f} |"
            )
        print()
    if args.quality:
        base = "fused" if "fused" in variants else variants[0]
        scores = quality(variants, args.datasets)
        others = [v for v in variants if v != base]
        print(
            f"| cell | {base} nDCG@10 | "
            + " | ".join(f"{v} | Δ {v} − {base} [95% CI]" for v in others)
            + " |"
        )
        print("|---|---|" + "---|---|" * len(others))
        cells = [*scores[base], "all"]
        for cell in cells:
            ref = (
                scores[base][cell]
                if cell != "all"
                else [x for c in scores[base].values() for x in c]
            )
            row = [cell, f"{np.mean(ref):.3f}"]
            for v in others:
                ours = (
                    scores[v][cell] if cell != "all" else [x for c in scores[v].values() for x in c]
                )
                row += [f"{np.mean(ours):.3f}", ci_text(paired_ci(ours, ref))]
            print("| " + " | ".join(row) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
