"""Relevance cut: how many irrelevant rows does each cut setting keep out of the top 10,
and what does it cost in recall@10 and nDCG@10?

The sources, scenarios and collections are ``benchmarks/quality/quality.py``'s (fts, sql and
vector over each shared collection, partitioned and hybrid, declared), and every
collection is ranked twice: with the default hashing embedder and with MiniLM (onnx),
IDF on, top 10. Each cut setting (``nautilus_ranking/selection/cut.py``) is applied to the same
ranking, so every row of the table is paired with "off", query by query.

Per cell and setting: rows handed over (mean per query), irrelevant rows handed over
(not judged relevant; mean per query), recall@10 and nDCG@10. A setting *qualifies* in
a cell when it hands over >= 30 % fewer irrelevant rows than "off" at <= 5 % relative
loss of recall@10; the summary says which settings qualify in every cell.

    python -m benchmarks.quality.relevance_cut [--datasets DIR] [--only NAME] [--out FILE.md]
                                               [--work-dir DIR] [--settings a,b,...]
"""

from __future__ import annotations

import argparse
import pickle
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.quality.ir_collections import (
    DATASETS,
    NAMES,
    Collection,
    each_collection,
    ndcg_at,
    recall_at,
)
from benchmarks.quality.partitioned import build_broker, fetch, onnx_embedder
from nautilus_ranking import AdapterResult, RankingSynthesizer
from nautilus_ranking.log import configure_logging
from nautilus_ranking.records import RankedRow
from nautilus_ranking.selection.cut import CUT_SETTINGS, parse_cut, relevance_cut

TOP_K = 10
SCENARIOS = ("partitioned", "hybrid")
#: What a recommended setting must do in every cell, against "off".
FEWER_IRRELEVANT = 0.30
RECALL_LOSS = 0.05


@dataclass
class Cell:
    """One collection × scenario × embedder: per setting, per-query values."""

    name: str
    handed: dict[str, list[int]]
    irrelevant: dict[str, list[int]]
    recall: dict[str, list[float]]
    ndcg: dict[str, list[float]]


def fetched_for(
    collection: Collection, scenario: str, folder: Path, vector_embedder: Any
) -> dict[str, list[AdapterResult]]:
    """The sources' answers to every judged query, cached in ``folder`` (the fan-out and
    the MiniLM vector build are the slow part; the cut is measured on the ranking)."""
    cache = folder / f"{scenario}-fetched-{'onnx' if vector_embedder else 'hashing'}.pickle"
    if cache.is_file():
        with cache.open("rb") as handle:
            cached: dict[str, list[AdapterResult]] = pickle.load(handle)
        if set(cached) == set(collection.queries):
            return cached
    broker = build_broker(collection, scenario, folder, vector_embedder)
    with broker:
        fetched = fetch(broker, collection)
    with cache.open("wb") as handle:
        pickle.dump(fetched, handle)
    return fetched


def rankings(
    collection: Collection, fetched: dict[str, list[AdapterResult]], embedder: Any
) -> dict[str, list[RankedRow]]:
    """The top 10 of every query, unboosted, IDF on (the cut is applied to these)."""
    ranker = RankingSynthesizer(
        idf=True, top_k=TOP_K, **({"embedder": embedder} if embedder is not None else {})
    )
    return {
        qid: ranker.rank(results, {"query": collection.queries[qid]})
        for qid, results in fetched.items()
    }


def measure(
    name: str, collection: Collection, ranked: dict[str, list[RankedRow]], settings: Sequence[str]
) -> Cell:
    cell = Cell(name, {}, {}, {}, {})
    for setting in settings:
        cut = parse_cut("bench", setting)[0]
        for qid, rows in ranked.items():
            grades = collection.qrels[qid]
            kept = rows[: relevance_cut(rows, cut)] if cut is not None else rows
            ids = [str(r.row["id"]) for r in kept]
            cell.handed.setdefault(setting, []).append(len(ids))
            cell.irrelevant.setdefault(setting, []).append(
                sum(1 for d in ids if grades.get(d, 0) < 1)
            )
            cell.recall.setdefault(setting, []).append(recall_at(ids, grades, TOP_K))
            cell.ndcg.setdefault(setting, []).append(ndcg_at(ids, grades, TOP_K))
    return cell


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def qualifies(cell: Cell, setting: str) -> tuple[float, float, bool]:
    """(fewer irrelevant rows, relative recall@10 loss) against off, and whether both
    meet the bar."""
    base_irr, base_rec = mean(cell.irrelevant["off"]), mean(cell.recall["off"])
    fewer = 1 - mean(cell.irrelevant[setting]) / base_irr if base_irr else 0.0
    loss = 1 - mean(cell.recall[setting]) / base_rec if base_rec else 0.0
    return fewer, loss, fewer >= FEWER_IRRELEVANT and loss <= RECALL_LOSS


def cell_table(cell: Cell) -> str:
    lines = [
        f"**{cell.name}** ({len(cell.recall['off'])} queries, top {TOP_K})",
        "",
        "| cut | rows handed over | irrelevant rows | recall@10 | nDCG@10 "
        "| irrelevant vs off | recall@10 loss |",
        "|---|---|---|---|---|---|---|",
    ]
    for setting in cell.handed:
        fewer, loss, ok = qualifies(cell, setting)
        mark = " ✓" if ok and setting != "off" else ""
        lines.append(
            f"| {setting}{mark} | {mean(cell.handed[setting]):.2f} | "
            f"{mean(cell.irrelevant[setting]):.2f} | {mean(cell.recall[setting]):.3f} | "
            f"{mean(cell.ndcg[setting]):.3f} | {-fewer:+.0%} | {-loss:+.1%} |"
        )
    return "\n".join(lines)


def summary_table(cells: list[Cell], settings: Sequence[str]) -> str:
    """Per setting, over the cells: irrelevant rows kept out and recall@10 lost."""
    lines = [
        f"**Summary** (the bar: >= {FEWER_IRRELEVANT:.0%} fewer irrelevant rows at <= "
        f"{RECALL_LOSS:.0%} relative loss of recall@10 against off, in every one of "
        f"{len(cells)} cells)",
        "",
        "| cut | rows handed over (mean of cells) | fewer irrelevant rows: least, mean "
        "| recall@10 lost: most, mean | cells meeting the bar |",
        "|---|---|---|---|---|",
    ]
    for setting in settings:
        if setting == "off":
            continue
        results = [qualifies(c, setting) for c in cells]
        fewer = [r[0] for r in results]
        loss = [r[1] for r in results]
        handed = mean([mean(c.handed[setting]) for c in cells])
        ok = sum(r[2] for r in results)
        lines.append(
            f"| {setting} | {handed:.2f} | {min(fewer):.0%}, {mean(fewer):.0%} | "
            f"{max(loss):.1%}, {mean(loss):.1%} | {ok} / {len(cells)} |"
        )
    return "\n".join(lines)


#: Hindsight: each method's number on a fine grid, the best chosen per cell.
HINDSIGHT = {
    "relative": [x / 100 for x in range(30, 101)],
    "floor": [x / 100 for x in range(30, 101)],
    "gap": [x / 100 for x in range(1, 51)],
}


def hindsight_table(
    collections: dict[str, Collection], ranked_by_cell: dict[str, dict[str, list[RankedRow]]]
) -> str:
    """Per method and cell, the most irrelevant rows kept out by any number of the
    method within the recall bar — the number chosen per cell, with hindsight: an upper
    bound on what one deployed setting could do."""
    names = list(ranked_by_cell)
    lines = [
        f"**With hindsight**: per method, the largest share of irrelevant rows kept "
        f"out within <= {RECALL_LOSS:.0%} recall@10 loss, its number chosen per cell "
        "(an upper bound for one setting)",
        "",
        "| method | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for method, values in HINDSIGHT.items():
        settings = ["off", *(f"{method}:{v:g}" for v in values)]
        best = []
        for cell_name, ranked in ranked_by_cell.items():
            cell = measure(cell_name, collections[cell_name.split()[0]], ranked, settings)
            fits = [
                qualifies(cell, s)[0] for s in settings[1:] if qualifies(cell, s)[1] <= RECALL_LOSS
            ]
            best.append(max(fits, default=0.0))
        lines.append(f"| {method} | " + " | ".join(f"{b:.0%}" for b in best) + " |")
    return "\n".join(lines)


def run(datasets: Path, only: str | None, work_dir: Path | None, settings: Sequence[str]) -> str:
    cells: list[Cell] = []
    collections: dict[str, Collection] = {}
    ranked_by_cell: dict[str, dict[str, list[RankedRow]]] = {}
    vector_embedder = onnx_embedder()
    embedders = {"hashing": None, "onnx": vector_embedder}
    with tempfile.TemporaryDirectory() as scratch:
        root = work_dir if work_dir is not None else Path(scratch)
        for collection in each_collection(datasets, only):
            name = collection.name
            collections[name] = collection
            for scenario in SCENARIOS:
                fetched = fetched_for(collection, scenario, root / name, vector_embedder)
                for label, embedder in embedders.items():
                    if label == "onnx" and embedder is None:
                        continue  # the embed extra is not installed
                    ranked = rankings(collection, fetched, embedder)
                    cell_name = f"{name} {scenario} {label}"
                    ranked_by_cell[cell_name] = ranked
                    cells.append(measure(cell_name, collection, ranked, settings))
                    print(f"{name}/{scenario}/{label} done", file=sys.stderr, flush=True)
    return "\n\n".join(
        [
            summary_table(cells, settings),
            hindsight_table(collections, ranked_by_cell),
            *(cell_table(c) for c in cells),
        ]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=Path, default=DATASETS)
    parser.add_argument("--only", choices=NAMES)
    parser.add_argument("--out", type=Path, help="write the markdown tables here")
    parser.add_argument(
        "--work-dir",
        type=Path,
        help="keep the source databases and the fetched rows here, and reuse them on the next run",
    )
    parser.add_argument(
        "--settings",
        default=",".join(CUT_SETTINGS),
        help="comma-separated cut settings (default: the documented ones)",
    )
    args = parser.parse_args()
    configure_logging("warning", "console")
    asked = [s.strip() for s in args.settings.split(",")]
    settings = ["off", *(s for s in asked if s not in ("", "off"))]
    text = run(args.datasets, args.only, args.work_dir, settings)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
