"""Identical-output check: the working tree ranks the speed benchmark's batches exactly
as an earlier revision does (same order, scores within 1e-9).

Both sides run in subprocesses on the same batches: "before" imports the ``nautilus``
package of REV (extracted with ``git archive``, no checkout), "after" the working tree.
Each prints every ranked row as (source_id, source_rank, score, the copies collapsed
into it); the parent compares.
Vectors handed over as one matrix (``AdapterResult.embeddings``, after only) are
compared with the same vectors given row by row to "before"; the vector batches at
4,000 rows also cover the top 10, a candidate cap and copies.

    python -m tools.same_output [--rev 35fe6a1]

Exit status 0 when every batch matches, 1 otherwise (the first differences are printed).

With ``--answers OTHER`` it compares ``nautilus-ranking query --json`` answers instead,
byte for byte, between this checkout and OTHER (a path to a checkout, or a git
revision), case by case (``tools/same_answers.py``, ``tools/answer_cases.py``):

    python -m tools.same_output --answers 7827f66 [--cases demo,adi] [--queries 3]
        [--settings unset,idf] [--pages 3] [--embedder onnx] [--ignore-key ranking_hash]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from tools.revisions import checkout, run_module

#: The rankings speed work must reproduce: the last deliberate ranking change (boosts a
#: share of the batch's relevance spread, measured in benchmarks/quality/boost_safety.py; before
#: it, 9c570c5, whose unboosted batches it still reproduces); move it forward with the
#: next such change.
DEFAULT_REV = "35fe6a1"
TOLERANCE = 1e-9


def batches() -> list[tuple[str, list[Any], dict[str, Any], dict[str, Any]]]:
    """(name, results, ranker keywords, context) — the speed benchmark's rows and more."""
    import numpy as np

    from nautilus_ranking import AdapterResult
    from tools import speed_batches as speed

    out: list[tuple[str, list[Any], dict[str, Any], dict[str, Any]]] = []
    for n in (*speed.LATENCY_SIZES, 1_000, 10_000):
        results = speed.split(speed.text_rows(n, np.random.default_rng(n)))
        for idf in (True, False):
            for top_k in (speed.TOP_K, None):
                out.append(
                    (
                        f"text {n} idf={idf} top_k={top_k}",
                        results,
                        {"top_k": top_k, "idf": idf},
                        {"query": speed.QUERY},
                    )
                )
        out.append(
            (f"text {n} other query", results, {"idf": True}, {"query": "sev3 row the and of lag"})
        )
    boosts = {"graph": "high", "sql": "low"}
    results = speed.split(speed.text_rows(400, np.random.default_rng(7)))
    out.append(
        (
            "text 400 boosts + cap",
            results,
            {"top_k": 20, "idf": True, "source_boosts": boosts, "max_candidates": 200},
            {"query": speed.QUERY},
        )
    )
    for n in (40, 400, 4_000):
        results = copies_batch(n, np.random.default_rng(n + 2))
        for idf in (True, False):
            out.append(
                (
                    f"copies {n} idf={idf}",
                    results,
                    {"top_k": None, "idf": idf},
                    {"query": speed.QUERY},
                )
            )
    rng = np.random.default_rng(1)
    query_vector = rng.normal(size=speed.DIM)
    for n in (40, 400, 10_000):
        for as_list in (False, True):
            results = speed.split(speed.vector_rows(n, rng, as_list=as_list))
            out.append(
                (
                    f"vectors {n} {'list' if as_list else 'numpy'}",
                    results,
                    {"top_k": None},
                    {"embedding": query_vector.tolist()},
                )
            )
    # One float32 matrix per source; "before" gets the same values row by row.
    for n in (40, 10_000):
        matrix = np.random.default_rng(n + 1).normal(size=(n, speed.DIM)).astype(np.float32)
        rows = [{"id": f"row-{i}"} for i in range(n)]
        k = len(speed.SOURCES)
        parts = [
            (s, rows[i::k], np.ascontiguousarray(matrix[i::k])) for i, s in enumerate(speed.SOURCES)
        ]
        by_row = [
            AdapterResult(
                s, [{**row, "embedding": v.tolist()} for row, v in zip(part, m, strict=True)]
            )
            for s, part, m in parts
        ]
        context: dict[str, Any] = {"embedding": query_vector.tolist()}
        if speed.HAS_MATRIX:
            context["_matrix"] = [AdapterResult(s, part, embeddings=m) for s, part, m in parts]
        out.append((f"matrix {n}", by_row, {"top_k": None}, context))
    out += vector_batches(query_vector)
    return out


def vector_batches(
    query_vector: Any,
) -> list[tuple[str, list[Any], dict[str, Any], dict[str, Any]]]:
    """Vector rows at a few thousand: numpy vectors (float64 and float32), a float32
    matrix per source, each with the top 10 (the benchmark's setting), under a candidate
    cap, and with copies (rows repeated by another source, same vector), whose paths
    differ.

    The copies batch stays below 2**20 vector entries: above it, main multiplied
    float64 vectors with BLAS ``gemv``, which rounds the same vector differently at
    different rows (copies 1e-16 apart, one ranked below its own document); the
    code after ties them exactly (docs/tuning-speed-vectors-words.md, the fourth speed pass)."""
    import numpy as np

    from nautilus_ranking import AdapterResult
    from tools import speed_batches as speed

    out: list[tuple[str, list[Any], dict[str, Any], dict[str, Any]]] = []
    k = len(speed.SOURCES)
    rng = np.random.default_rng(14)
    matrix = rng.normal(size=(4_000, speed.DIM)).astype(np.float32)
    rows = [{"id": f"row-{i}"} for i in range(len(matrix))]
    with_copies = rows[:2_000] + rows[:250]  # the first rows again, under other sources
    vectors = np.concatenate((matrix[:2_000], matrix[:250]))
    for label, kwargs in (
        ("top 10", {"top_k": 10}),
        ("all", {"top_k": None}),
        (
            "cap 1000 + boosts",
            {"top_k": 10, "max_candidates": 1_000, "source_boosts": {"graph": "high"}},
        ),
    ):
        context: dict[str, Any] = {"embedding": query_vector}
        for name, batch_rows, batch in (("", rows, matrix), (" copies", with_copies, vectors)):
            n = len(batch_rows)
            parts = [
                (s, batch_rows[i::k], np.ascontiguousarray(batch[i::k]))
                for i, s in enumerate(speed.SOURCES)
            ]
            by_row = [
                AdapterResult(
                    s,
                    [
                        {**row, "embedding": v.astype(np.float64)}
                        for row, v in zip(part, m, strict=True)
                    ],
                )
                for s, part, m in parts
            ]
            as_float32 = [
                AdapterResult(s, [{**row, "embedding": v} for row, v in zip(part, m, strict=True)])
                for s, part, m in parts
            ]
            out.append((f"numpy vectors {n}{name} {label}", by_row, kwargs, context))
            out.append((f"float32 vectors {n}{name} {label}", as_float32, kwargs, context))
            matrix_context = dict(context)
            if speed.HAS_MATRIX:
                matrix_context["_matrix"] = [
                    AdapterResult(s, part, embeddings=m) for s, part, m in parts
                ]
            out.append((f"float32 matrix {n}{name} {label}", by_row, kwargs, matrix_context))
    return out


def copies_batch(n: int, rng: Any) -> list[Any]:
    """Text rows without ids, a third of them repeated by another source as a copy: the
    same fields in another order, other case, other inner whitespace (a no-break space too),
    a blank or non-text field more or less; some near-copies that differ in a word."""
    from nautilus_ranking import AdapterResult
    from tools import speed_batches as speed

    rows = [{k: v for k, v in row.items() if k != "id"} for row in speed.text_rows(n, rng)]
    copies: list[dict[str, Any]] = []
    for i, row in enumerate(rows[::3]):
        variant = dict(reversed(list(row.items())))
        variant["title"] = row["title"].upper()
        variant["text"] = row["text"].replace(" ", ["\t", "\u00a0", "  \n "][i % 3], 2)
        variant["note"] = [" ", 7, None][i % 3]
        if i % 5 == 4:
            variant["text"] += " extra"  # a near-copy: not the same document
        copies.append(variant)
    half = len(rows) // 2
    return [
        AdapterResult("a", rows[:half]),
        AdapterResult("b", copies),
        AdapterResult("c", rows[half:]),
        AdapterResult("d", copies[::2]),
    ]


def rank_all() -> list[dict[str, Any]]:
    """Rank every batch with the ``nautilus`` on sys.path (run in a subprocess)."""
    from nautilus_ranking import RankingSynthesizer
    from nautilus_ranking.log import configure_logging

    configure_logging("error", "console")
    out = []
    for name, results, kwargs, context in batches():
        matrix_results = context.pop("_matrix", None)
        if matrix_results is not None and os.environ.get("SAME_OUTPUT_SIDE") == "after":
            results = matrix_results
        ranked = RankingSynthesizer(**kwargs).rank(results, context)
        out.append(
            {
                "name": name,
                "rows": [
                    (
                        r.source_id,
                        r.source_rank,
                        r.score,
                        [list(a) for a in getattr(r, "also_from", ())],
                    )
                    for r in ranked
                ],
            }
        )
    return out


def _side(label: str, pythonpath: Path | None) -> list[dict[str, Any]]:
    env = dict(os.environ, SAME_OUTPUT_SIDE=label)
    done = run_module(
        "tools.same_output",
        ["--child"],
        pythonpath,
        env,
        check=True,
        capture_output=True,
        text=True,
    )
    data: list[dict[str, Any]] = json.loads(done.stdout)
    return data


def _place(row: list[Any]) -> list[Any]:
    """What must be identical: the row, and where its collapsed copies came from."""
    return [row[0], row[1], *row[3:]]


def compare(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[str]:
    problems = []
    before_by = {b["name"]: b["rows"] for b in before}
    for batch in after:
        name, rows = batch["name"], batch["rows"]
        old = before_by.get(name)
        if old is None:
            problems.append(f"{name}: no 'before' ranking")
            continue
        if [_place(r) for r in old] != [_place(r) for r in rows]:
            first = next(
                (
                    i
                    for i, (a, b) in enumerate(zip(old, rows, strict=False))
                    if _place(a) != _place(b)
                ),
                min(len(old), len(rows)),
            )
            problems.append(
                f"{name}: order differs from place {first + 1} "
                f"(before {old[first : first + 2]}, after {rows[first : first + 2]})"
            )
            continue
        worst = max((abs(a[2] - b[2]) for a, b in zip(old, rows, strict=True)), default=0.0)
        if worst > TOLERANCE:
            problems.append(f"{name}: scores differ by up to {worst:.3g}")
        else:
            print(f"same: {name} ({len(rows)} rows, max score difference {worst:.1e})")
    return problems


def add_answer_options(parser: argparse.ArgumentParser) -> None:
    from tools.answer_cases import COLLECTIONS, DATASETS

    group = parser.add_argument_group("answers (query --json, byte for byte)")
    group.add_argument(
        "--answers",
        metavar="OTHER",
        help="compare answers with OTHER: a checkout's path or a revision",
    )
    group.add_argument(
        "--cases", default=",".join(("demo", *COLLECTIONS)), help="demo and collection names"
    )
    group.add_argument("--settings", default="", help="only these settings (default: all)")
    group.add_argument("--queries", type=int, default=3, help="queries asked per case")
    group.add_argument("--pages", type=int, default=3, help="pages followed under the budget")
    group.add_argument("--embedder", choices=("hashing", "onnx"), default="hashing")
    group.add_argument(
        "--ignore-key",
        action="append",
        default=[],
        metavar="KEY",
        help="leave this key out of the comparison too, at any depth (repeatable)",
    )
    group.add_argument("--datasets", type=Path, default=DATASETS, help="the shared collections")


def compare_answers(args: argparse.Namespace) -> int:
    """The answers' comparison: a table per case and setting; 1 when any differ."""
    import subprocess

    from tools import answer_cases, same_answers

    names = [n.strip() for n in args.cases.split(",") if n.strip()]
    unknown = [n for n in names if n not in ("demo", *answer_cases.COLLECTIONS)]
    if unknown:
        print(
            f"same_output: --cases {','.join(unknown)}: not a case (demo, "
            f"{', '.join(answer_cases.COLLECTIONS)})",
            file=sys.stderr,
        )
        return 2
    missing = [
        n for n in names if n != "demo" and not (args.datasets / n / "corpus.jsonl").is_file()
    ]
    if missing:
        print(
            f"same_output: no collection {', '.join(missing)} under {args.datasets} "
            "(the shared collections; pass --datasets DIR, or leave them out of --cases)",
            file=sys.stderr,
        )
        return 2
    only = [s.strip() for s in args.settings.split(",") if s.strip()] or None
    with tempfile.TemporaryDirectory(prefix="nautilus-answer-cases-") as tmp:
        cases = answer_cases.cases(names, args.datasets, Path(tmp), args.queries)
        valid = list(dict.fromkeys(s for case in cases for s in case.settings))
        if only and set(only) - set(valid):
            bad = ",".join(sorted(set(only) - set(valid)))
            print(
                f"same_output: --settings {bad}: not a setting ({', '.join(valid)})",
                file=sys.stderr,
            )
            return 2
        for case in cases:
            case.settings = {k: v for k, v in case.settings.items() if not only or k in only}
        try:
            rows = same_answers.run(args.answers, cases, args.embedder, args.pages, args.ignore_key)
        except subprocess.CalledProcessError as exc:
            print(
                f"same_output: --answers {args.answers}: neither a folder nor a revision "
                f"git knows ({exc.stderr.strip() if exc.stderr else exc})",
                file=sys.stderr,
            )
            return 2
    print(same_answers.table(rows))
    differ = sum(r.identical != r.answers for r in rows)
    left_out = ", ".join([*same_answers.VARYING, *args.ignore_key])
    print(
        f"{len(rows) - differ} of {len(rows)} cases identical to {args.answers} "
        f"(keys left out: {left_out})"
    )
    return 1 if differ else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", default=DEFAULT_REV, help="the 'before' revision")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    add_answer_options(parser)
    args = parser.parse_args()
    if args.child:
        json.dump(rank_all(), sys.stdout)
        return 0
    if args.answers is not None:
        return compare_answers(args)
    with tempfile.TemporaryDirectory(prefix="nautilus-before-") as tmp:
        before = _side("before", checkout(args.rev, Path(tmp)))
    after = _side("after", None)
    problems = compare(before, after)
    for problem in problems:
        print("DIFFERENT:", problem)
    print(
        f"{len(after) - len(problems)} of {len(after)} batches identical "
        f"(order exact, scores within {TOLERANCE:g}) to {args.rev}"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
