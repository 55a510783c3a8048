"""A plain-Python reference of RankingSynthesizer.rank, written for clarity, not speed.

The vectorised path must match it (scores with assert_allclose, order exactly).
It handles text rows and rows carrying a valid ``embedding`` with the hashing
embedder; bad-input fallbacks are tested separately. Vectors are dicts
{bucket: value} because the hashing space has 65,536 dimensions.
"""

from __future__ import annotations

import itertools
import math
import zlib
from collections import Counter
from typing import Any

from nautilus.ranking_boost import BOOST_LEVELS, RRF_K
from nautilus.text import tokenize

MASK64 = (1 << 64) - 1
DIM = 1 << 16
Sparse = dict[int, float]


def crc(term: str) -> int:
    return zlib.crc32(term.encode("utf-8"))


def hashing_vector(tokens: list[str], dim: int = DIM,
                   weights: dict[str, float] | None = None, bigrams_on: bool = False) -> Sparse:
    """Unigram and bigram features, 1 + ln(tf), each scaled by its tokens' weights
    (a bigram by the geometric mean), signed by bit 31, summed per bucket, unit length."""
    weights = weights or {}
    unigrams: Counter[int] = Counter(crc(t) for t in tokens)
    unigram_weight = {crc(t): weights.get(t, 1.0) for t in tokens}
    bigrams: Counter[int] = Counter()
    bigram_weight: dict[int, float] = {}
    for first, second in itertools.pairwise(tokens) if bigrams_on else ():
        h = (((crc(first) * 1000003) & MASK64) ^ crc(second)) % (1 << 32)
        bigrams[h] += 1
        bigram_weight[h] = math.sqrt(weights.get(first, 1.0) * weights.get(second, 1.0))
    vector: Sparse = {}
    for counts, weight_of in ((unigrams, unigram_weight), (bigrams, bigram_weight)):
        for h, tf in counts.items():
            sign = -1.0 if (h >> 31) & 1 else 1.0
            vector[h % dim] = vector.get(h % dim, 0.0) + sign * weight_of[h] * (1.0 + math.log(tf))
    norm = math.sqrt(sum(x * x for x in vector.values()))
    return {b: x / norm for b, x in vector.items()} if norm else vector


def cosine(row: Sparse | list[float], query: Sparse) -> float:
    dense = isinstance(row, list)
    values = row if dense else list(row.values())
    norm_row = math.sqrt(sum(x * x for x in values))
    norm_query = math.sqrt(sum(x * x for x in query.values()))
    if norm_row == 0 or norm_query == 0:
        return 0.0
    dot = sum((row[b] if dense else row.get(b, 0.0)) * q for b, q in query.items())
    return dot / (norm_row * norm_query)


def row_text(row: dict[str, Any]) -> str:
    return " ".join(v for k, v in row.items()
                    if isinstance(v, str) and k not in ("embedding", "embedding_model"))


def idf_weights(token_sets: list[set[str]], query_tokens: list[str]) -> dict[str, float]:
    n = len(token_sets)
    df = Counter(t for tokens in token_sets for t in tokens)
    return {t: math.log(1 + n / df[t]) / math.log(1 + n) if df[t] else 1.0 for t in query_tokens}


def reference_rank(sources: list[tuple[str, list[dict[str, Any]]]], query: str,
                   top_k: int | None = None, idf: bool = False,
                   boosts: dict[str, str] | None = None, max_candidates: int | None = None,
                   dim: int = DIM) -> list[tuple[str, int, float]]:
    """(source_id, source_rank, score) best first, with the hashing embedder of ``dim``."""
    boosts = boosts or {}
    candidates = []
    for routing, (sid, rows) in enumerate(sources):
        level = BOOST_LEVELS.get(boosts.get(sid, ""))
        multiplier = level.multiplier if level else 1.0
        bump = level.bump if level else 0.0
        for position, row in enumerate(rows, start=1):
            key = 1.0 / (RRF_K + position / multiplier)
            candidates.append({"sid": sid, "routing": routing, "rank": position, "row": row,
                               "key": key, "bump": bump})
    if max_candidates is not None and len(candidates) > max_candidates:
        by_key = sorted(candidates, key=lambda c: (-c["key"], c["routing"], c["rank"]))
        kept = {id(c) for c in by_key[:max_candidates]}
        candidates = [c for c in candidates if id(c) in kept]

    query_tokens = tokenize(query)
    weights = None
    if idf and candidates and query_tokens:  # IDF weights the query's own tokens
        token_sets = [set(tokenize(row_text(c["row"]))) for c in candidates]
        weights = idf_weights(token_sets, list(dict.fromkeys(query_tokens)))
    query_vector = hashing_vector(query_tokens, dim, weights)
    for c in candidates:
        vector = c["row"].get("embedding")
        if vector is None or len(vector) != dim:
            vector = hashing_vector(tokenize(row_text(c["row"])), dim)
        else:
            vector = [float(x) for x in vector]
        relevance = cosine(vector, query_vector)
        c["score"] = relevance + c["bump"] * abs(relevance)
    ordered = sorted(candidates, key=lambda c: (-c["score"], c["routing"], c["rank"]))
    if top_k is not None:
        ordered = ordered[:top_k]
    return [(c["sid"], c["rank"], c["score"]) for c in ordered]
