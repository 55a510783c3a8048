"""A plain-Python reference of RankingSynthesizer.rank, written for clarity, not speed.

Content similarity and the fusion with the sources' votes (fusion.py) as the
docs describe them: a vote per ranked source, a content vote by normalised similarity
weighted by how many documents the ranked sources share, unranked sources voting by
content, the boost a share of the relevance spread, copies collapsed.

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

try:
    from nautilus_ranking.synthesis import ranking_boost
    from nautilus_ranking.synthesis.ranking_boost import BOOST_LEVELS, RRF_K
    from nautilus_ranking.text.tokens import tokenize
except ImportError:  # an earlier revision's layout: the "before" side of tools.same_output
    try:
        from nautilus_ranking.synthesis.boosts import (  # type: ignore[import-not-found,no-redef]
            BOOST_LEVELS,
            RRF_K,
        )

        from nautilus_ranking.synthesis import (  # type: ignore[attr-defined,no-redef]
            boosts as ranking_boost,
        )
        from nautilus_ranking.text.tokens import tokenize
    except ImportError:
        from nautilus_ranking.ranking_boost import BOOST_LEVELS, RRF_K  # type: ignore[no-redef]

        from nautilus_ranking import ranking_boost  # type: ignore[attr-defined,no-redef]
        from nautilus_ranking.text import tokenize  # type: ignore[attr-defined,no-redef]

DIM = 1 << 16
Sparse = dict[int, float]


def crc(term: str) -> int:
    return zlib.crc32(term.encode("utf-8"))


def hashing_vector(
    tokens: list[str],
    dim: int = DIM,
    weights: dict[str, float] | None = None,
) -> Sparse:
    """Word features, 1 + ln(tf), each scaled by its token's weight, signed by bit 31,
    summed per bucket, unit length."""
    weights = weights or {}
    unigrams: Counter[int] = Counter(crc(t) for t in tokens)
    unigram_weight = {crc(t): weights.get(t, 1.0) for t in tokens}
    vector: Sparse = {}
    for h, tf in unigrams.items():
        sign = -1.0 if (h >> 31) & 1 else 1.0
        vector[h % dim] = vector.get(h % dim, 0.0) + sign * unigram_weight[h] * (1.0 + math.log(tf))
    # Sums run in bucket order, as the code's do: two texts whose similarities are equal
    # must get the same bits here too, or a last-digit difference splits their content
    # rank tie (a whole rank: 1/61 against 1/62), which the comparison cannot tolerate.
    vector = dict(sorted(vector.items()))
    norm = math.sqrt(sum(x * x for x in vector.values()))
    return {b: x / norm for b, x in vector.items()} if norm else vector


def cosine(row: Sparse | list[float], query: Sparse) -> float:
    """A hashed (sparse) row is already unit length and is used as it is, as the code
    does: normalising it again would move its last digit and split exact ties."""
    norm_query = math.sqrt(sum(x * x for _, x in sorted(query.items())))
    if norm_query == 0:
        return 0.0
    if not isinstance(row, list):
        return sum(row.get(b, 0.0) * (q / norm_query) for b, q in sorted(query.items()))
    norm_row = math.sqrt(sum(x * x for x in row))
    if norm_row == 0:
        return 0.0
    return sum(row[b] * q for b, q in query.items()) / (norm_row * norm_query)


def row_text(row: dict[str, Any]) -> str:
    return " ".join(
        v
        for k, v in row.items()
        if isinstance(v, str) and k not in ("embedding", "embedding_model")
    )


def idf_weights(token_sets: list[set[str]], query_tokens: list[str]) -> dict[str, float]:
    n = len(token_sets)
    df = Counter(t for tokens in token_sets for t in tokens)
    return {t: math.log(1 + n / df[t]) / math.log(1 + n) if df[t] else 1.0 for t in query_tokens}


def doc_key(row: dict[str, Any]) -> str | None:
    """Copies share this: the string fields by name, names and values lower-cased, each
    value's whitespace collapsed (and none kept at its ends)."""
    parts = [
        f"{k.lower()}\x1f{' '.join(v.lower().split())}"
        for k, v in sorted(row.items())
        if isinstance(v, str) and k not in ("embedding", "embedding_model") and v.strip()
    ]
    return "\x1e".join(parts) or None


def spearman(x: list[float], y: list[float]) -> float:
    def ranks(values: list[float]) -> list[float]:
        return [
            sum(1 for w in values if w < v) + (sum(1 for w in values if w == v) + 1) / 2
            for v in values
        ]

    rx, ry = ranks(x), ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    sxx = sum((a - mx) ** 2 for a in rx)
    syy = sum((b - my) ** 2 for b in ry)
    return sxy / math.sqrt(sxx * syy) if sxx > 0 and syy > 0 else 0.0


def key_ordered(rows: list[dict[str, Any]]) -> bool:
    """Some field every row has, int or str (digits as their number), strictly ascending
    or descending over 8 or more rows, and not just the positions 0.. or 1.. step 1."""
    if len(rows) < 8:
        return False

    def value(v: Any) -> Any:
        if isinstance(v, bool) or not isinstance(v, int | str):
            return None
        if isinstance(v, str) and v.isascii() and v.isdigit() and len(v) <= 18:
            return int(v)
        return v

    for name in rows[0]:
        values = [value(r.get(name)) for r in rows]
        if any(v is None for v in values) or len({type(v) for v in values}) > 1:
            continue
        pairs = list(itertools.pairwise(values))
        if not (all(a < b for a, b in pairs) or all(a > b for a, b in pairs)):
            continue
        if values in (list(range(len(values))), list(range(1, len(values) + 1))):
            continue
        return True
    return False


def score_ordered(rows: list[dict[str, Any]]) -> bool:
    """Some field every row has as a finite float, never rising or never falling down the
    rows, with 8 or more distinct values (a score: the source is ranked)."""
    if len(rows) < 8:
        return False
    for name in rows[0]:
        values = [r.get(name) for r in rows]
        if not all(type(v) is float and math.isfinite(v) for v in values):
            continue
        pairs = list(itertools.pairwise(values))
        if not (all(a >= b for a, b in pairs) or all(a <= b for a, b in pairs)):
            continue
        if len(set(values)) >= 8:
            return True
    return False


def bm25_reference(
    tokens: list[str], query_tokens: list[str], statistics: list[list[str]], idf: bool
) -> float:
    """One text's BM25 score, term by term: k1 = 1.2, b = 0.75, a query word weighted
    1 + ln(its count in the query), IDF ln(1 + (N' - df' + 0.5) / (df' + 0.5)) with 100
    pseudo-documents of the word prior added to the ``statistics`` texts' N and df (the
    prior alone without ``idf``)."""
    from nautilus_ranking.text.word_prior import UNKNOWN_SHARE, table

    k1, b, m = 1.2, 0.75, 100.0
    n = len(statistics) if idf else 0
    avgdl = sum(len(t) for t in statistics) / len(statistics) if statistics else 0.0
    relative = len(tokens) / avgdl if avgdl > 0 else 1.0
    score = 0.0
    for term, count in Counter(query_tokens).items():
        tf = tokens.count(term)
        if tf == 0:
            continue
        df = sum(term in set(t) for t in statistics) if idf else 0
        shrunk_df = df + m * table().get(term, UNKNOWN_SHARE)
        idf_t = math.log(1.0 + (n + m - shrunk_df + 0.5) / (shrunk_df + 0.5))
        weight = (1.0 + math.log(count)) * idf_t
        score += weight * tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * relative))
    return score


def reference_rank(
    sources: list[tuple[str, list[dict[str, Any]]]],
    query: str,
    top_k: int | None = None,
    idf: bool = False,
    boosts: dict[str, str] | None = None,
    max_candidates: int | None = None,
    dim: int = DIM,
    declared: dict[str, bool] | None = None,
    similarities: dict[tuple[str, int], float] | None = None,
    lexical: str = "bm25",
) -> list[tuple[str, int, float]]:
    """(source_id, source_rank, score) best first, with the hashing embedder of ``dim``;
    content is BM25 over the batch (``lexical="bm25"``, the default, unless a row brings
    a vector) or the hashing embedder's cosine (``"cosine"``).

    Copies (same :func:`doc_key`) collapse into the best-scored one. ``similarities``,
    when given, receives every scored row's similarity by (source_id, source_rank)."""
    boosts = boosts or {}
    declared = declared or {}
    union = []
    for routing, (sid, rows) in enumerate(sources):
        level = BOOST_LEVELS.get(boosts.get(sid, ""))
        multiplier = level.multiplier if level else 1.0
        bump = level.bump if level else 0.0
        for position, row in enumerate(rows, start=1):
            union.append(
                {
                    "sid": sid,
                    "routing": routing,
                    "rank": position,
                    "row": row,
                    "key": 1.0 / (RRF_K + position / multiplier),
                    "plain": 1.0 / (RRF_K + position),
                    "bump": bump,
                    "doc": doc_key(row) or f"alone-{routing}-{position}",
                }
            )
    kept, reference = union, union
    if max_candidates is not None and len(union) > max_candidates:

        def cap(key: str) -> list[dict[str, Any]]:
            best = sorted(union, key=lambda c: (-c[key], c["routing"], c["rank"]))
            chosen = {id(c) for c in best[:max_candidates]}
            return [c for c in union if id(c) in chosen]

        kept, reference = cap("key"), cap("plain")
    scored = [c for c in union if any(c is x for x in kept) or any(c is x for x in reference)]

    query_tokens = tokenize(query)
    weights = None
    if idf and reference and query_tokens:  # IDF weights the query's own tokens
        token_sets = [set(tokenize(row_text(c["row"]))) for c in reference]
        weights = idf_weights(token_sets, list(dict.fromkeys(query_tokens)))
    query_vector = hashing_vector(query_tokens, dim, weights)
    if lexical == "bm25" and not any(c["row"].get("embedding") is not None for c in scored):
        # BM25 over the batch: statistics from the reference rows, each document once
        firsts: dict[str, list[str]] = {}
        for c in reference:
            firsts.setdefault(c["doc"], tokenize(row_text(c["row"])))
        for c in scored:
            c["sim"] = bm25_reference(
                tokenize(row_text(c["row"])), query_tokens, list(firsts.values()), idf
            )
            if similarities is not None:
                similarities[(c["sid"], c["rank"])] = c["sim"]
        scored_vectors: list[dict[str, Any]] = []
    else:
        scored_vectors = scored
    for c in scored_vectors:
        vector = c["row"].get("embedding")
        if vector is None or len(vector) != dim:
            vector = hashing_vector(tokenize(row_text(c["row"])), dim)
        else:
            vector = [float(x) for x in vector]
        c["sim"] = cosine(vector, query_vector)
        if similarities is not None:
            similarities[(c["sid"], c["rank"])] = c["sim"]

    # each document's source votes over the whole union: best rank per (document, source)
    best_rank: dict[tuple[str, str], int] = {}
    for c in union:
        pair = (c["doc"], c["sid"])
        best_rank[pair] = min(best_rank.get(pair, c["rank"]), c["rank"])
    # which sources are ranked: declared, else unranked when its rows come in key order,
    # else the larger z-score of Spearman(order, similarity) and Spearman(order, the
    # other sources' votes) on the reference, 1 -> 2; unranked ones give no votes there
    said = dict(declared)
    for sid, rows in sources:
        if sid not in said and key_ordered(rows):
            said[sid] = False
        elif sid not in said and score_ordered(rows):
            said[sid] = True
    declared = said
    ref_votes: dict[str, float] = {}
    ref_best: dict[tuple[str, str], int] = {}
    for c in reference:
        pair = (c["doc"], c["sid"])
        ref_best[pair] = min(ref_best.get(pair, c["rank"]), c["rank"])
    for (doc, sid), rank in ref_best.items():
        if declared.get(sid) is not False:
            ref_votes[doc] = ref_votes.get(doc, 0.0) + 1.0 / (RRF_K + rank)
    shares = len({c["doc"] for c in reference}) < len(reference)
    weight = {}
    for sid, _ in sources:
        if sid in declared:
            weight[sid] = 1.0 if declared[sid] else 0.0
            continue
        mine = [c for c in reference if c["sid"] == sid]
        if len(mine) < 3:
            weight[sid] = 0.0
            continue
        order = [-c["rank"] for c in mine]
        z = spearman(order, [c["sim"] for c in mine]) * math.sqrt(len(mine) - 1)
        others = [ref_votes.get(c["doc"], 0.0) - 1.0 / (RRF_K + c["rank"]) for c in mine]
        if shares and max(others) > min(others):
            z = max(z, spearman(order, others) * math.sqrt(len(mine) - 1))
        weight[sid] = min(max(z - 1.0, 0.0), 1.0)
    evidence: dict[str, float] = {}
    for (doc, sid), rank in best_rank.items():
        evidence[doc] = evidence.get(doc, 0.0) + weight[sid] / (RRF_K + rank)
    # content rank among the reference's documents (each at its most similar copy)
    doc_sim: dict[str, float] = {}
    for c in reference:
        doc_sim[c["doc"]] = max(doc_sim.get(c["doc"], -math.inf), c["sim"])
    # the content scale: mean +- 3 sd of the reference documents' positive similarities
    positive = [v for v in doc_sim.values() if v > 0]
    low, span = 0.0, 0.0
    if len(positive) >= 2:
        mean = sum(positive) / len(positive)
        sd = math.sqrt(sum((v - mean) ** 2 for v in positive) / len(positive))
        low, span = mean - 3 * sd, 6 * sd
    # content weight: 1 when no document has two voters, 0.1 from a 10% share on
    ranked_docs: dict[str, int] = {}
    voters: dict[str, int] = {}
    for doc, sid in best_rank:
        if weight[sid] > 0:
            voters[doc] = voters.get(doc, 0) + 1
            ranked_docs[doc] = ranked_docs.get(doc, 0) + 1
    shared = (
        sum(1 for n in ranked_docs.values() if n >= 2) / len(ranked_docs) if ranked_docs else 0.0
    )
    content_weight = max(1.0 - shared / 0.1, 0.1)
    # unranked sources: a row whose document no other ranked source returned gets the vote
    # of its content rank among its source's reference rows; copies share the best vote
    # of the document's copies in the reference (a row outside it keeps its own if better)
    unranked: dict[str, float] = {}
    own_vote: dict[int, float] = {}
    in_reference = {id(r) for r in reference}
    for c in scored:
        if weight[c["sid"]] >= 1 or c["sim"] <= 0 or content_weight <= 0:
            continue
        others = voters.get(c["doc"], 0) - (1 if weight[c["sid"]] > 0 else 0)
        if others > 0:
            continue
        own_sim: dict[str, float] = {}
        for r in reference:
            if r["sid"] == c["sid"]:
                own_sim[r["doc"]] = max(own_sim.get(r["doc"], -math.inf), r["sim"])
        rank = 1 + sum(1 for s in own_sim.values() if s > c["sim"])
        vote = content_weight * (1.0 - weight[c["sid"]]) / (RRF_K + rank)
        own_vote[id(c)] = vote
        if id(c) in in_reference:
            unranked[c["doc"]] = max(unranked.get(c["doc"], 0.0), vote)

    def scale(sim: float) -> float:
        if sim <= 0:
            return 0.0
        return min(max((sim - low) / span, 0.0), 1.0) if span > 0 else 1.0

    # lexical content: a ranked source's row rated below what its rank implies (the
    # pooled scaled content of the ranked reference rows at the same relative place) is
    # lifted half the source's weight of the way to it
    pooled = sorted((scale(r["sim"]) for r in reference if weight[r["sid"]] > 0), reverse=True)
    for c in scored:
        c["scaled"] = scale(c["sim"])
        mine = [r["rank"] for r in reference if r["sid"] == c["sid"]]
        if weight[c["sid"]] > 0 and mine and pooled:
            place = sum(1 for rank in mine if rank < c["rank"])
            implied = pooled[min(place * len(pooled) // len(mine), len(pooled) - 1)]
            gap = max(implied - c["scaled"], 0.0)
            c["scaled"] += 0.5 * weight[c["sid"]] * gap
    for c in scored:  # every scored row stays a candidate; at most len(kept) leave
        c["content"] = content_weight * c["scaled"] / (RRF_K + 1)
        vote = max(own_vote.get(id(c), 0.0), unranked.get(c["doc"], 0.0))
        c["relevance"] = c["content"] + evidence[c["doc"]] + vote
    # stage 2: a signed share of the spread of the reference documents' relevance (the
    # best at a third of the depth minus the one at the depth), decayed by the row's
    # place among its source's reference rows (a demotion undecayed); rows with no
    # relevance are not moved
    doc_relevance: dict[str, float] = {}
    for c in reference:
        doc_relevance[c["doc"]] = max(doc_relevance.get(c["doc"], -math.inf), c["relevance"])
    best = sorted((v for v in doc_relevance.values() if v > 0), reverse=True)
    spread = 0.0
    if len(best) >= 2:
        depth = min(ranking_boost.SPREAD_DEPTH, len(best))
        spread = min(best[math.ceil(depth / 3) - 1] - best[depth - 1], ranking_boost.MAX_SPREAD)
    for c in scored:
        share = c["bump"]
        bump = 0.0
        if share and c["relevance"] > 0 and spread > 0:
            place = 1 + sum(
                1 for r in reference if r["sid"] == c["sid"] and r["relevance"] > c["relevance"]
            )
            decay = 1.0 / (1.0 + (place - 1) / ranking_boost.RANK_DECAY) if share > 0 else 1.0
            bump = share * spread * decay
        c["score"] = c["relevance"] + bump
    ordered = sorted(scored, key=lambda c: (-c["score"], c["routing"], c["rank"]))
    seen: set[str] = set()
    distinct = []
    for c in ordered:
        if c["doc"] not in seen:
            seen.add(c["doc"])
            distinct.append(c)
    limit = top_k if len(kept) == len(union) else min(top_k or len(kept), len(kept))
    if limit is not None:
        distinct = distinct[:limit]
    return [(c["sid"], c["rank"], c["score"]) for c in distinct]
