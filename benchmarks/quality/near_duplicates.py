"""Near copies and diversity on the shared collections with perturbed copies injected.

    python -m benchmarks.quality.near_duplicates [--only NAME] [--embedders hashing onnx]
                                                 [--modes declared undeclared] [--work-dir DIR]
                                                 [--queries N] [--speed-only] [--out FILE.md]

Set-up: the three partitioned sources of ``partitioned.py`` (fts, sql, vector; MiniLM
vectors when ``nautilus-ranking[embed]`` is installed). A fixed-seed sample of
:data:`SAMPLE` of each collection's documents, judged or not, each gets a perturbed
copy under a new id in the *next* source (fts → sql → vector → fts): its sentences
shuffled, its last fifth cut, a boilerplate line before it, and its words' case and
the whitespace between them changed (:func:`perturb`). The ranker: IDF on, top 10, the
hashing embedder or MiniLM (onnx); a cell is a collection × declared/undeclared ×
embedder, as in ``boost_safety``.

Every copy is folded into its original for the metrics: a second row of one original
holds a slot and gains nothing.

* **nDCG@10** (folded): a repeat scores 0 where it stands;
* **repeats** in the top 10: rows whose original is already above them, counted on
  the injected pairs (never by the system's own measure), summed over the queries;
* **α-nDCG@10** (α = 0.5, binary relevance, each original its own subtopic: a row's
  gain is 0.5^(rows of its original above it)); the ideal ranking, with disjoint
  subtopics, is the relevant originals first, then their copies (:func:`alpha_ndcg`);
* **tokens saved**: the o200k_base tokens (the estimate without the ``tokens`` extra)
  of the repeats' answer entries in the plain top 10 — what a budget spends on them
  and what the collapse gives back — per query;
* on the collections as they are (nothing injected), **Δ nDCG@10** of each setting
  against the plain ranking: how often two distinct documents are merged.

It also reports the resemblance of the injected pairs and of the distinct documents
that meet in one query's union (what the ``on`` threshold was chosen from), and the
time the stages add to a 40-row and a 400-row request (``benchmarks.speed.speed``'s batches,
the minimum CPU time over many calls, against the same request without them, in one
run).
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import random
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.quality import partitioned
from benchmarks.quality.boost_safety import Fetched, fetched_for
from benchmarks.quality.ir_collections import NAMES, Collection, load, ndcg_at
from benchmarks.sections import markers, write_section
from nautilus_ranking import RankingSynthesizer
from nautilus_ranking.embedders import HashingEmbedder
from nautilus_ranking.log import configure_logging
from nautilus_ranking.selection.budget import entry_text
from nautilus_ranking.selection.tokens import count_tokens, tokenizer_name
from nautilus_ranking.settings.parsing import NEAR_DUPLICATES_ON
from nautilus_ranking.synthesis.candidates import resemblance_texts
from nautilus_ranking.synthesis.near_duplicates import resemblance, shingles
from nautilus_ranking.text.tokens import TokenBatch

#: The share of each collection's documents given a copy, and the seed that picks them.
SAMPLE = 0.25
SEED = 41
COPY = "~copy"
EMBEDDERS = ("hashing", "onnx")
ALPHA = 0.5
#: The settings compared: (name, RankingSynthesizer keywords beyond the plain ranking's).
SETTINGS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("plain", {}),
    ("collapse 0.3", {"near_duplicates": 0.3}),
    ("collapse on (0.4)", {"near_duplicates": "on"}),
    ("collapse 0.5", {"near_duplicates": 0.5}),
    ("diversity 0.3", {"diversity": 0.3}),
    ("collapse on + diversity 0.3", {"near_duplicates": "on", "diversity": 0.3}),
    ("max 4 per source", {"max_per_source": 4}),
)
BOILERPLATE = (
    "Copied from the team wiki; last reviewed by the on-call engineer.",
    "Imported from the legacy knowledge base (read only).",
    "Note: this page mirrors the original document for offline use.",
)


def perturb(doc: dict[str, str], rng: random.Random) -> dict[str, str]:
    """A near copy of ``doc``: sentences shuffled, the last fifth of its words cut, a
    boilerplate line before it, words' case and the whitespace between them changed."""
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", doc["text"].strip()) if s]
    rng.shuffle(sentences)
    words = " ".join(sentences).split()
    words = words[: max(1, math.ceil(len(words) * 0.8))]
    changed = [
        w.upper() if rng.random() < 0.1 else w.lower() if rng.random() < 0.5 else w.title()
        for w in words
    ]
    spaced = "".join(w + rng.choice((" ", " ", "  ", "\n")) for w in changed).strip()
    return {
        "id": doc["id"] + COPY,
        "title": doc["title"].upper() if rng.random() < 0.5 else doc["title"],
        "text": rng.choice(BOILERPLATE) + "\n" + spaced,
    }


def injected_parts(collection: Collection) -> list[list[dict[str, str]]]:
    """The partitioned split, each sampled document's copy added to the next source."""
    rng = random.Random(SEED)
    parts = [collection.docs[i::3] for i in range(3)]
    picked = sorted(rng.sample(range(len(collection.docs)), round(SAMPLE * len(collection.docs))))
    extra: list[list[dict[str, str]]] = [[], [], []]
    for i in picked:
        extra[(i % 3 + 1) % 3].append(perturb(collection.docs[i], rng))
    return [part + more for part, more in zip(parts, extra, strict=True)]


def fetched_injected(collection: Collection, folder: Path) -> Fetched:
    import pickle

    cache = folder / f"fetched-{collection.name}-injected.pkl"
    if cache.exists():
        answers: Fetched = pickle.loads(cache.read_bytes())
        return answers
    broker = partitioned.build_broker(
        collection,
        "injected",
        folder / collection.name,
        partitioned.onnx_embedder(),
        parts=injected_parts(collection),
    )
    answers = partitioned.fetch(broker, collection)
    cache.write_bytes(pickle.dumps(answers))
    return answers


def original(doc_id: str) -> str:
    return doc_id.removesuffix(COPY)


def folded(ids: Sequence[str]) -> list[str]:
    """Each row's original, a repeat replaced by an id judged nowhere (it gains nothing)."""
    seen: set[str] = set()
    out = []
    for i, doc in enumerate(ids):
        o = original(doc)
        out.append(o if o not in seen else f"<repeat {i}>")
        seen.add(o)
    return out


def repeats(ids: Sequence[str]) -> int:
    return len(ids) - len({original(d) for d in ids})


def alpha_ndcg(
    ids: Sequence[str],
    grades: dict[str, int],
    union: Sequence[str],
    k: int = 10,
    alpha: float = ALPHA,
) -> float:
    """α-nDCG@k, binary relevance, each original its own subtopic (copies share it);
    ``union``: every id the sources returned for the query (the ideal's rows)."""
    relevant = {d for d, g in grades.items() if g > 0}
    seen: dict[str, int] = {}
    dcg = 0.0
    for i, doc in enumerate(ids[:k]):
        o = original(doc)
        if o in relevant:
            dcg += (1 - alpha) ** seen.get(o, 0) / math.log2(i + 2)
        seen[o] = seen.get(o, 0) + 1
    # With one subtopic a row, the ideal is every relevant original once (gain 1), then
    # the union's copies of relevant originals (gain 1 - alpha): the same for every system.
    copies = sum(1 for doc in set(union) if doc.endswith(COPY) and original(doc) in relevant)
    gains = [1.0] * len(relevant) + [1 - alpha] * copies
    ideal = sum(g / math.log2(i + 2) for i, g in enumerate(gains[:k]))
    return dcg / ideal if ideal > 0 else 0.0


Tops = dict[str, list[Any]]


def tops(collection: Collection, fetched: Fetched, embedder: Any, options: dict[str, Any]) -> Tops:
    ranker = RankingSynthesizer(idf=True, top_k=10, embedder=embedder, **options)
    return {
        qid: ranker.rank(results, {"query": collection.queries[qid]})
        for qid, results in fetched.items()
    }


def measure(collection: Collection, top: Tops, fetched: Fetched) -> dict[str, float]:
    n = len(top)
    ids = {qid: [str(r.row["id"]) for r in rows] for qid, rows in top.items()}
    union = {
        qid: [str(row["id"]) for result in results for row in result.rows]
        for qid, results in fetched.items()
    }
    return {
        "ndcg": sum(ndcg_at(folded(v), collection.qrels[q]) for q, v in ids.items()) / n,
        "repeats": sum(repeats(v) for v in ids.values()),
        "alpha": sum(alpha_ndcg(v, collection.qrels[q], union[q]) for q, v in ids.items()) / n,
    }


def tokens_on_repeats(top: Tops) -> float:
    """The tokens of the answer entries of rows whose original is above them."""
    texts = []
    for rows in top.values():
        seen: set[str] = set()
        for r in rows:
            o = original(str(r.row["id"]))
            if o in seen:
                texts.append(entry_text(r))
            seen.add(o)
    return sum(count_tokens(texts)) / max(len(top), 1)


def pair_resemblance(fetched: Fetched, injected: bool) -> list[float]:
    """Injected: each injected pair's resemblance where both met in one union.
    Otherwise: the largest resemblance between two distinct documents of each union."""
    out = []
    for results in fetched.values():
        rows = [r for result in results for r in result.rows]
        ids = [str(r["id"]) for r in rows]
        texts = resemblance_texts(rows)  # what the ranking compares: ids left out
        pairs = resemblance(shingles(TokenBatch.from_texts(texts))).expanded()
        values = dict(
            zip(
                zip(pairs.a.tolist(), pairs.b.tolist(), strict=True),
                pairs.value.tolist(),
                strict=True,
            )
        )
        if injected:
            where = {d: i for i, d in enumerate(ids)}
            for i, d in enumerate(ids):
                if d.endswith(COPY) and original(d) in where:
                    j = where[original(d)]
                    out.append(values.get((min(i, j), max(i, j)), 0.0))
        else:
            distinct = [v for (a, b), v in values.items() if original(ids[a]) != original(ids[b])]
            out.append(max(distinct, default=0.0))
    return out


def cells(
    names: list[str], embedders: list[str], modes: list[str], folder: Path, queries: int | None
) -> dict[str, Any]:
    summary: dict[str, Any] = {"copies": [], "distinct": [], "rows": []}
    for name in names:
        collection = load(name)
        if queries:
            collection.queries = dict(list(collection.queries.items())[:queries])
        injected = fetched_injected(collection, folder)
        plain_fetch = fetched_for(collection, "partitioned", folder)
        injected = {q: v for q, v in injected.items() if q in collection.queries}
        plain_fetch = {q: v for q, v in plain_fetch.items() if q in collection.queries}
        summary["copies"] += pair_resemblance(injected, True)
        summary["distinct"] += pair_resemblance(plain_fetch, False)
        for mode in modes:
            inj = injected if mode == "declared" else partitioned.undeclare(injected)
            raw = plain_fetch if mode == "declared" else partitioned.undeclare(plain_fetch)
            for embedder_name in embedders:
                embedder = (
                    HashingEmbedder() if embedder_name == "hashing" else partitioned.onnx_embedder()
                )
                if embedder is None:
                    continue
                cell = f"{name} {mode} {embedder_name}"
                base_inj = tops(collection, inj, embedder, {})
                base_raw = measure(collection, tops(collection, raw, embedder, {}), raw)
                saved = tokens_on_repeats(base_inj)
                for setting, options in SETTINGS:
                    top = base_inj if not options else tops(collection, inj, embedder, options)
                    got = measure(collection, top, inj)
                    clean = (
                        base_raw
                        if not options
                        else measure(collection, tops(collection, raw, embedder, options), raw)
                    )
                    row = {
                        "cell": cell,
                        "setting": setting,
                        **got,
                        "clean": clean["ndcg"] - base_raw["ndcg"],
                        "saved": saved,
                    }
                    summary["rows"].append(row)
                print(f"  {cell}: done", file=sys.stderr, flush=True)
    return summary


def tables(summary: dict[str, Any]) -> str:
    rows = summary["rows"]
    out = []
    copies, distinct = summary["copies"], summary["distinct"]
    if copies:
        q = np.quantile(copies, [0.05, 0.25, 0.5])
        out.append(
            f"Injected pairs that met in one union: {len(copies)}; resemblance 5th "
            f"percentile {q[0]:.2f}, quartile {q[1]:.2f}, median {q[2]:.2f}. The largest "
            f"between two distinct documents of one union (per query, {len(distinct)} "
            f"unions): median {statistics.median(distinct):.2f}, 99th percentile "
            f"{np.quantile(distinct, 0.99):.2f}, max {max(distinct):.2f}. `on` = "
            f"{NEAR_DUPLICATES_ON}.\n"
        )
    out.append(
        "| cell | setting | nDCG@10 (folded) | repeats in top 10 | α-nDCG@10 | "
        "Δ nDCG@10, nothing injected |"
    )
    out.append("|---|---|---:|---:|---:|---:|")
    for r in rows:
        out.append(
            f"| {r['cell']} | {r['setting']} | {r['ndcg']:.4f} | {r['repeats']} | "
            f"{r['alpha']:.4f} | {r['clean']:+.4f} |"
        )
    out.append("")
    out.append(_verdicts(rows))
    return "\n".join(out)


def _verdicts(rows: list[dict[str, Any]]) -> str:
    by_cell: dict[str, dict[str, dict[str, Any]]] = {}
    for r in rows:
        by_cell.setdefault(r["cell"], {})[r["setting"]] = r
    lines = [
        "| setting | repeats cut (all cells) | α-nDCG up, cells with repeats | "
        "α-nDCG better than plain, all cells | worst Δ nDCG, nothing injected |",
        "|---|---:|---:|---:|---:|",
    ]
    for setting, _ in SETTINGS[1:]:
        before = sum(c["plain"]["repeats"] for c in by_cell.values())
        after = sum(c[setting]["repeats"] for c in by_cell.values())
        with_repeats = [c for c in by_cell.values() if c["plain"]["repeats"] > 0]
        up = sum(c[setting]["alpha"] > c["plain"]["alpha"] for c in with_repeats)
        better = sum(c[setting]["alpha"] > c["plain"]["alpha"] for c in by_cell.values())
        worst = min(c[setting]["clean"] for c in by_cell.values())
        cut = 1 - after / before if before else 0.0
        lines.append(
            f"| {setting} | {cut:.0%} ({before} → {after}) | {up} of {len(with_repeats)} | "
            f"{better} of {len(by_cell)} | {worst:+.4f} |"
        )
    saved = [c["plain"]["saved"] for c in by_cell.values()]
    lines.append("")
    lines.append(
        f"Tokens the plain top 10 spends on repeats (each row's answer entry, "
        f"{tokenizer_name()}), per query: mean "
        f"{statistics.mean(saved):.0f}, max {max(saved):.0f} over the cells; "
        "the collapse hands none of them over."
    )
    return "\n".join(lines)


def speed(rounds: int = 5) -> str:
    """CPU milliseconds the stages add to one rank() call, minimum over many calls."""
    from tools import speed_batches as batches

    lines = [
        "| rows | plain (ms) | + collapse on, diversity 0.3 (ms) | added (ms) | budget |",
        "|---:|---:|---:|---:|---:|",
    ]
    for n, calls, budget in ((40, 300, 0.5), (400, 40, 5.0)):
        results = batches.split(batches.text_rows(n, np.random.default_rng(n)))
        plain = RankingSynthesizer(top_k=10, idf=True)
        spread = RankingSynthesizer(top_k=10, idf=True, near_duplicates="on", diversity=0.3)
        context = {"query": batches.QUERY}
        best = {"plain": math.inf, "spread": math.inf}
        for _ in range(rounds):  # alternate, so both see the same machine
            for name, ranker in (("plain", plain), ("spread", spread)):
                best[name] = min(best[name], _cpu_ms(partial(ranker.rank, results, context), calls))
        added = best["spread"] - best["plain"]
        lines.append(
            f"| {n} | {best['plain']:.3f} | {best['spread']:.3f} | {added:+.3f} | ≤ {budget} |"
        )
    return "\n".join(lines)


def _cpu_ms(call: Callable[[], object], calls: int) -> float:
    best = math.inf
    for _ in range(calls):
        start = time.process_time_ns()
        call()
        best = min(best, (time.process_time_ns() - start) / 1e6)
    return best


SECTION = "near-duplicates"


def section(body: str, command: str) -> str:
    """The page section: its heading, how it was made, the set-up, the tables."""
    begin, end = markers(SECTION)
    when = (
        f"`{command}` on {time.strftime('%Y-%m-%d')}: {platform.machine()}, "
        f"{os.cpu_count()} cores shared with other work, Python {platform.python_version()}, "
        f"tokens counted with {tokenizer_name()}."
    )
    setup = (
        (__doc__ or "")
        .split("\n\n", 2)[2]
        .strip()
        .replace(":data:`SAMPLE`", f"{SAMPLE:.0%}")
        .replace(" (:func:`perturb`)", "")
        .replace(" (:func:`alpha_ndcg`)", "")
        .replace("``", "`")
    )
    return (
        "\n\n".join(
            [
                begin,
                "## Near copies and diversity (`benchmarks/quality/near_duplicates.py`)",
                when,
                setup,
                body,
                end,
            ]
        )
        + "\n"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--only", choices=NAMES, action="append")
    parser.add_argument("--embedders", nargs="+", choices=EMBEDDERS, default=list(EMBEDDERS))
    parser.add_argument(
        "--modes", nargs="+", choices=partitioned.MODES, default=list(partitioned.MODES)
    )
    parser.add_argument("--work-dir", type=Path, help="keep the sources and answers here")
    parser.add_argument("--queries", type=int, help="only the first N queries of each")
    parser.add_argument("--speed-only", action="store_true")
    parser.add_argument("--out", type=Path, help="write the section into this markdown file")
    args = parser.parse_args()
    configure_logging("error", "console")
    parts = []
    if not args.speed_only:
        with tempfile.TemporaryDirectory() as scratch:
            folder = args.work_dir or Path(scratch)
            folder.mkdir(parents=True, exist_ok=True)
            summary = cells(
                args.only or list(NAMES), args.embedders, args.modes, folder, args.queries
            )
        parts.append(tables(summary))
    parts.append("### Speed\n\n" + speed())
    text = "\n\n".join(parts)
    print(text)
    if args.out:
        command = "python -m benchmarks.quality.near_duplicates " + " ".join(sys.argv[1:])
        write_section(args.out, section(text, command.strip()), SECTION, before="overhead")
    return 0


if __name__ == "__main__":
    sys.exit(main())
