"""Long rows: rows of 1,000-4,000 word pieces whose answering part may sit anywhere.

The shared collections are abstracts of a few hundred word pieces; the rows an agent
needs (runbooks, policies, incident write-ups) are often ten times longer, with the
answer in the middle. This benchmark makes such rows out of each shared collection:

* a sample of ``--queries`` judged queries (seeded); every document relevant to one of
  them (at most ``MAX_RELEVANT`` a query) becomes the *anchor* of one long row, and
  ``DISTRACTORS`` other documents become the anchors of rows relevant to none;
* each row is its anchor plus unrelated documents (judged relevant to none of the
  sampled queries, from the same collection, topped up from the other collections when
  a small one runs out), paragraphs apart, until the row holds a length drawn uniformly
  from 1,000-4,000 word pieces (all-MiniLM-L6-v2's tokenizer; without the ``embed``
  extra, 1.3 pieces a word);
* the anchor sits first, in the middle or last: the relevant (query, row) pairs take the
  three places in turn, so each is equally often (the counts are printed), and each
  partitioned source holds each place equally often (:func:`place_of`);
* a row's grade for a query is its anchor's (grades from the part), and its id the
  anchor's.

The rows are served as ``partitioned.py`` serves a collection (fts, sql and vector, each
a third of the rows or all of them; declared), and the union ranked by: RRF (k = 60);
nautilus with IDF on and the hashing embedder (``words``) and with the model
(``onnx``, the default with the extra); and the central references reranking the same
union over the full text (``central_rerank.py``: one FTS5 BM25 index over every long
row's whole text, and its RRF with the model's cosine). Per cell: nDCG@10 and each
strategy's share of relevant rows in the top 10 by where the anchor sits (first /
middle / last). Then under a token budget (1,000 and 2,000; nautilus onnx, top 20 as a
JSON answer counts them, ``selection.budget``): relevant rows handed over per answer
against the unbudgeted top 10, the queries whose best-ranked relevant row was left out
(and of those, the ones it was skipped for its size: a row ranked below it handed over
in its place), and the tokens used.

    python -m benchmarks.quality.long_rows [--datasets DIR] [--work-dir DIR]
                                           [--queries 12] [--only NAME] [--out FILE.md]

One core, the default sample (12 queries a collection): a few minutes, most of it the
vector source embedding the rows (once; ``--work-dir`` keeps the databases).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.quality.central_rerank import CentralRerank
from benchmarks.quality.ir_collections import DATASETS, NAMES, Collection, load, ndcg_at
from benchmarks.quality.partitioned import build_broker, fetch, onnx_embedder, unique_ids
from benchmarks.quality.quality import passthrough, rrf
from nautilus_ranking import AdapterResult, RankedRow, RankingSynthesizer
from nautilus_ranking.embedders import HashingEmbedder
from nautilus_ranking.log import configure_logging
from nautilus_ranking.selection.budget import apply_budget
from nautilus_ranking.synthesis import content

SEED = 67
QUERIES = 12
MAX_RELEVANT = 15
DISTRACTORS = 60
MIN_PIECES, MAX_PIECES = 1_000, 4_000
PLACES = ("first", "middle", "last")
SCENARIOS = ("partitioned", "hybrid")
TOP_K = 10
BUDGET_TOP = 20
BUDGETS = (1_000, 2_000)
PIECES_A_WORD = 1.3

Order = Callable[[list[AdapterResult], str], list[str]]


@dataclass
class LongRows:
    """One collection's long rows: the collection they make, and where each anchor sits."""

    collection: Collection
    place: dict[str, str]  # row id (its anchor's) -> first / middle / last
    pieces: dict[str, int]  # row id -> its length in word pieces


def piece_counter() -> Callable[[list[str]], list[int]]:
    """Word pieces of each text: the model's tokenizer, else 1.3 a word."""
    try:
        from tokenizers import Tokenizer

        from nautilus_ranking.embedders.onnx import TOKENIZER_PATH

        tokenizer = Tokenizer.from_file(str(TOKENIZER_PATH))
        tokenizer.no_truncation()
        return lambda texts: [len(e.ids) - 2 for e in tokenizer.encode_batch(texts)]
    except ImportError:
        return lambda texts: [round(len(t.split()) * PIECES_A_WORD) for t in texts]


def part_text(doc: dict[str, str]) -> str:
    return f"{doc['title']}. {doc['text']}" if doc["title"] else doc["text"]


def place_of(turn: int) -> str:
    """Where the ``turn``-th anchor sits: each place once in every three turns, and each
    once in every three turns of one partition (``partitioned.py`` gives source ``i``
    the rows ``i::3``): the place a source holds is not its own. (``turn % 3`` put every
    middle answer in the sql source and every last one in the vector source, which reads
    a row's head: the shares by place measured the sources.)"""
    return PLACES[(turn + turn // 3) % 3]


def make_long_rows(
    collection: Collection, others: Sequence[Collection], queries: int, seed: int = SEED
) -> LongRows:
    """The long-row collection of ``collection`` (see the module docstring)."""
    rng = random.Random(f"{seed}-{collection.name}")
    judged = sorted(q for q in collection.queries if collection.qrels.get(q))
    sample = sorted(rng.sample(judged, min(queries, len(judged))))
    by_id = {d["id"]: d for d in collection.docs}
    place: dict[str, str] = {}
    turn = 0
    for qid in sample:
        relevant = sorted(d for d, g in collection.qrels[qid].items() if g > 0 and d in by_id)
        for doc in rng.sample(relevant, min(MAX_RELEVANT, len(relevant))):
            if doc not in place:
                place[doc] = place_of(turn)
                turn += 1
    relevant_any = {d for q in sample for d in collection.qrels[q]}
    free = [d["id"] for d in collection.docs if d["id"] not in relevant_any]
    rng.shuffle(free)
    distractors = free[:DISTRACTORS]
    for doc in distractors:
        place[doc] = place_of(turn)
        turn += 1
    fillers = [by_id[d] for d in free[DISTRACTORS:]]
    outside = [d for other in others for d in other.docs]
    count = piece_counter()
    filler_pieces = count([part_text(d) for d in fillers])
    outside_rng = random.Random(f"{seed}-{collection.name}-outside")
    rows: list[dict[str, str]] = []
    pieces: dict[str, int] = {}
    for anchor_id, where in place.items():
        anchor = by_id[anchor_id]
        target = rng.randint(MIN_PIECES, MAX_PIECES)
        total = count([part_text(anchor)])[0]
        parts: list[str] = []
        for i in rng.sample(range(len(fillers)), len(fillers)):
            if total >= target:
                break
            parts.append(part_text(fillers[i]))
            total += filler_pieces[i] + 1
        while total < target:  # a small collection: top up from the others
            extra = part_text(outside_rng.choice(outside))
            parts.append(extra)
            total += count([extra])[0] + 1
        at = {"first": 0, "middle": len(parts) // 2, "last": len(parts)}[where]
        parts.insert(at, part_text(anchor))
        rows.append({"id": anchor_id, "title": "", "text": "\n\n".join(parts)})
        pieces[anchor_id] = total
    qrels = {
        q: {d: g for d, g in collection.qrels[q].items() if d in place and g > 0} for q in sample
    }
    queries_kept = {q: collection.queries[q] for q in sample if qrels[q]}
    long = Collection(f"{collection.name}-long", rows, queries_kept, qrels)
    return LongRows(long, place, pieces)


def ranking(**options: Any) -> Order:
    ranker = RankingSynthesizer(idf=True, **options)

    def order(results: list[AdapterResult], query: str) -> list[str]:
        return unique_ids([r.row for r in ranker.rank(results, {"query": query})])

    return order


@contextmanager
def first_128() -> Iterator[None]:
    """Rows scored as before passages: by their first 128 word pieces (no row is read
    as passages), to measure today's scoring beside passages in one run."""
    saved = content.long_rows
    content.long_rows = lambda texts: np.zeros(0, dtype=np.intp)
    try:
        yield
    finally:
        content.long_rows = saved


def today(order: Order) -> Order:
    def scored_first_128(results: list[AdapterResult], query: str) -> list[str]:
        with first_128():
            return order(results, query)

    return scored_first_128


def strategies(rerank: CentralRerank, model: Any) -> dict[str, Order]:
    out: dict[str, Order] = {
        "RRF k=60": rrf,
        "nautilus (words)": ranking(embedder=HashingEmbedder()),
    }
    if model is not None:
        out["nautilus (onnx, first 128)"] = today(ranking(embedder=model))
        out["nautilus (onnx)"] = ranking(embedder=model)
    out["central BM25 (full text)"] = lambda results, q: rerank.bm25(passthrough(results, q), q)
    out["central BM25+dense"] = lambda results, q: rerank.hybrid(passthrough(results, q), q)
    return out


def place_shares(
    ranked: list[str], grades: dict[str, int], place: dict[str, str]
) -> dict[str, tuple[int, int]]:
    """Per place: (relevant rows in the top 10, relevant rows the sources returned) for
    one query: what the ranking makes of the rows it was given, wherever their answer."""
    top = set(ranked[:TOP_K])
    union = set(ranked)
    out = {p: [0, 0] for p in PLACES}
    for doc in grades:
        if doc not in union:
            continue
        out[place[doc]][1] += 1
        out[place[doc]][0] += doc in top
    return {p: (a, b) for p, (a, b) in out.items()}


def evaluate(
    long: LongRows, fetched: dict[str, list[AdapterResult]], orders: dict[str, Order]
) -> dict[str, dict[str, Any]]:
    """Per strategy: nDCG@10 per query and the top-10 shares by place."""
    out: dict[str, dict[str, Any]] = {}
    for name, order in orders.items():
        ndcg: list[float] = []
        found = {p: [0, 0] for p in PLACES}
        for qid, results in fetched.items():
            grades = long.collection.qrels[qid]
            ranked = order(results, long.collection.queries[qid])
            ndcg.append(ndcg_at(ranked, grades, TOP_K))
            for p, (a, b) in place_shares(ranked, grades, long.place).items():
                found[p][0] += a
                found[p][1] += b
        shares = {p: a / b if b else 0.0 for p, (a, b) in found.items()}
        out[name] = {"ndcg": ndcg, "places": shares}
    return out


def budget_figures(
    long: LongRows,
    fetched: dict[str, list[AdapterResult]],
    rank: Callable[[list[AdapterResult], str], list[RankedRow]],
    budget: int,
    passages: bool,
) -> dict[str, float]:
    """Under ``budget`` (a too-large row as its passage, or left out): relevant rows
    handed over per answer, the unbudgeted top 10's, the queries whose best-ranked
    relevant row was left out (and was skipped for its size), the tokens used."""
    handed, top10, left_out, too_large, used = [], [], 0, 0, []
    for qid, results in fetched.items():
        grades = long.collection.qrels[qid]
        ranked = rank(results, long.collection.queries[qid])
        data = {r.source_id: [] for r in ranked}
        _, kept, fitted = apply_budget(data, ranked, budget, passages=passages)
        ids = [str(r.row["id"]) for r in kept]
        handed.append(sum(1 for d in ids if d in grades))
        all_ids = [str(r.row["id"]) for r in ranked]
        top10.append(sum(1 for d in all_ids[:TOP_K] if d in grades))
        best = next((d for d in all_ids if d in grades), None)
        left_out += best is not None and best not in ids
        # skipped for its size: a row ranked below it was handed over in its place
        too_large += (
            best is not None
            and best not in ids
            and ids[-1:] != []
            and (all_ids.index(ids[-1]) > all_ids.index(best))
        )
        used.append(fitted.tokens_used)
    return {
        "handed": float(np.mean(handed)),
        "top10": float(np.mean(top10)),
        "left_out": left_out,
        "too_large": too_large,
        "queries": len(fetched),
        "tokens": float(np.mean(used)),
    }


def run_collection(
    long: LongRows, work: Path, model: Any, budgets: Sequence[int], budgets_only: bool = False
) -> tuple[list[str], list[str]]:
    """The cells' table lines and the budget lines of one collection."""
    rerank = CentralRerank(long.collection, model)
    orders = strategies(rerank, model)
    lines: list[str] = []
    budget_lines: list[str] = []
    ranker = RankingSynthesizer(idf=True, embedder=model, top_k=BUDGET_TOP)

    def rank(results: list[AdapterResult], query: str) -> list[RankedRow]:
        return ranker.rank(results, {"query": query})

    for scenario in SCENARIOS:
        folder = work / long.collection.name
        broker = build_broker(long.collection, scenario, folder, model)
        with broker:
            fetched = fetch(broker, long.collection)
        scores = evaluate(long, fetched, orders) if not budgets_only else {}
        for name, s in scores.items():
            places = " / ".join(f"{s['places'][p]:.2f}" for p in PLACES)
            lines.append(
                f"| {long.collection.name}, {scenario} | {name} | "
                f"{np.mean(s['ndcg']):.3f} | {places} |"
            )
            print(lines[-1], file=sys.stderr, flush=True)
        if model is None:
            continue
        for budget in budgets:
            for passages in (False, True):
                f = budget_figures(long, fetched, rank, budget, passages)
                budget_lines.append(
                    f"| {long.collection.name}, {scenario} | {budget} | "
                    f"{'passages' if passages else 'whole'} | {f['handed']:.2f} | "
                    f"{f['top10']:.2f} | {f['left_out']} of {f['queries']} | "
                    f"{f['too_large']} | {f['tokens']:.0f} |"
                )
    return lines, budget_lines


def collections_cells(
    collections: dict[str, Collection], work: Path, model: Any, queries: int
) -> list[str]:
    """Each shared collection as it is, both layouts, ``queries`` sampled judged queries:
    nDCG@10 of nautilus onnx scoring by the first 128 pieces (today) and by passages."""
    from nautilus_ranking.text.passage_windows import past_window

    lines = [
        "| cell | rows past the window | first 128 (today) | passages | Δ |",
        "|---|---|---|---|---|",
    ]
    order = ranking(embedder=model)
    for name, collection in collections.items():
        rng = random.Random(f"{SEED}-{name}-as-is")
        judged = sorted(q for q in collection.queries if collection.qrels.get(q))
        sample = sorted(rng.sample(judged, min(queries, len(judged))))
        asked = Collection(
            name, collection.docs, {q: collection.queries[q] for q in sample}, collection.qrels
        )
        past = np.mean([past_window(f"{d['title']} {d['text']}") for d in collection.docs])
        for scenario in SCENARIOS:
            broker = build_broker(asked, scenario, work / "as-is" / name, model)
            with broker:
                fetched = fetch(broker, asked)
            before, after = [], []
            for qid, results in fetched.items():
                grades = collection.qrels[qid]
                with first_128():
                    before.append(ndcg_at(order(results, asked.queries[qid]), grades, TOP_K))
                after.append(ndcg_at(order(results, asked.queries[qid]), grades, TOP_K))
            lines.append(
                f"| {name}, {scenario} | {past:.0%} | {np.mean(before):.4f} | "
                f"{np.mean(after):.4f} | {np.mean(after) - np.mean(before):+.4f} |"
            )
            print(lines[-1], file=sys.stderr, flush=True)
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=Path, default=DATASETS)
    parser.add_argument("--work-dir", type=Path, default=None)
    parser.add_argument("--queries", type=int, default=QUERIES)
    parser.add_argument("--only", default=None)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--as-is",
        type=int,
        default=0,
        metavar="N",
        help="instead: the shared collections as they are, N queries each, first 128 "
        "pieces against passages",
    )
    parser.add_argument("--budgets-only", action="store_true", help="only the budget table")
    args = parser.parse_args()
    configure_logging("ERROR")
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="long-rows-"))
    model = onnx_embedder()
    collections = {name: load(name, args.datasets) for name in NAMES}
    if args.as_is:
        only = {n: c for n, c in collections.items() if not args.only or n == args.only}
        print("\n".join(collections_cells(only, work, model, args.as_is)))
        return 0
    started = time.perf_counter()
    cells = [
        "| cell | strategy | nDCG@10 | top-10 share: first / middle / last |",
        "|---|---|---|---|",
    ]
    budgets = [
        "| cell | budget | too-large row | relevant handed over | relevant in top 10, "
        "no budget | best relevant left out | of those, skipped for its size | tokens used |",
        "|---|---|---|---|---|---|---|---|",
    ]
    shapes = []
    for name, collection in collections.items():
        if args.only and name != args.only:
            continue
        others = [c for n, c in collections.items() if n != name]
        long = make_long_rows(collection, others, args.queries)
        counts = {p: list(long.place.values()).count(p) for p in PLACES}
        relevant_places = [long.place[d] for g in long.collection.qrels.values() for d in g]
        shapes.append(
            f"{long.collection.name}: {len(long.collection.docs)} rows, "
            f"{len(long.collection.queries)} queries, median "
            f"{int(np.median(list(long.pieces.values())))} pieces; anchors "
            + ", ".join(f"{p} {counts[p]}" for p in PLACES)
            + "; relevant (query, row) pairs "
            + ", ".join(f"{p} {relevant_places.count(p)}" for p in PLACES)
        )
        print(shapes[-1], file=sys.stderr, flush=True)
        lines, budget_lines = run_collection(long, work, model, BUDGETS, args.budgets_only)
        cells += lines
        budgets += budget_lines
    report = "\n".join(
        [*shapes, "", *cells, "", *budgets, "", f"{time.perf_counter() - started:.0f} s"]
    )
    print(report)
    if args.out:
        args.out.write_text(report + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
