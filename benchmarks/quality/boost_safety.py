"""What each boost level does, on the four shared collections: share gained, the other
sources' recall kept, nDCG change — every level, demotions included.

    python -m benchmarks.quality.boost_safety [--only NAME] [--embedders hashing onnx]
                                              [--modes declared undeclared] [--work-dir DIR]
                                              [--queries N] [--no-hybrid] [--out FILE.md]

Three sources as in ``partitioned.py`` (fts, sql, vector; MiniLM vectors when
``nautilus-ranking[embed]`` is installed), fetched once per collection and scenario
(kept in ``--work-dir`` and reused). The ranker: IDF on, top 10, the default hashing
embedder and MiniLM (onnx). For each cell (collection × declared/undeclared ×
embedder × no cap / a cap of half the 90-row union), each of the three sources
boosted at every level in turn, averaged over the three:

* **share gained** — the boosted source's share of the top 10 minus its share without
  the boost (negative for a demotion);
* **others kept** — the other sources' relevant rows in the top 10 relative to no
  boost (the hijack check: 1.0 = they lost nothing);
* **Δ nDCG@10** — against the same ranking without the boost.

Partitioned (each source a third of the corpus) is the main table; hybrid (each
source the whole corpus) gives each source's nDCG change alone, for "boosting the
better index does not hurt, boosting the keyword table costs little".
"""

from __future__ import annotations

import argparse
import pickle
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.quality import partitioned
from benchmarks.quality.ir_collections import DATASETS, NAMES, Collection, load, ndcg_at
from nautilus_ranking import AdapterResult, RankingSynthesizer
from nautilus_ranking.embedders import HashingEmbedder
from nautilus_ranking.log import configure_logging
from nautilus_ranking.settings.boost_entries import VALID_LEVELS

Fetched = dict[str, list[AdapterResult]]
#: The stage-1 cap of the capped cells: half of the 90-row union.
CAP = 45
EMBEDDERS = ("hashing", "onnx")


@dataclass(frozen=True)
class Effect:
    """One level's effect on one cell, averaged over the boosted sources."""

    share: float  # share of the top 10 gained
    kept: float  # the others' relevant rows in the top 10 kept (1.0: all)
    ndcg: float  # Δ nDCG@10
    worst_kept: float  # the lowest kept over the boosted sources
    worst_share: float  # the smallest share gained (the largest for a demotion)


def fetched_for(collection: Collection, scenario: str, folder: Path) -> Fetched:
    """The sources' answers to every judged query, fetched once and kept in ``folder``."""
    cache = folder / f"fetched-{collection.name}-{scenario}.pkl"
    if cache.exists():
        answers: Fetched = pickle.loads(cache.read_bytes())
        return answers
    broker = partitioned.build_broker(
        collection, scenario, folder / collection.name, partitioned.onnx_embedder()
    )
    answers = partitioned.fetch(broker, collection)
    cache.write_bytes(pickle.dumps(answers))
    return answers


def _tops(
    collection: Collection,
    fetched: Fetched,
    embedder: Any,
    cap: int | None,
    boosts: dict[str, str] | None,
) -> dict[str, list[Any]]:
    ranker = RankingSynthesizer(
        idf=True, top_k=10, embedder=embedder, max_candidates=cap, source_boosts=boosts
    )
    return {
        qid: ranker.rank(results, {"query": collection.queries[qid]})
        for qid, results in fetched.items()
    }


def _measures(
    collection: Collection, tops: dict[str, list[Any]], source: str
) -> tuple[float, int, float]:
    """(the source's share of the top 10, the others' relevant rows in it, nDCG@10)."""
    share, hits, ndcg = 0.0, 0, 0.0
    for qid, top in tops.items():
        grades = collection.qrels[qid]
        share += sum(r.source_id == source for r in top) / max(len(top), 1)
        hits += sum(1 for r in top if r.source_id != source and str(r.row["id"]) in grades)
        ndcg += ndcg_at([str(r.row["id"]) for r in top], grades)
    return share / len(tops), hits, ndcg / len(tops)


def effects(
    collection: Collection,
    fetched: Fetched,
    embedder: Any,
    cap: int | None,
    levels: Iterable[str] = VALID_LEVELS,
) -> dict[str, Effect]:
    """Each level's effect (partitioned), averaged over the three boosted sources."""
    base = _tops(collection, fetched, embedder, cap, None)
    out = {}
    for level in levels:
        per = []
        for source in partitioned.SOURCES:
            share0, hits0, ndcg0 = _measures(collection, base, source)
            tops = _tops(collection, fetched, embedder, cap, {source: level})
            share1, hits1, ndcg1 = _measures(collection, tops, source)
            per.append((share1 - share0, hits1 / hits0 if hits0 else 1.0, ndcg1 - ndcg0))
        shares = [p[0] for p in per]
        out[level] = Effect(
            sum(shares) / 3,
            sum(p[1] for p in per) / 3,
            sum(p[2] for p in per) / 3,
            min(p[1] for p in per),
            min(shares) if not level.startswith("-") else max(shares),
        )
    return out


def hybrid_effects(
    collection: Collection, fetched: Fetched, embedder: Any, levels: Iterable[str] = VALID_LEVELS
) -> tuple[dict[str, float], dict[tuple[str, str], float]]:
    """Hybrid: each source's own nDCG@10 alone, and the Δ nDCG@10 of boosting it."""
    alone = {
        source: sum(
            ndcg_at(
                partitioned.unique_ids(
                    [row for r in results if r.source_id == source for row in r.rows]
                ),
                collection.qrels[qid],
            )
            for qid, results in fetched.items()
        )
        / len(fetched)
        for source in partitioned.SOURCES
    }
    base = _measures(collection, _tops(collection, fetched, embedder, None, None), "")[2]
    delta = {
        (source, level): _measures(
            collection, _tops(collection, fetched, embedder, None, {source: level}), ""
        )[2]
        - base
        for source in partitioned.SOURCES
        for level in levels
    }
    return alone, delta


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


Cells = dict[tuple[str, str, str, int | None], dict[str, Effect]]


def collection_cells(
    collection: Collection,
    by_scenario: dict[str, Fetched],
    embedders: list[str],
    modes: list[str],
    hybrid: bool = True,
) -> tuple[Cells, list[str]]:
    """One collection's cells (partitioned: every mode × embedder × cap) and its hybrid
    rows, from its sources' answers (``by_scenario``: partitioned and hybrid, declared)."""
    cells: Cells = {}
    hybrid_lines = []
    for mode in modes:
        given = {
            s: (f if mode == "declared" else partitioned.undeclare(f))
            for s, f in by_scenario.items()
        }
        for emb in embedders:
            embedder = HashingEmbedder() if emb == "hashing" else partitioned.onnx_embedder()
            if embedder is None:  # the extra is not installed
                continue
            for cap in (None, CAP):
                cells[(collection.name, mode, emb, cap)] = effects(
                    collection, given["partitioned"], embedder, cap
                )
                print(
                    f"{collection.name} {mode} {emb} cap {cap}: boost levels done",
                    file=sys.stderr,
                    flush=True,
                )
            if hybrid and "hybrid" in given:
                alone, delta = hybrid_effects(collection, given["hybrid"], embedder)
                better = max(("fts", "vector"), key=lambda s: alone[s])
                hybrid_lines.append(
                    f"| {collection.name} | {mode} | {emb} | {better} ({alone[better]:.3f}) | "
                    + " | ".join(
                        f"{delta[(s, lv)]:+.3f}"
                        for s in (better, "sql")
                        for lv in ("low", "medium", "high")
                    )
                    + " |"
                )
    return cells, hybrid_lines


def tables(cells: Cells, hybrid_lines: list[str]) -> str:
    """The summary over every cell, every cell, and the hybrid table (markdown)."""
    out = [_summary(cells), _per_level(cells)]
    if hybrid_lines:
        out.append(
            "**Hybrid (each source holds the whole corpus): Δ nDCG@10 of boosting "
            "the better index and the keyword table (sql)**\n\n"
            "| collection | mode | embedder | better index (its nDCG@10 alone) | "
            "better: low | medium | high | sql: low | medium | high |\n"
            "|---|---|---|---|---|---|---|---|---|---|\n" + "\n".join(hybrid_lines)
        )
    return "\n\n".join(out)


def run(
    names: list[str],
    embedders: list[str],
    modes: list[str],
    folder: Path,
    queries: int | None,
    hybrid: bool,
) -> str:
    cells: Cells = {}
    hybrid_lines: list[str] = []
    for name in names:
        collection = load(name, DATASETS)
        by_scenario = {s: fetched_for(collection, s, folder) for s in ("partitioned", "hybrid")}
        if queries:
            by_scenario = {s: dict(list(f.items())[:queries]) for s, f in by_scenario.items()}
        more, lines = collection_cells(collection, by_scenario, embedders, modes, hybrid)
        cells.update(more)
        hybrid_lines += lines
    return tables(cells, hybrid_lines)


def _summary(cells: Cells) -> str:
    """Per level over every cell: mean and worst share gained, others kept, Δ nDCG."""
    lines = [
        "**Boost levels, every cell averaged** (partitioned, IDF on, top 10; each cell "
        "the mean over the three boosted sources; worst = the weakest cell)",
        "",
        "| level | cap | share gained: mean (weakest cell) | others' recall@10 kept: "
        "mean (worst cell) | Δ nDCG@10: mean (worst cell) | share monotone in level |",
        "|---|---|---|---|---|---|",
    ]
    for cap in (None, CAP):
        mine = {k: v for k, v in cells.items() if k[3] == cap}
        monotone = all(
            [e[lv].share for lv in VALID_LEVELS] == sorted(e[lv].share for lv in VALID_LEVELS)
            for e in mine.values()
        )
        for level in VALID_LEVELS:
            share = [e[level].share for e in mine.values()]
            kept = [e[level].kept for e in mine.values()]
            ndcg = [e[level].ndcg for e in mine.values()]
            weakest = min(share) if not level.startswith("-") else max(share)
            lines.append(
                f"| {level} | {cap or 'none'} | {_mean(share):+.3f} ({weakest:+.3f}) "
                f"| {_mean(kept):.3f} ({min(kept):.3f}) | {_mean(ndcg):+.3f} "
                f"({min(ndcg):+.3f}) | {'yes' if monotone else '**no**'} |"
            )
    return "\n".join(lines)


def _per_level(cells: Cells) -> str:
    """Every cell: share gained / others kept (worst source) / Δ nDCG, per level."""
    lines = [
        "**Every cell** (share gained / others' recall@10 kept, worst source in "
        "brackets / Δ nDCG@10; the mean over the three boosted sources)",
        "",
        "| collection | mode | embedder | cap | " + " | ".join(VALID_LEVELS) + " |",
        "|---|---|---|---|" + "---|" * len(VALID_LEVELS),
    ]
    for (name, mode, emb, cap), effect in cells.items():
        lines.append(
            f"| {name} | {mode} | {emb} | {cap or 'none'} | "
            + " | ".join(
                f"{e.share:+.3f} / {e.kept:.2f} ({e.worst_kept:.2f}) / {e.ndcg:+.3f}"
                for e in (effect[lv] for lv in VALID_LEVELS)
            )
            + " |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only",
        choices=NAMES,
        action="append",
        help="one collection (repeatable; default: all four)",
    )
    parser.add_argument("--embedders", nargs="+", choices=EMBEDDERS, default=list(EMBEDDERS))
    parser.add_argument(
        "--modes", nargs="+", choices=partitioned.MODES, default=list(partitioned.MODES)
    )
    parser.add_argument(
        "--work-dir",
        type=Path,
        help="keep the sources and their answers "
        "here and reuse them (the MiniLM vector build is the slow part)",
    )
    parser.add_argument("--queries", type=int, help="only the first N queries of each")
    parser.add_argument("--no-hybrid", action="store_true", help="skip the hybrid table")
    parser.add_argument("--out", type=Path, help="also write the tables here")
    args = parser.parse_args()
    configure_logging("error", "console")
    with tempfile.TemporaryDirectory() as scratch:
        folder = args.work_dir or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        text = run(
            args.only or list(NAMES),
            args.embedders,
            args.modes,
            folder,
            args.queries,
            not args.no_hybrid,
        )
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
