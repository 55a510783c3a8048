"""What a long row's passages are whatever the query, kept for the rows seen last.

A long row's windows (:func:`~nautilus_ranking.text.passage_windows.windows`), each
window's lexical vector (its words' hashed unit vector: the IDF weights of the batch
and the query are on the query's side, :func:`~.similarity.lexical_query`), the words
each window holds (its IDF factor is then :func:`passage_factors`, without tokenising
it) and the model's vectors of the windows it embedded are the same for every query and
every batch. They are kept per row (:class:`RowPassages`), keyed by its text, for the rows
seen last, up to :data:`KEPT_BYTES`. A new query on a long row seen before is then one
lookup and dot products: splitting and tokenising its some 40 windows, and a vector
cache lookup a window, cost such a query twice its ranking by the first 128 pieces
(``benchmarks/speed/passage_cost.py``).

The scores are those of tokenising every window each time, to the byte: a window's
lexical vector is its words' alone (only the order in which three or more of one
window's words that share one of 65,536 hash buckets are summed may differ, by the last
bit, as it did from one batch to another), and the model's vectors reach the same
product as the model's cache gave.
"""

from __future__ import annotations

import bisect
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from nautilus_ranking.embedders import Embedder, SparseVector
from nautilus_ranking.synthesis.similarity import LEXICAL_DIM, lexical_vectors
from nautilus_ranking.text.arrays import FloatArray, IntArray
from nautilus_ranking.text.passage_windows import windows
from nautilus_ranking.text.tokens import TokenBatch

#: Bytes of the rows' records kept (the text, spans, lexical vectors, the words of each
#: window, the model's vectors): a row of 1,000-4,000 word pieces takes about 110 KB
#: (13 KB of text, 20 KB of lexical vectors, 37 KB of words, 40 KB of the model's
#: vectors as float32), so some 600 such rows.
KEPT_BYTES = 64 * 1024 * 1024
#: Bytes a span takes in a list (a tuple of two ints).
_SPAN_BYTES = sys.getsizeof((0, 0)) + 2 * sys.getsizeof(1 << 20) + 8


@dataclass(frozen=True)
class WindowTerms:
    """Which words each of a row's windows holds: the row's distinct tokens (sorted) and
    the (window, token) pairs, each once, sorted by window then token."""

    tokens: tuple[str, ...]
    window: npt.NDArray[np.int32]
    token: npt.NDArray[np.int32]

    @property
    def nbytes(self) -> int:
        words = sys.getsizeof(self.tokens) + sum(map(sys.getsizeof, self.tokens))
        return words + self.window.nbytes + self.token.nbytes


@dataclass
class RowPassages:
    """One long row's windows as ``[start, end)`` offsets, each window's lexical vector
    (entries ``window``, ``column``, ``value``: :func:`~.similarity.lexical_vectors`),
    the words each window holds (``terms``), and per vector space the model's vectors of
    the windows it embedded (``slots``: for each window, its row in ``vectors``, -1 when
    not embedded); ``key``: the row's text, which it is kept under."""

    key: str
    spans: list[tuple[int, int]]
    window: npt.NDArray[np.int32]
    column: npt.NDArray[np.int32]
    value: npt.NDArray[np.float64]
    terms: WindowTerms
    vectors: dict[bytes, tuple[npt.NDArray[np.int32], npt.NDArray[Any]]] = field(
        default_factory=dict
    )

    @property
    def nbytes(self) -> int:
        arrays = self.window.nbytes + self.column.nbytes + self.value.nbytes + self.terms.nbytes
        kept = sum(at.nbytes + v.nbytes for at, v in self.vectors.values())
        return sys.getsizeof(self.key) + len(self.spans) * _SPAN_BYTES + arrays + kept


_kept: OrderedDict[str, RowPassages] = OrderedDict()
_kept_bytes = 0
_lock = threading.Lock()


def kept_rows() -> tuple[int, int]:
    """How many rows' records are kept, and their bytes (bounded by :data:`KEPT_BYTES`)."""
    with _lock:
        return len(_kept), _kept_bytes


def row_passages(texts: list[str]) -> list[RowPassages]:
    """Each long text's record: kept ones looked up, the others split and tokenised
    (together, in one batch) and kept, the least recently used leaving past
    :data:`KEPT_BYTES`."""
    found: list[RowPassages | None] = []
    with _lock:
        for text in texts:
            record = _kept.get(text)
            if record is not None:
                _kept.move_to_end(text)
            found.append(record)
    new = [i for i, record in enumerate(found) if record is None]
    if new:
        made = _records([texts[i] for i in new])
        with _lock:
            for i, record in zip(new, made, strict=True):
                found[i] = _keep(record)
            _evict()
    return [record for record in found if record is not None]


def _keep(record: RowPassages) -> RowPassages:
    """``record`` kept (the one kept already for its text, when another request made it
    first). Under the lock."""
    global _kept_bytes
    kept = _kept.get(record.key)
    if kept is not None:
        return kept
    _kept[record.key] = record
    _kept_bytes += record.nbytes
    return record


def _evict() -> None:
    """The least recently used records out, past :data:`KEPT_BYTES`. Under the lock."""
    global _kept_bytes
    while _kept_bytes > KEPT_BYTES and _kept:
        _, record = _kept.popitem(last=False)
        _kept_bytes -= record.nbytes


def _records(texts: list[str]) -> list[RowPassages]:
    """The records of texts not seen: their windows, tokenised in one batch."""
    spans = [windows(text) for text in texts]
    counts = np.array([len(s) for s in spans], dtype=np.int64)
    starts = np.concatenate(([0], np.cumsum(counts)))
    batch = TokenBatch.from_texts([t[a:b] for t, s in zip(texts, spans, strict=True) for a, b in s])
    vectors = lexical_vectors(batch)
    pair_window, pair_term, _ = batch.pairs()
    names = np.empty(len(batch.vocab), dtype=object)
    for name, term in batch.vocab.items():
        names[term] = name
    # entries and pairs are sorted by window: each text's are one run
    bounds = np.searchsorted(vectors.rows, starts)
    pair_bounds = np.searchsorted(pair_window, starts)
    out = []
    for k, text_spans in enumerate(spans):
        run = slice(int(bounds[k]), int(bounds[k + 1]))
        pairs = slice(int(pair_bounds[k]), int(pair_bounds[k + 1]))
        out.append(
            RowPassages(
                texts[k],
                text_spans,
                (vectors.rows[run] - starts[k]).astype(np.int32),
                vectors.columns[run].astype(np.int32),
                vectors.values[run].copy(),
                _window_terms(pair_window[pairs] - starts[k], pair_term[pairs], names),
            )
        )
    return out


def _window_terms(window: IntArray, term: IntArray, names: npt.NDArray[Any]) -> WindowTerms:
    """A row's (window, term) pairs with the batch's term numbers turned into the row's
    own (its distinct tokens, sorted), in the same order whatever the batch."""
    terms, local = np.unique(term, return_inverse=True)
    tokens = names[terms]
    order = np.argsort(tokens, kind="stable")
    place = np.empty(len(order), dtype=np.int32)
    place[order] = np.arange(len(order), dtype=np.int32)
    token = place[local.reshape(-1)]
    by_window = np.lexsort((token, window))
    return WindowTerms(
        tuple(tokens[order].tolist()),
        window[by_window].astype(np.int32),
        token[by_window].astype(np.int32),
    )


def passage_factors(
    records: list[RowPassages], weights: dict[str, float], floor: float
) -> FloatArray:
    """Each of the records' windows' IDF factor, in order: what
    :func:`~nautilus_ranking.text.tokens.idf_factors` gives the windows tokenised (its
    weights ``weights``), from the words each window holds."""
    n = sum(len(r.spans) for r in records)
    total = sum(weights.values())
    if n == 0 or total <= 0:
        return np.ones(n, dtype=np.float64)
    covered = []
    for record in records:
        tokens = record.terms.tokens
        weight_by_token = np.zeros(len(tokens), dtype=np.float64)
        for name, weight in weights.items():
            at = bisect.bisect_left(tokens, name)
            if at < len(tokens) and tokens[at] == name:
                weight_by_token[at] = weight
        covered.append(
            np.bincount(
                record.terms.window,
                weights=weight_by_token[record.terms.token],
                minlength=len(record.spans),
            )
        )
    factors: FloatArray = floor + (1.0 - floor) * (np.concatenate(covered) / total)
    return factors


def lexical_scores(records: list[RowPassages], query: SparseVector) -> FloatArray:
    """Each of the records' windows' lexical similarity to ``query`` (the unit vector of
    :func:`~.similarity.lexical_query`), in order: :meth:`SparseRows.dot_sparse` of
    their vectors, the same products summed in the same order, the query's entries
    found by a table over the dimension rather than a search."""
    counts = [len(r.spans) for r in records]
    if not records:
        return np.zeros(0, dtype=np.float64)
    in_query = np.zeros(LEXICAL_DIM, dtype=bool)
    in_query[query.columns] = True
    query_value = np.zeros(LEXICAL_DIM, dtype=np.float64)
    query_value[query.columns] = query.values
    columns = np.concatenate([r.column for r in records])
    hit = np.flatnonzero(in_query[columns])
    entry_starts = np.cumsum([0, *(len(r.value) for r in records)])
    record_of = np.searchsorted(entry_starts, hit, side="right") - 1
    window = np.concatenate([r.window for r in records])[hit] + np.cumsum([0, *counts])[record_of]
    products = np.concatenate([r.value for r in records])[hit] * query_value[columns[hit]]
    scores = np.bincount(window, weights=products, minlength=sum(counts))
    return scores.astype(np.float64, copy=False)


class KeptVectors:
    """An embedder that keeps the model's vectors of a batch's passages on their rows'
    records: a passage seen before is read from its row's record (one lookup a row),
    the others go to the model, and are kept. ``owner``/``window``: each text's record
    (an index into ``records``) and window, in the order the texts come."""

    def __init__(
        self,
        embedder: Any,
        space: bytes,
        records: list[RowPassages],
        owner: IntArray,
        window: IntArray,
    ) -> None:
        self.embedder = embedder
        self.space = space
        self.records = records
        self.owner = owner
        self.window = window
        self.dim = getattr(embedder, "dim", None)
        self.keeps_deadline = bool(getattr(embedder, "keeps_deadline", False))

    def embed(self, text: str) -> list[float]:
        return [float(x) for x in self.embed_batch([text])[0]]

    def embed_batch(self, texts: list[str], deadline: float | None = None) -> npt.NDArray[Any]:
        """The texts' vectors: the kept ones from their rows' records, the others from
        the model (with ``deadline``: NaN for those it did not reach), at the model's
        own precision."""
        if not texts or len(texts) != len(self.owner):
            return self._model(texts, deadline)
        at, stacked = self._kept()
        missing = np.flatnonzero(at < 0)
        made = self._model([texts[i] for i in missing.tolist()], deadline) if len(missing) else None
        if made is not None:
            self._keep(missing, made)
        if stacked is None:
            assert made is not None  # every text missing
            return made
        out = stacked[np.maximum(at, 0)]  # one gather; a missing text's row is set below
        if made is not None:
            out = out.astype(np.result_type(out, made), copy=False)
            out[missing] = made
        return out

    def _kept(self) -> tuple[IntArray, npt.NDArray[Any] | None]:
        """Each text's row in the kept vectors of its records stacked (-1: none kept),
        and that stack (None: no vector kept)."""
        used, which = np.unique(self.owner, return_inverse=True)
        records = [self.records[k] for k in used.tolist()]
        stores = [r.vectors.get(self.space) for r in records]
        kept = [store for store in stores if store is not None]
        if not kept:
            return np.full(len(self.owner), -1, dtype=np.int64), None
        slots = np.concatenate(
            [
                store[0] if store is not None else np.full(len(r.spans), -1, np.int32)
                for store, r in zip(stores, records, strict=True)
            ]
        )
        first = np.cumsum([0, *(len(r.spans) for r in records)])
        shift = np.cumsum([0, *(len(store[1]) if store is not None else 0 for store in stores)])
        local = slots[first[which] + self.window]
        at: IntArray = np.where(local >= 0, local + shift[which], -1)
        return at, np.concatenate([store[1] for store in kept])

    def _model(self, texts: list[str], deadline: float | None) -> npt.NDArray[Any]:
        embed_batch: Callable[..., Any] = self.embedder.embed_batch
        made = np.asarray(
            embed_batch(texts, deadline) if deadline is not None else embed_batch(texts)
        )
        if made.ndim != 2 or made.shape[0] != len(texts):
            raise ValueError(f"embedder returned shape {made.shape}, expected {len(texts)} rows")
        return made

    def _keep(self, positions: IntArray, made: npt.NDArray[Any]) -> None:
        """The vectors the model made (not the ones it did not reach) kept on their
        rows' records."""
        reached = ~np.isnan(made).all(axis=1)
        owners = self.owner[positions[reached]]
        windows_made = self.window[positions[reached]]
        made = made[reached]
        with _lock:
            for k in np.unique(owners).tolist():
                mine = owners == k
                _add_vectors(self.records[k], self.space, windows_made[mine], made[mine])
            _evict()


def _add_vectors(
    record: RowPassages, space: bytes, windows_made: IntArray, made: npt.NDArray[Any]
) -> None:
    """``made`` (the vectors of ``windows_made``) added to ``record``'s, new arrays in
    place of the old (a request reading them meanwhile reads the old). Under the lock."""
    global _kept_bytes
    before = record.nbytes
    slots, vectors = record.vectors.get(space, (np.full(len(record.spans), -1, np.int32), made[:0]))
    windows_new, first = np.unique(windows_made, return_index=True)
    new = slots[windows_new] < 0
    windows_new, added = windows_new[new], made[first[new]]
    if not len(windows_new):
        return
    slots = slots.copy()
    slots[windows_new] = len(vectors) + np.arange(len(windows_new), dtype=np.int32)
    record.vectors[space] = (slots, np.concatenate((vectors, added)))
    if _kept.get(record.key) is record:
        _kept_bytes += record.nbytes - before


def kept_vectors(
    embedder: Embedder,
    records: list[RowPassages],
    owner: IntArray,
    window: IntArray,
) -> Embedder:
    """``embedder``, or with the vectors of the passages it embeds kept on their rows
    (:class:`KeptVectors`) when it keeps vectors itself (a memory cache) and names its
    vector space (``space``, as the model does): the vectors are then the same whatever
    the row they come from."""
    space = getattr(embedder, "space", None)
    if (
        not isinstance(space, bytes)
        or not int(getattr(embedder, "cache_size", 0) or 0)
        or not callable(getattr(embedder, "embed_batch", None))
    ):
        return embedder
    return KeptVectors(embedder, space, records, owner, window)
