"""unique_inverse is np.unique(return_inverse=True), whatever the keys."""

from __future__ import annotations

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from nautilus_ranking.text.arrays import cached_values, unique_inverse


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.one_of(st.integers(0, 50), st.integers(0, 2**62), st.integers(-5, -1)), max_size=200
    )
)
@example([])
@example([2**62, 0, 2**62])  # keys too large to share 63 bits with the positions
@example([-1, 3, -1])
def test_unique_inverse_is_numpys(keys: list[int]) -> None:
    array = np.array(keys, dtype=np.int64)
    found, at = unique_inverse(array)
    expected, expected_at = np.unique(array, return_inverse=True)
    assert found.tolist() == expected.tolist()
    assert at.tolist() == expected_at.reshape(-1).tolist()
    assert found.dtype == np.int64 and at.dtype == np.int64


@settings(max_examples=50, deadline=None)
@given(st.lists(st.lists(st.sampled_from("abcdefgh"), max_size=12), max_size=6), st.integers(1, 5))
def test_cached_values_are_the_computed_values(calls: list[list[str]], limit: int) -> None:
    """Whatever is cached already, and however small the cache."""
    cache: dict[str, str] = {}
    widest = limit  # the cache outgrows the limit only by one call's distinct keys
    for keys in calls:
        widest = max(widest, len(set(keys)))
        assert cached_values(cache, str.upper, keys, limit) == [k.upper() for k in keys]
        assert len(cache) <= widest
