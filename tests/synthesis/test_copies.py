"""The fast document numbering (fingerprints, canonical text only where they collide)
gives exactly the numbers of ``copies.document_numbers_by_key``, the canonical text per row."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from nautilus_ranking import AdapterResult, RankingSynthesizer
from nautilus_ranking.synthesis import copies
from nautilus_ranking.synthesis.candidates import MAX_TEXT_CHARS, NOT_TEXT, row_texts
from nautilus_ranking.synthesis.rank_warnings import RankWarnings
from nautilus_ranking.text.tokens import TokenBatch


def texts_of(rows: list[dict[str, Any]], limit: int) -> list[str]:
    """The rows' texts as the ranker builds them, cut at ``limit``."""
    return [t[:limit] for t in row_texts(rows, RankWarnings())]


def assert_same_numbers(rows: list[Any], limit: int = MAX_TEXT_CHARS) -> None:
    expected = copies.document_numbers_by_key(rows, None, NOT_TEXT).tolist()
    texts = texts_of(rows, limit)
    by_words = copies.document_numbers(rows, NOT_TEXT)
    by_tokens = copies.document_numbers(rows, NOT_TEXT, texts, TokenBatch.from_texts(texts), limit)
    assert by_words.tolist() == expected
    assert by_tokens.tolist() == expected


class Shouting(str):
    def __str__(self) -> str:
        return self.upper()

    def __format__(self, spec: str) -> str:
        return "different"


class Row(dict[str, Any]):
    pass


COPIES = [  # each pair: copies under the canonical text, unlike under any plain key
    (
        {"title": "Disk full", "text": "on the orders db"},
        {"text": "ON the\tOrders\n db", "title": "disk FULL", "blank": "  ", "n": 7},
    ),
    ({"text": "foo bar"}, {"text": "foo\u00a0bar"}),  # no-break space: non-ASCII
    ({"text": "kelvin"}, {"text": "\u212aelvin"}),  # Kelvin sign lower-cases to k
    ({"text": "a\x1cb"}, {"text": "a b"}),  # str.split's separators
    ({"text": "x\x02y z"}, {"text": "X\x02Y  z"}),  # the batch separator
    ({"a\0x": "y"}, {"a": "x\0y"}),  # a NUL inside a name
    ({"a": "y", "embedding": "a string"}, {"a": "y"}),  # skipped field, in the text
    ({"a": "y", "embedding_model": "m", "embedding": "s"}, {"a": "y"}),
    ({"t": "ΟΔΟΣ"}, {"t": "οδο\u03c2"}),  # final sigma
    ({"t": "the of and"}, {"t": "THE of  and"}),  # stop words only: no tokens
    ({"t": "!!!"}, {"t": "!!!"}),  # no words for the tokenizer
    ({"a": "x" * 40, "b": "tail"}, {"b": "tail", "a": "x" * 40}),  # cut texts (limit 30)
]


@pytest.mark.parametrize(("one", "other"), COPIES)
def test_copies_share_a_number(one: dict[str, Any], other: dict[str, Any]) -> None:
    rows = [one, {"t": "unrelated words"}, other, {"t": "more words"}]
    assert (
        copies.document_numbers_by_key(rows, None, NOT_TEXT)[0]
        == copies.document_numbers_by_key(rows, None, NOT_TEXT)[2]
    )
    assert_same_numbers(rows, limit=30)
    assert_same_numbers(rows)


@pytest.mark.parametrize(
    "rows",
    [
        [{1: "x"}, {"1": "x"}, {"t": "y"}],  # keys that are not strings
        [{"t": Shouting("x")}, {"t": "x"}, {"t": "X"}],  # a str subclass
        [Row(t="x"), {"t": "x"}, {"t": "y"}],  # a dict subclass
        [{"t": "a\0b"}, {"t": "a\0b"}, {"t": "a b"}],  # a NUL in a value
        [{}, {"n": 1}, {"t": " "}, {}, {"t": "x"}],  # rows without any text
        [{"t": "x"}],
        [],
    ],
)
def test_batches_outside_the_fast_path_number_as_before(rows: list[Any]) -> None:
    assert_same_numbers(rows)


WORDS = st.sampled_from(
    [
        "disk",
        "Disk",
        "DISKS",
        "full",
        "the",
        "é",
        "É",
        "e\u0301",
        "Σ",
        "ς",
        "\u212a",
        "k",
        "電気",
        "a-b",
        "1",
        "",
        "!",
    ]
)
SPACES = st.sampled_from([" ", "  ", "\t", "\n", "\u00a0", "\u3000", "\x1c", "\x02", ""])
VALUES = st.one_of(
    st.lists(st.tuples(WORDS, SPACES), max_size=5).map(lambda p: "".join(a + b for a, b in p)),
    st.sampled_from([None, 3, 2.5, " "]),
)
KEYS = st.sampled_from(["title", "text", "Text", "embedding", "embedding_model", "id"])


@st.composite
def batches(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Rows and variants of them: fields reordered, case or inner whitespace changed."""
    originals = draw(st.lists(st.dictionaries(KEYS, VALUES, max_size=4), min_size=1, max_size=6))
    rows = list(originals)
    for row in originals:
        if draw(st.booleans()):
            items = list(row.items())[::-1]
            rows.append(
                {
                    k: (v.upper() if draw(st.booleans()) else v.replace(" ", "\t "))
                    if isinstance(v, str)
                    else v
                    for k, v in items
                }
            )
    order = draw(st.permutations(range(len(rows))))
    return [rows[i] for i in order]


@settings(max_examples=200, deadline=None)
@given(batches(), st.sampled_from([8, MAX_TEXT_CHARS]))
@example([{"t": "x y"}, {"t": "X  Y"}, {"t": "y x"}], MAX_TEXT_CHARS)
# found by a random run: whitespace at the ends of an "id" field (blank in the first row)
@example([{"id": " "}, {"title": "", "id": "disk "}], 8)
@example([{"id": "a "}, {"id": "b"}, {"id": " c"}], MAX_TEXT_CHARS)
def test_fast_numbers_equal_the_canonical_numbers(rows: list[dict[str, Any]], limit: int) -> None:
    assert_same_numbers(rows, limit)


def test_fingerprint_collisions_fall_back_to_the_canonical_text() -> None:
    """Rows with the same words in other fields or another order share a fingerprint but
    are not copies; copies among them still collapse."""
    rows = [
        {"a": "x y", "b": "z"},
        {"a": "z", "b": "x y"},
        {"a": "y x", "b": "z"},
        {"b": "Z", "a": "x  Y"},
    ]
    texts = texts_of(rows, MAX_TEXT_CHARS)
    for batch in (None, TokenBatch.from_texts(texts)):
        numbers = copies.document_numbers(rows, NOT_TEXT, texts, batch, MAX_TEXT_CHARS)
        assert numbers.tolist() == [0, 1, 2, 0]


@pytest.mark.parametrize("idf", [True, False])
@pytest.mark.parametrize("max_candidates", [None, 5])
def test_rank_collapses_the_same_copies_as_the_canonical_numbering(
    idf: bool, max_candidates: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(3)
    words = ["disk", "full", "orders", "replication", "lag", "login", "slow", "page"]
    rows = [
        {"title": " ".join(rng.choice(words, 3)), "text": " ".join(rng.choice(words, 6))}
        for _ in range(12)
    ]
    variants = [
        {"text": r["text"].upper(), "title": r["title"].replace(" ", " \t")} for r in rows[::2]
    ]
    vectors = [{"id": f"v{i}", "embedding": rng.normal(size=4096).tolist()} for i in range(3)]
    results = [
        AdapterResult("a", rows[:6]),
        AdapterResult("b", variants),
        AdapterResult("c", rows[6:] + vectors),
        AdapterResult("d", variants[::2]),
    ]
    context = {"query": "disk full orders"}

    def ranked() -> list[tuple[Any, ...]]:
        ranker = RankingSynthesizer(idf=idf, max_candidates=max_candidates)
        return [
            (r.source_id, r.source_rank, r.score, r.also_from)
            for r in ranker.rank(results, context)
        ]

    fast = ranked()
    monkeypatch.setattr(
        copies,
        "document_numbers",
        lambda rows, *_args, **_kwargs: copies.document_numbers_by_key(rows, None, NOT_TEXT),
    )
    assert fast == ranked()
    assert any(also for *_, also in fast)


ID_VALUES = st.sampled_from(
    [
        "a",
        "A",
        "b",
        "B",
        "row-1",
        "ROW-1",
        "x\x02y",
        "a\0b",
        "é",
        "k",
        "\u212a",
        "a b",
        "c\x1c",
        "",
        " ",
        None,
        7,
    ]
)
ID_KEYS = st.sampled_from(["id", "ID", " id", "i d", "text", "embedding"])


@st.composite
def id_batches(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Rows that mostly hold a distinct id-like value (the one-field proof of distinct
    documents), with the cases it must reject: a value that is not a plain word,
    another name that reads as the same name, a NUL or copy in another field."""
    n = draw(st.integers(1, 8))
    rows: list[dict[str, Any]] = [{"id": f"v{i}"} for i in range(n)]
    for row in rows:
        for key, value in draw(st.dictionaries(ID_KEYS, ID_VALUES, max_size=2)).items():
            row[key] = value
        if draw(st.booleans()):
            row["text"] = draw(st.sampled_from(["disk full", "Disk  FULL", "x\0y", "v0"]))
    return rows


@settings(max_examples=200, deadline=None)
@given(id_batches())
@example([{"id": "a"}, {"ID": "a"}])  # another name, read the same
@example([{"id": "a", "ID": "b"}, {"id": "b", "ID": "a"}])
@example([{"id": "A", "t": "x"}, {"id": "a", "t": "x"}])  # equal once lower-cased
@example([{"id": "a", "t": "x\0id\0b"}, {"id": "b", "t": "x"}])  # a NUL in another field
@example([{"id": "a"}, {"id": "b", "embedding": "s"}])
def test_rows_with_an_id_number_as_the_canonical_text(rows: list[dict[str, Any]]) -> None:
    assert_same_numbers(rows)


def test_distinct_ids_prove_distinct_rows_without_fingerprints() -> None:
    rows = [{"id": f"Row-{i}", "text": "same text", "embedding": [1.0]} for i in range(50)]
    keys = copies._plain_batch_keys(rows)
    assert keys is not None and copies._distinct_by_one_field(rows, keys - NOT_TEXT, keys)
    assert_same_numbers(rows)
    rows[7]["id"] = "row-3"  # a copy of row 3 once lower-cased: the proof does not hold
    assert not copies._distinct_by_one_field(rows, keys - NOT_TEXT, keys)
    assert_same_numbers(rows)
