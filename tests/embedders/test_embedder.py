"""Embedders: the hashing embedder is deterministic, normalised and lexical; noop is explicit."""

from __future__ import annotations

import subprocess
import sys
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nautilus_ranking.text.words as words_module
from nautilus_ranking import (
    AdapterResult,
    EmbeddingUnavailableError,
    HashingEmbedder,
    NoopEmbedder,
    RankingSynthesizer,
)
from nautilus_ranking.embedders import Embedder, embedder_from_name
from nautilus_ranking.text.tokens import TokenBatch, keyword_stems, plain_tokens, tokenize
from tools.reference import hashing_vector


def test_tokenize_drops_stop_words_folds_plurals_and_stems() -> None:
    assert tokenize("The Incidents of the queries, and DISKS!") == ["incid", "queri", "disk"]
    assert tokenize("replication replicated") == ["replic", "replic"]  # Snowball English
    assert tokenize("") == []
    assert tokenize("status bus class") == ["status", "bus", "class"]
    # for engines that stem by their own rules (FTS5 porter): plurals folded only
    assert plain_tokens("The Incidents of the queries") == ["incident", "query"]


def test_keyword_stems_match_singular_and_plural() -> None:
    assert keyword_stems("queries and incidents") == ["quer", "incident"]


def test_hashing_vectors_are_unit_length_and_match_the_reference() -> None:
    embedder = HashingEmbedder()
    text = "orders database disk full, disk full again"
    vector = np.array(embedder.embed(text))
    assert vector.shape == (65_536,)
    assert np.linalg.norm(vector) == pytest.approx(1.0)
    expected = np.zeros(65_536)
    for bucket, value in hashing_vector(tokenize(text)).items():
        expected[bucket] = value
    np.testing.assert_allclose(vector, expected, atol=1e-12)


def test_weighted_embedding_scales_features() -> None:
    embedder = HashingEmbedder()
    tokens = tokenize("disk full")
    plain = embedder.embed_weighted(tokens, {})
    np.testing.assert_allclose(plain, embedder.embed("disk full"))
    weighted = embedder.embed_weighted(tokens, {"disk": 0.25})
    expected = np.zeros(65_536)
    for bucket, value in hashing_vector(tokens, weights={"disk": 0.25}).items():
        expected[bucket] = value
    np.testing.assert_allclose(weighted, expected, atol=1e-12)
    # "disk" now weighs 1/4 of "full" (before normalising)
    nonzero = sorted(abs(weighted[weighted != 0]))
    np.testing.assert_allclose(np.array(nonzero) / max(nonzero), [0.25, 1.0])


def test_hashing_is_stable_across_processes() -> None:
    """Python's own hash() is salted per process; ours must not be."""
    code = (
        "from nautilus_ranking import HashingEmbedder; v = HashingEmbedder().embed('disk full'); "
        "print(repr(sum(x * (i + 1) for i, x in enumerate(v))))"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2")
    }
    assert len(outputs) == 1


def test_related_texts_score_above_unrelated() -> None:
    embedder = HashingEmbedder()
    query = np.array(embedder.embed("disk full"))
    related = np.array(embedder.embed("the disk is full on the database host"))
    unrelated = np.array(embedder.embed("login page is slow for mobile users"))
    assert query @ related > 0.3 > abs(query @ unrelated)


def test_empty_text_is_a_zero_vector() -> None:
    assert not any(HashingEmbedder().embed("the of and"))


def test_batch_equals_single() -> None:
    embedder = HashingEmbedder(dim=64)
    texts = ["disk full", "", "replica lag on orders-db", "disk full"]
    batch = embedder.embed_tokens(TokenBatch.from_texts(texts)).dense()
    np.testing.assert_allclose(batch, [embedder.embed(t) for t in texts])


def test_noop_embedder() -> None:
    with pytest.raises(EmbeddingUnavailableError):
        NoopEmbedder().embed("x")
    assert NoopEmbedder(strict=False, dim=3).embed("x") == [0.0, 0.0, 0.0]


def test_protocol_and_factory() -> None:
    assert isinstance(HashingEmbedder(), Embedder)
    assert isinstance(embedder_from_name("hashing"), HashingEmbedder)
    assert isinstance(embedder_from_name("noop"), NoopEmbedder)
    with pytest.raises(ValueError, match="dim"):
        HashingEmbedder(dim=4)


@settings(max_examples=200, deadline=None)
@given(
    texts=st.lists(
        st.text(max_size=60)
        | st.sampled_from(
            ["The disks, the queries", "don’t panic", "naïve café", "a\x02b", "x_y-z", ""]
        ),
        max_size=8,
    )
)
def test_batch_tokenizer_equals_tokenize_on_each_text(texts: list[str]) -> None:
    batch = TokenBatch.from_texts(texts)
    words = {i: w for w, i in batch.vocab.items()}
    got: list[list[str]] = [[] for _ in texts]
    for row, term in zip(batch.rows.tolist(), batch.terms.tolist(), strict=True):
        got[row].append(words[term])
    assert got == [tokenize(t) for t in texts]


#: Words at the batch tokenizer's edges: 8 and 16 bytes (its two integer keys), longer
#: (grouped by bytes), repeated in other rows, non-ASCII inside and beside a word.
EDGE_TEXTS = [
    "abcdefgh abcdefghi abcdefghijklmnop abcdefghijklmnopq ABCDEFGH",
    "abcdefghijklmnopqrstuvwxyz0123 abcdefghijklmnopqrstuvwxyz0123 x",
    "naïve-café électricité 電気ケトル abcdefghijklmnopqrstuvwxyz0123",
    "",
    "   ",
    "the and of",
    "a\x02b",
    "abcdefgh abcdefgh",
]


@pytest.mark.parametrize("chunk", [2048, 2])
@pytest.mark.parametrize("collide", [False, True])
def test_batch_tokenizer_is_exact_even_when_word_hashes_collide(collide: bool, chunk: int) -> None:
    """Words are grouped by a hash and then checked exactly: with every hash equal (what
    a hostile row would aim for) the batch still equals :func:`tokenize` on each text,
    also when it is cut into chunks whose words are grouped again across them."""
    zero = (np.uint64(0),) * 3
    with (
        mock.patch("nautilus_ranking.text.words._MIX", zero if collide else words_module._MIX),
        mock.patch("nautilus_ranking.text.tokens._CHUNK", chunk),
    ):
        batch = TokenBatch.from_texts(EDGE_TEXTS * 3)
    words = {i: w for w, i in batch.vocab.items()}
    got: list[list[str]] = [[] for _ in EDGE_TEXTS * 3]
    for row, term in zip(batch.rows.tolist(), batch.terms.tolist(), strict=True):
        got[row].append(words[term])
    assert got == [tokenize(t) for t in EDGE_TEXTS * 3]
    assert list(batch.vocab) == list(
        dict.fromkeys(t for text in EDGE_TEXTS for t in tokenize(text))
    )


@pytest.mark.parametrize(
    ("query", "text"),
    [
        ("ケトル", "電気ケトル 1.7L ステンレス"),  # CJK is written without spaces
        ("creme", "Crème brûlée with vanilla"),  # an accent the user did not type
        ("CRÈME", "creme brulee"),
        ("чайник", "ЭЛЕКТРИЧЕСКИЙ ЧАЙНИК"),  # Cyrillic, upper case
    ],
)
def test_unicode_words_match_and_score(query: str, text: str) -> None:
    """A word a person would call a match shares tokens with the row, so it ranks with
    a positive similarity (ケトル and creme once matched but scored 0)."""
    assert set(tokenize(query)) & set(tokenize(text))
    ranked = RankingSynthesizer(idf=True).rank(
        [AdapterResult("shop", [{"id": "a", "title": "unrelated"}, {"id": "b", "title": text}])],
        {"query": query},
    )
    assert ranked[0].row["id"] == "b" and ranked[0].similarity > 0
    assert ranked[1].similarity == 0


@settings(max_examples=100, deadline=None)
@given(
    tokens=st.lists(
        st.sampled_from(["disk", "full", "orders", "db", "lag", "w858", "w7002", "ケトル", "café"]),
        min_size=1,
        max_size=12,
    ),
    weighted=st.booleans(),
    data=st.data(),
)
def test_the_query_path_embeds_as_the_batch_path(
    tokens: list[str], weighted: bool, data: st.DataObject
) -> None:
    # embed_query takes a short path for one text; it must give the batch path's vector
    # bit for bit, including the unsigned fallback ("w858" and "w7002" share a bucket
    # with opposite signs, so a query of just those two cancels).
    weights = {t: data.draw(st.floats(0.05, 1.0)) for t in tokens} if weighted else {}
    embedder = HashingEmbedder()
    fast = embedder.embed_query(tokens, weights)
    batch = embedder.embed_tokens(TokenBatch.from_tokens([tokens]), weights)
    assert fast.columns.tolist() == batch.columns.tolist()
    assert fast.values.tolist() == batch.values.tolist()


def test_a_cancelling_query_takes_its_features_unsigned() -> None:
    vector = HashingEmbedder().embed_query(["w858", "w7002"], {})
    assert vector.values.tolist() == [1.0]


def test_a_model_id_names_the_setting_that_makes_it_only_if_one_does() -> None:
    """The pgvector refusal says ``set NAUTILUS_EMBEDDER=...`` only when that setting would
    give the table's model: not for an older hashing version's vectors."""
    from nautilus_ranking.embedders.onnx import INT8_MODEL_ID, MODEL_ID
    from nautilus_ranking.embedders.registry import embedder_name_of

    assert [
        embedder_name_of(m)
        for m in (
            HashingEmbedder(dim=256).model_id,
            INT8_MODEL_ID,
            MODEL_ID,
            "hashing-v1-1024",
            "hashing-v2-256-bigram",
            "hashing-v2-",
            "hashing-v2-²",
            "e5",
        )
    ] == ["hashing", "onnx", "onnx-float32", None, None, None, None, None]
