"""The near-copy benchmark's metrics (benchmarks/quality/near_duplicates.py): α-nDCG@k against a
brute-force reference (the ideal found by trying every order), and the folded lists."""

from __future__ import annotations

import math
from itertools import permutations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from benchmarks.quality.near_duplicates import COPY, alpha_ndcg, folded, repeats


def reference_alpha_ndcg(
    ids: list[str], grades: dict[str, int], union: list[str], k: int, alpha: float
) -> float:
    """Clarke et al.'s α-nDCG with each original its own subtopic, binary relevance;
    the ideal is the best of every order of the union's rows (small unions only)."""

    def dcg(order: tuple[str, ...] | list[str]) -> float:
        seen: dict[str, int] = {}
        total = 0.0
        for i, doc in enumerate(order[:k]):
            o = doc.removesuffix(COPY)
            if grades.get(o, 0) > 0:
                total += (1 - alpha) ** seen.get(o, 0) / math.log2(i + 2)
            seen[o] = seen.get(o, 0) + 1
        return total

    # the ideal may also use relevant originals the union lacks (judged relevant)
    pool = sorted(set(union) | {d for d, g in grades.items() if g > 0})
    ideal = max(dcg(p) for p in permutations(pool, min(k, len(pool))))
    return dcg(ids) / ideal if ideal > 0 else 0.0


docs = st.sampled_from(["a", "b", "c", "a" + COPY, "b" + COPY, "d"])


@given(st.lists(docs, max_size=5, unique=True), st.sets(st.sampled_from("abcd"), max_size=3))
@example(["a", "a" + COPY, "c"], {"a", "c"})
def test_alpha_ndcg_matches_the_brute_force_reference(
    ranked: list[str], relevant: set[str]
) -> None:
    grades = {d: 1 for d in relevant}
    union = ["a", "b", "c", "d", "a" + COPY, "b" + COPY]
    got = alpha_ndcg(ranked, grades, union, k=4, alpha=0.5)
    assert got == pytest.approx(reference_alpha_ndcg(ranked, grades, union, 4, 0.5))


def test_a_worked_example() -> None:
    # a relevant, its copy, then c relevant: 1/log2(2) + 0.5/log2(3) + 1/log2(4);
    # the ideal: a, c, then a's copy: 1 + 1/log2(3) + 0.5/log2(4)
    got = alpha_ndcg(["a", "a" + COPY, "c"], {"a": 1, "c": 1}, ["a", "a" + COPY, "c"], k=3)
    want = (1 + 0.5 / math.log2(3) + 1 / 2) / (1 + 1 / math.log2(3) + 0.5 / 2)
    assert got == pytest.approx(want)


def test_a_repeat_holds_a_slot_and_gains_nothing() -> None:
    assert folded(["a", "b" + COPY, "a" + COPY, "b"]) == ["a", "b", "<repeat 2>", "<repeat 3>"]
    assert repeats(["a", "b" + COPY, "a" + COPY, "b"]) == 2
