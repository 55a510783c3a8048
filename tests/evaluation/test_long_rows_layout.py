"""The long-rows benchmark (benchmarks/quality/long_rows.py) places each anchor first, in
the middle or last equally often, and in the partitioned layout every source holds
each place equally often, so the shares by place measure places, not sources."""

from __future__ import annotations

from collections import Counter

from benchmarks.quality.ir_collections import Collection
from benchmarks.quality.long_rows import PLACES, make_long_rows


def collection(name: str, docs: int, queries: int) -> Collection:
    rows = [
        {"id": f"{name}{i}", "title": f"Title {i}", "text": f"Document {i} " + "word " * 60}
        for i in range(docs)
    ]
    asked = {f"q{q}": f"question {q}" for q in range(queries)}
    qrels = {f"q{q}": {f"{name}{3 * q + k}": 1 for k in range(3)} for q in range(queries)}
    return Collection(name, rows, asked, qrels)


def test_each_partition_holds_each_place_equally_often() -> None:
    own, other = collection("a", 200, 6), collection("b", 200, 0)
    long = make_long_rows(own, [other], queries=6)
    places = [long.place[row["id"]] for row in long.collection.docs]
    assert Counter(places) == Counter(dict.fromkeys(PLACES, len(places) // 3))
    for source in range(3):  # partitioned.py: source i holds rows i::3
        held = [places[source::3].count(p) for p in PLACES]
        assert max(held) - min(held) <= 1, (source, held)
