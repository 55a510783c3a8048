"""Dated copies of the shared collections: each document a time, some a newer revision.

Shared by the recency benchmark (``benchmarks/quality/recency.py``, whose docstring
describes the generator) and the identical-answers check (``tools/same_answers.py``),
so both rank the same dated rows. Written before anything was tuned; seed :data:`SEED`.
"""

from __future__ import annotations

import calendar
import random
import re
from dataclasses import dataclass
from typing import Protocol

SEED = 58
START = calendar.timegm((2024, 12, 1, 0, 0, 0))
SPAN = 2 * 365 * 86_400
REVISED = 0.5
#: The row key a document's time is under: epoch seconds, an int, so no content score changes.
TIME = "modified"


class Corpus(Protocol):
    """What the generator reads of a collection."""

    @property
    def name(self) -> str: ...
    @property
    def docs(self) -> list[dict[str, str]]: ...  # {"id", "title", "text"}
    @property
    def qrels(self) -> dict[str, dict[str, int]]: ...  # query id -> doc id -> grade


@dataclass
class Dated:
    """One collection's dated copy: each document's time, the revised ones' revision
    (id → (text, time, source index)), and the dated judgments by version key."""

    times: dict[str, int]
    revisions: dict[str, tuple[str, int, int]]
    home: dict[str, int]  # id → the source index of the original
    dated_qrels: dict[str, dict[str, int]]


def sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s]


def generate(collection: Corpus) -> Dated:
    """The dated copy, seeded per collection."""
    rng = random.Random(f"{SEED}:{collection.name}")
    times = {d["id"]: START + rng.randrange(SPAN) for d in collection.docs}
    home = {d["id"]: i % 3 for i, d in enumerate(collection.docs)}
    relevant = sorted(
        {d for grades in collection.qrels.values() for d, g in grades.items() if g > 0}
    )
    relevant = [d for d in relevant if d in times]
    chosen = sorted(rng.sample(relevant, round(REVISED * len(relevant))))
    by_id = {d["id"]: d for d in collection.docs}
    revisions: dict[str, tuple[str, int, int]] = {}
    for doc_id in chosen:
        parts = sentences(by_id[doc_id]["text"]) or [by_id[doc_id]["text"]]
        donor = by_id[rng.choice(collection.docs)["id"]]
        donor_parts = sentences(donor["text"]) or [donor["text"] or "revised"]
        at = rng.randrange(1, len(parts)) if len(parts) > 1 else 0
        parts[at] = rng.choice(donor_parts)
        newer = times[doc_id] + 1 + rng.randrange(max(1, START + SPAN - times[doc_id]))
        revisions[doc_id] = (" ".join(parts), newer, (home[doc_id] + 1) % 3)
    dated_qrels = {
        qid: {
            **{key(d, False): max(0, g - (1 if d in revisions else 0)) for d, g in grades.items()},
            **{key(d, True): g for d, g in grades.items() if d in revisions},
        }
        for qid, grades in collection.qrels.items()
    }
    return Dated(times, revisions, home, dated_qrels)


def key(doc_id: str, revision: bool) -> str:
    return doc_id + "~rev" if revision else doc_id


def parts_with_revisions(collection: Corpus, dated: Dated) -> list[list[dict[str, str]]]:
    """The three sources' documents: every third document each, and each revision in
    the source after its original's (fts → sql → vector → fts)."""
    parts = [collection.docs[i::3] for i in range(3)]
    by_id = {d["id"]: d for d in collection.docs}
    extra: list[list[dict[str, str]]] = [[], [], []]
    for doc_id, (text, _, where) in sorted(dated.revisions.items()):
        extra[where].append({"id": doc_id, "title": by_id[doc_id]["title"], "text": text})
    return [part + more for part, more in zip(parts, extra, strict=True)]
