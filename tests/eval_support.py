"""Shared helpers of the ``nautilus-ranking eval`` tests: where the shared collections live."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

#: ``../shared/datasets`` relative to the project root (never copied into the repo).
DATASETS = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"


def missing(what: str) -> str:
    """Why a test that needs the shared IR collections skips, in words a newcomer can act
    on: what they are, where they were looked for, and where the README says more."""
    return (
        f"{what} not found under {DATASETS}: the IR test collections (ADI, CACM, CISI, "
        "Cranfield in BEIR's layout) live outside this repository; README.md, 'The test "
        "collections', says what they are and where to put them"
    )


def dataset(name: str) -> Path:
    folder = DATASETS / name
    if not (folder / "corpus.jsonl").is_file():
        pytest.skip(missing(f"collection {name!r}"))
    return folder


def qrels(folder: Path) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    with (folder / "qrels" / "test.tsv").open(encoding="utf-8") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            out.setdefault(row["query-id"], {})[row["corpus-id"]] = int(row["score"])
    return out


def queries(folder: Path) -> dict[str, str]:
    with (folder / "queries.jsonl").open(encoding="utf-8") as handle:
        return {str(q["_id"]): q["text"] for q in map(json.loads, handle) if q}


def corpus_ids(folder: Path) -> list[str]:
    with (folder / "corpus.jsonl").open(encoding="utf-8") as handle:
        return [str(json.loads(line)["_id"]) for line in handle if line.strip()]
