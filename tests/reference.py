"""A plain-Python reference of RankingSynthesizer.rank, written for clarity, not speed.

The vectorised path must match it (scores with assert_allclose, order exactly).
It handles text rows and rows carrying a valid ``embedding``; bad-input
fallbacks are tested separately.
"""

from __future__ import annotations

import itertools
import math
import zlib
from collections import Counter
from typing import Any

from nautilus.ranking_boost import BOOST_LEVELS, RRF_K
from nautilus.synthesis.lexical import IDF_FLOOR, tokenize

MASK64 = (1 << 64) - 1


def crc(term: str) -> int:
    return zlib.crc32(term.encode("utf-8"))


def hashing_vector(text: str, dim: int = 1024) -> list[float]:
    tokens = tokenize(text)
    features: Counter[int] = Counter(crc(t) for t in tokens)
    for first, second in itertools.pairwise(tokens):
        features[(((crc(first) * 1000003) & MASK64) ^ crc(second)) % (1 << 32)] += 1
    vector = [0.0] * dim
    for h, tf in features.items():
        sign = -1.0 if (h >> 31) & 1 else 1.0
        vector[h % dim] += sign * (1.0 + math.log(tf))
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm else vector


def cosine(a: list[float], b: list[float]) -> float:
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(x * x for x in b))
    if na == 0 or nb == 0:
        return 0.0
    return sum(x * y for x, y in zip(a, b, strict=True)) / (na * nb)


def row_text(row: dict[str, Any]) -> str:
    return " ".join(v for k, v in row.items()
                    if isinstance(v, str) and k not in ("embedding", "embedding_model"))


def reference_rank(sources: list[tuple[str, list[dict[str, Any]]]], query: str,
                   top_k: int | None = None, idf: bool = False,
                   boosts: dict[str, str] | None = None, max_candidates: int | None = None,
                   dim: int = 1024) -> list[tuple[str, int, float]]:
    """(source_id, source_rank, score) best first."""
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

    query_vector = hashing_vector(query, dim)
    for c in candidates:
        vector = c["row"].get("embedding")
        if vector is None or len(vector) != dim:
            vector = hashing_vector(row_text(c["row"]), dim)
        c["sim"] = cosine([float(x) for x in vector], query_vector)

    for c in candidates:
        c["factor"] = 1.0
    query_tokens = list(dict.fromkeys(tokenize(query)))
    if idf and query_tokens and candidates:
        n = len(candidates)
        token_sets = [set(tokenize(row_text(c["row"]))) for c in candidates]
        df = Counter(t for tokens in token_sets for t in tokens)
        weight = {t: (math.log(1 + n / df[t]) / math.log(1 + n)) if df[t] else 1.0
                  for t in query_tokens}
        total = sum(weight.values())
        for c, tokens in zip(candidates, token_sets, strict=True):
            covered = sum(weight[t] for t in query_tokens if t in tokens)
            c["factor"] = IDF_FLOOR + (1 - IDF_FLOOR) * covered / total

    for c in candidates:
        c["score"] = c["sim"] * c["factor"] + c["bump"]
    ordered = sorted(candidates, key=lambda c: (-c["score"], c["routing"], c["rank"]))
    if top_k is not None:
        ordered = ordered[:top_k]
    return [(c["sid"], c["rank"], c["score"]) for c in ordered]
