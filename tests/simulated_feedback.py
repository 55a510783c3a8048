"""Feedback logs for tests, in the shape the server writes (``feedback/events.py``):
answers whose rows agents use under a position-based model with known θ and γ."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

CONFIG_HASH = "0123456789abcdef"


def query_record(
    qid: str,
    hits: Sequence[tuple[str, str]],
    levels: Mapping[str, str] | None = None,
    config_hash: str = CONFIG_HASH,
    profile: str | None = None,
    timestamp: str = "2026-12-07T10:00:00.000Z",
    page: int = 1,
) -> dict[str, Any]:
    """One answer's query record; ``hits``: (source, id) in position order."""
    return {
        "application": "nautilus-ranking",
        "query_id": qid,
        "client_id": "hmac:client",
        "user_query": "hmac:query",
        "timestamp": timestamp,
        "query_attributes": {
            "config_hash": config_hash,
            "levels": dict(levels or {}),
            "top_k": len(hits),
            "page": page,
            "abstained": False,
            "confidence": None,
            "profile": profile,
            "hit_sources": [s for s, _ in hits],
        },
        "query_response_id": qid,
        "query_response_hit_ids": [i for _, i in hits],
    }


def event(
    event_id: str,
    action: str,
    qid: str,
    source: str,
    object_id: str,
    position: int,
    components: Mapping[str, float] | None = None,
    page: int = 1,
) -> dict[str, Any]:
    """One event naming a row (an impression carries ``components``)."""
    attributes: dict[str, Any] = {
        "object": {"object_id": object_id, "object_id_field": source},
        "position": {"ordinal": position, "page": page},
    }
    if components is not None:
        attributes["components"] = dict(components)
    return {
        "application": "nautilus-ranking",
        "event_id": event_id,
        "action_name": action,
        "query_id": qid,
        "client_id": "hmac:client",
        "timestamp": "2026-12-07T10:00:01.000Z",
        "message_type": "impression" if action == "impression" else "feedback",
        "event_attributes": attributes,
    }


def write_jsonl(path: Path, records: Sequence[Mapping[str, Any] | str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def simulate(
    folder: Path,
    answers: int,
    theta: Sequence[float],
    gamma: Mapping[str, float],
    seed: int = 0,
    config_hash: str = CONFIG_HASH,
    levels: Mapping[str, str] | None = None,
) -> None:
    """``answers`` answers of ``len(theta)`` rows each, sources drawn at random per
    position, each row used with probability ``theta[position] × gamma[source]``."""
    rng = np.random.default_rng(seed)
    sources = sorted(gamma)
    queries, events = [], []
    for n in range(answers):
        qid = f"q{n}"
        hits = [(sources[int(rng.integers(len(sources)))], f"d{n}-{k}") for k in range(len(theta))]
        queries.append(query_record(qid, hits, levels, config_hash))
        for k, (source, oid) in enumerate(hits, start=1):
            score = 0.03 - 0.002 * k
            components = {"score": score, "relevance": score, "boost_bump": 0.0}
            events.append(event(f"{qid}-i{k}", "impression", qid, source, oid, k, components))
            if rng.random() < theta[k - 1] * gamma[source]:
                events.append(event(f"{qid}-u{k}", "used", qid, source, oid, k))
    write_jsonl(folder / "ubi_queries-1-20261207T100000Z.jsonl", queries)
    write_jsonl(folder / "ubi_events-1-20261207T100000Z.jsonl", events)
