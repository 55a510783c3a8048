"""What a budget of N tokens hands over, per way in, on the demo.

The demo's 20 judged queries (``tests/data/demo_judgments``), ranked with a top K of 10
and IDF on, through the request core every way in shares (``request.answer``), once
with the text a JSON answer counts a row as (``POST /v1/query``, ``query --json``, the
retrievers: its ranking entry) and once with MCP's (the ``search`` tool's result line).
Per budget: the mean rows handed over, the mean tokens they hold (o200k_base with the
``tokens`` extra, else the estimate) and nDCG@10 of the rows handed over. The table in
docs/configuration.md is this script's output.

    python -m benchmarks.quality.budget_transports [--budgets 150,300,600,1500]
"""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from nautilus_ranking.evaluation.judgments import read_judgments, read_queries
from nautilus_ranking.evaluation.metrics import ndcg_at, relevant
from nautilus_ranking.log import configure_logging
from nautilus_ranking.mcp.results import row_text as mcp_row_text
from nautilus_ranking.request.answer import RowText, answer_sync, response_row_text
from nautilus_ranking.request.engine import Engine
from nautilus_ranking.request.model import QueryRequest
from nautilus_ranking.selection.tokens import tokenizer_name
from nautilus_ranking.settings.model import NautilusSettings

JUDGED = Path(__file__).resolve().parents[2] / "tests" / "data" / "demo_judgments"
BUDGETS = (150, 300, 600, 1500)
WAYS: tuple[tuple[str, RowText], ...] = (
    ("JSON (serve, query --json, retrievers)", response_row_text),
    ("MCP search", mcp_row_text),
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budgets", default=",".join(map(str, BUDGETS)))
    args = parser.parse_args(argv)
    budgets = [int(b) for b in args.budgets.split(",")]
    configure_logging("error")
    queries = read_queries(JUDGED / "queries.jsonl").texts
    grades = read_judgments(JUDGED / "qrels.tsv").grades
    judged = [(t, grades[q]) for q, t in queries.items() if relevant(grades.get(q, {}))]
    with tempfile.TemporaryDirectory() as data:
        os.environ["NAUTILUS_DATA_DIR"] = data
        engine = Engine.assemble(NautilusSettings(ranking_top_k=10, ranking_idf=True))
        print(f"{len(judged)} judged demo queries, top K 10, IDF on; tokens: {tokenizer_name()}")
        print("| budget | way in | rows handed over | tokens of rows | nDCG@10 |")
        print("|---:|---|---:|---:|---:|")
        for budget in [*budgets, None]:  # None: no budget (counted under a vast one)
            for way, text in WAYS:
                asked = budget if budget is not None else 10**9
                answers = [
                    answer_sync(engine, QueryRequest(query=q, max_tokens=asked), row_text=text)
                    for q, _ in judged
                ]
                rows = sum(len(a.response.ranking) for a in answers) / len(judged)
                used = sum((a.response.budget or {})["tokens_used"] for a in answers)
                ndcg = sum(
                    ndcg_at([r.row.get("id") for r in a.response.ranking], g, 10)
                    for a, (_, g) in zip(answers, judged, strict=True)
                )
                print(
                    f"| {budget or 'none'} | {way} | {rows:.1f} | {used / len(judged):.0f} "
                    f"| {ndcg / len(judged):.3f} |"
                )
        engine.broker.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
