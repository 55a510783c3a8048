"""Time as a ranking signal on dated copies of the shared collections.

    python -m benchmarks.quality.recency [--work-dir DIR] [--datasets DIR] [--only NAME]
                                         [--shares 0.25,0.5,1.0] [--out FILE.md]

The generator (``tools/dated_copies.py``, written before anything was tuned; its seed
``SEED``):

* every document of a collection gets a time drawn uniformly over the two years
  :data:`START` + :data:`SPAN` (epoch seconds, an int under the row key ``modified``: an
  int is not part of a row's text, so no content score changes);
* a sample (:data:`REVISED`, a share) of the documents judged relevant to any query gets
  a revision: the same ``id`` in the *next* source of the partitioned layout
  (fts → sql → vector → fts), its text with one sentence changed (one sentence, not
  the first when it has several, replaced by a sentence of another random document),
  and a newer time (drawn between the old time and the end of the two years);
* the dated judgments: the old version's grade lowered by one (to 0 on the binary
  collections), the revision keeping the original grade.

The layout: ``partitioned.py``'s three real SQLite sources (fts, sql, vector by the
hashing embedder), sources undeclared, rows in text mode; the ranker: top 10, the
hashing embedder, IDF as its default (off). Four settings: off, recency only
(``half_life:90d`` over every source), supersession only, both.

Reported, with 95% bootstrap intervals of the paired differences:

1. **pairs**: the share of (newer, older) revision pairs that the sources returned both
   versions of, and either in the top 10, where the newer is above the older, or kept
   while the older is collapsed into it;
2. **nDCG@10, dated**: against the dated judgments (a row is judged as the version it is);
3. **nDCG@10 where time does not matter**: the times drawn, no revisions, the original
   judgments; and **undated**: the collection as it is (no time at all);
4. **new irrelevant rows** in the top 10 (times in the newest tenth of the two years,
   not judged relevant), as a share of the top 10, on the data where time does not
   matter.

And the decay's share of the spread (``recency.RECENCY_SHARE``) and half-life compared
on the same measures, which is what the shipped values were chosen from.
"""

from __future__ import annotations

import argparse
import pickle
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.quality import partitioned
from benchmarks.quality.ir_collections import (
    DATASETS,
    Collection,
    ci_text,
    each_collection,
    ndcg_at,
    paired_ci,
)
from benchmarks.sections import write_section
from nautilus_ranking import AdapterResult, RankingSynthesizer
from nautilus_ranking.embedders import HashingEmbedder
from nautilus_ranking.embedders.default import idf_default
from nautilus_ranking.log import configure_logging
from nautilus_ranking.synthesis import recency
from tools.dated_copies import (
    SPAN,
    START,
    TIME,
    Dated,
    generate,
    key,
    parts_with_revisions,
)

NEW_TAIL = 0.1  # "new": the newest tenth of the two years
TOP_K = 10
HALF_LIFE = "half_life:90d"
SETTINGS: dict[str, dict[str, Any]] = {
    "off": {},
    "recency": {"recency": HALF_LIFE},
    "supersede": {"supersede": True},
    "both": {"recency": HALF_LIFE, "supersede": True},
}
SECTION = "recency"


Fetched = dict[str, list[AdapterResult]]


def fetched(
    collection: Collection, dated: Dated, revised: bool, folder: Path, embedder: str = "hashing"
) -> Fetched:
    """Every query's answers from the three real sources (cached), undeclared; the vector
    source retrieves by ``embedder``."""
    name = "revised" if revised else "plain"
    suffix = "" if embedder == "hashing" else f"-{embedder}"
    cache = folder / f"{collection.name}-{name}{suffix}.pickle"
    if cache.exists():
        answers: Fetched = pickle.loads(cache.read_bytes())
        return answers
    parts = parts_with_revisions(collection, dated) if revised else None
    broker = partitioned.build_broker(
        collection,
        f"recency-{name}{suffix}",
        folder / collection.name,
        embedder_of(embedder),
        parts=parts,
    )
    answers = {  # text mode: the rows without their vectors, as a source of text hands them
        qid: [
            replace(r, rows=[{k: v for k, v in row.items() if k != "embedding"} for row in r.rows])
            for r in results
        ]
        for qid, results in partitioned.undeclare(partitioned.fetch(broker, collection)).items()
    }
    cache.write_bytes(pickle.dumps(answers))
    return answers


def with_times(answers: Fetched, dated: Dated | None) -> Fetched:
    """The answers with each row's time (and whether it is the revision, ``rev``) added to
    a copy of the row; None: undated, as fetched."""
    if dated is None:
        return answers
    index = {sid: i for i, sid in enumerate(partitioned.SOURCES)}
    out: Fetched = {}
    for qid, results in answers.items():
        out[qid] = []
        for result in results:
            rows = []
            for row in result.rows:
                doc = str(row.get("id"))
                where = dated.revisions.get(doc)
                revision = where is not None and where[2] == index[result.source_id]
                at = dated.revisions[doc][1] if revision else dated.times.get(doc)
                rows.append({**row, TIME: at, "rev": int(revision)})
            out[qid].append(replace(result, rows=rows, embeddings=None, source_ranks=None))
    return out


def embedder_of(name: str) -> Any:
    """The embedder ``name`` ranks and retrieves with (the model is shared by every run)."""
    return HashingEmbedder() if name == "hashing" else partitioned.onnx_embedder()


def ranker(setting: str, embedder: str = "hashing") -> RankingSynthesizer:
    """The ranker of ``setting``, as an operator's would rank: the embedder's own IDF
    default, and with the model its best 100 rows by words (no deadline: a benchmark's
    answers do not depend on the machine's speed)."""
    return RankingSynthesizer(
        top_k=TOP_K,
        embedder=embedder_of(embedder),
        idf=idf_default(embedder),
        embedding_max_rows=0 if embedder == "hashing" else 100,
        time_fields={s: TIME for s in partitioned.SOURCES},
        **SETTINGS[setting],
    )


def version(row: dict[str, Any]) -> str:
    return key(str(row.get("id")), bool(row.get("rev")))


@dataclass
class Measured:
    ndcg: list[float]
    pairs_won: int
    pairs: int
    new_irrelevant: list[float]


def measure(
    collection: Collection,
    answers: Fetched,
    grades_of: Callable[[str], dict[str, int]],
    setting: str,
    dated: Dated | None,
    embedder: str = "hashing",
) -> Measured:
    rank = ranker(setting, embedder)
    ndcg, new_irrelevant = [], []
    won = pairs = 0
    newest_tenth = START + SPAN * (1 - NEW_TAIL)
    for qid, results in sorted(answers.items()):
        ranked = rank.rank(results, {"query": collection.queries[qid]})
        grades = grades_of(qid)
        ndcg.append(ndcg_at([version(r.row) for r in ranked], grades, TOP_K))
        new_irrelevant.append(
            sum(
                1
                for r in ranked
                if (r.row.get(TIME) or 0) >= newest_tenth and grades.get(version(r.row), 0) <= 0
            )
            / TOP_K
        )
        if dated is None or not dated.revisions:
            continue
        place = {version(r.row): i for i, r in enumerate(ranked)}
        present = {version(row) for result in results for row in result.rows}
        collapsed = {
            (str(c.id), c.copy) for r in ranked for c in r.also_from if c.copy == "revision"
        }
        for doc in dated.revisions:
            if key(doc, True) not in present or key(doc, False) not in present:
                continue  # a pair only where the sources returned both versions
            new, old = place.get(key(doc, True)), place.get(key(doc, False))
            if new is None and old is None:
                continue
            pairs += 1
            superseded = old is None and (doc, "revision") in collapsed
            if new is not None and (superseded or (old is not None and new < old)):
                won += 1
    return Measured(ndcg, won, pairs, new_irrelevant)


@contextmanager
def share(value: float) -> Iterator[None]:
    kept = recency.RECENCY_SHARE
    recency.RECENCY_SHARE = value
    try:
        yield
    finally:
        recency.RECENCY_SHARE = kept


def run(
    collections: list[Collection], work: Path, shares: list[float], embedders: list[str]
) -> str:
    main_lines = [
        "| collection | embedder | setting | pairs: newer first | nDCG@10 dated | "
        "Δ vs off [95% CI] | time does not matter: Δ nDCG@10 | undated: Δ nDCG@10 | "
        "new irrelevant in top 10 (Δ, points) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    tune_lines = [
        "| embedder | share | half-life | pairs: newer first (recency only) | Δ nDCG@10 dated "
        "(recency only) | time does not matter: Δ nDCG@10 (mean, worst collection) | new "
        "irrelevant (Δ, points: mean, worst collection) |",
        "|---|---|---|---|---|---|---|",
    ]
    pooled: dict[tuple[str, float, str], dict[str, list[float]]] = {}
    for embedder, collection in [(e, c) for e in embedders for c in collections]:
        dated = generate(collection)
        revised = with_times(fetched(collection, dated, True, work, embedder), dated)
        plain_raw = fetched(collection, dated, False, work, embedder)
        timed = with_times(plain_raw, Dated(dated.times, {}, dated.home, {}))

        def original(qid: str, c: Collection = collection) -> dict[str, int]:
            return c.qrels.get(qid, {})

        def dated_grades(qid: str, d: Dated = dated) -> dict[str, int]:
            return d.dated_qrels.get(qid, {})

        base: dict[str, Measured] = {}
        for setting in SETTINGS:
            base[setting] = measure(collection, revised, dated_grades, setting, dated, embedder)
        flat_off = measure(collection, timed, original, "off", None, embedder)
        undated_off = measure(collection, plain_raw, original, "off", None, embedder)
        for setting in SETTINGS:
            m = base[setting]
            ci = paired_ci(m.ndcg, base["off"].ndcg)
            flat = measure(collection, timed, original, setting, None, embedder)
            undated = measure(collection, plain_raw, original, setting, None, embedder)
            main_lines.append(
                f"| {collection.name} | {embedder} | {setting} | "
                f"{m.pairs_won / max(1, m.pairs):.3f} ({m.pairs_won}/{m.pairs}) | "
                f"{np.mean(m.ndcg):.3f} | {ci_text(ci)} | "
                f"{ci_text(paired_ci(flat.ndcg, flat_off.ndcg))} | "
                f"{np.mean(undated.ndcg) - np.mean(undated_off.ndcg):+.4f} | "
                f"{100 * (np.mean(flat.new_irrelevant) - np.mean(flat_off.new_irrelevant)):+.2f} |"
            )
            print(main_lines[-1], file=sys.stderr, flush=True)
        for value in shares:
            for half_life in ("30d", "90d", "365d"):
                SETTINGS["tune"] = {"recency": f"half_life:{half_life}"}
                with share(value):
                    m = measure(collection, revised, dated_grades, "tune", dated, embedder)
                    flat = measure(collection, timed, original, "tune", None, embedder)
                cell = pooled.setdefault(
                    (embedder, value, half_life),
                    {k: [] for k in ("won", "pairs", "dated", "flat", "new")},
                )
                cell["won"].append(m.pairs_won)
                cell["pairs"].append(m.pairs)
                cell["dated"].append(float(np.mean(m.ndcg) - np.mean(base["off"].ndcg)))
                cell["flat"].append(float(np.mean(flat.ndcg) - np.mean(flat_off.ndcg)))
                new = np.mean(flat.new_irrelevant) - np.mean(flat_off.new_irrelevant)
                cell["new"].append(100 * float(new))
        SETTINGS.pop("tune", None)
    for (embedder, value, half_life), cell in sorted(pooled.items()):
        worst = max(cell["flat"], key=abs)
        tune_lines.append(
            f"| {embedder} | {value:g} | {half_life} | "
            f"{sum(cell['won']) / max(1, sum(cell['pairs'])):.3f} | "
            f"{np.mean(cell['dated']):+.4f} | {np.mean(cell['flat']):+.4f} ({worst:+.4f}) | "
            f"{np.mean(cell['new']):+.2f} ({max(cell['new']):+.2f}) |"
        )
        print(tune_lines[-1], file=sys.stderr, flush=True)
    tuning = "\n\nThe decay's share and half-life (recency only):\n\n" + "\n".join(tune_lines)
    return "\n".join(main_lines) + tuning


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=Path, default=DATASETS)
    parser.add_argument("--work-dir", type=Path, default=None)
    parser.add_argument("--only", default=None)
    parser.add_argument("--shares", default="0.15,0.2,0.25,0.5,1.0")
    parser.add_argument("--embedders", default="hashing,onnx")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    configure_logging("ERROR")
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="recency-"))
    work.mkdir(parents=True, exist_ok=True)
    collections = list(each_collection(args.datasets, args.only))
    shares = [float(s) for s in args.shares.split(",") if s.strip()]
    names = [n for n in args.embedders.split(",") if n.strip()]
    if "onnx" in names and partitioned.onnx_embedder() is None:
        names.remove("onnx")  # the model needs the embed extra
    text = run(collections, work, shares, names)
    print(text)
    if args.out is not None:
        command = "python -m benchmarks.quality.recency --work-dir DIR --out " + str(args.out)
        body = f"<!-- {SECTION}:begin -->\n`{command}`\n\n{text}\n<!-- {SECTION}:end -->\n"
        write_section(args.out, body, SECTION)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
