"""The broker's answer in the order an agent should read it: ``ranked_answer``.

The broker's ``BrokerResponse.data`` is ``{source_id: rows}``: an agent reading it
from the top reads every row of the first source before the best row of the second.
The ranked route (``POST /v1/request/ranked``) and tool (``nautilus_request_ranked``)
answer with the same response, its ``data`` replaced by ``rows``: one list in global
rank order, each entry ``{"source", "rank", "score", "also_from", "row"}`` (and, with
``explain``, ``"explain"``: the score's components). ``sources`` lists ``data``'s keys,
so ``data`` is rebuilt exactly (what the attestation's ``response_hash`` covers)::

    data = {s: [e["row"] for e in answer["rows"] if e["source"] == s]
            for s in answer["sources"]}

``rank`` and ``score`` are ours: the attestation covers the rows, not their order,
rank or score (docs/nautilus-broker.md, "What the attestation covers").
"""

from __future__ import annotations

from typing import Any

from nautilus_ranking.records import RankedRow
from nautilus_ranking.upstream.outcome import RequestRanking

#: The components ``explain`` adds to an entry (the lean fields are the entry's own).
_LEAN = frozenset({"source_id", "rank", "score", "also_from"})


def ranked_answer(
    response: Any, outcome: RequestRanking | None, explain: bool = False
) -> dict[str, Any]:
    """``response`` (a ``BrokerResponse``) as the ranked form, JSON-able."""
    body: dict[str, Any] = response.model_dump(mode="json")
    data: dict[str, list[Any]] = body.pop("data") or {}
    ranked = outcome is not None and outcome.fallback is None and bool(outcome.ranking)
    rows = _in_rank_order(data, outcome, explain) if ranked else _in_data_order(data)
    head = {
        "request_id": body.pop("request_id"),
        "outcome": body.pop("outcome", None),
        "rows": rows,
        "sources": list(data),
        "ranking": {
            "ranked": ranked,
            "ranked_by": outcome.ranked_by if outcome is not None else None,
            "budget": outcome.budget if outcome is not None else None,
            "fallback": outcome.fallback if outcome is not None else None,
        },
    }
    return {**head, **body}


def _entry(source: str, ranked: RankedRow, row: Any, explain: bool) -> dict[str, Any]:
    entry = {
        "source": source,
        "rank": ranked.rank,
        "score": round(ranked.score, 6),
        "also_from": [c.as_dict() for c in ranked.also_from],
        "row": row,
    }
    if explain:
        entry["explain"] = {k: v for k, v in ranked.explain().items() if k not in _LEAN}
    return entry


def _in_rank_order(
    data: dict[str, list[Any]], outcome: RequestRanking | None, explain: bool
) -> list[dict[str, Any]]:
    """Each source's rows of ``data`` (each source's in rank order, perhaps cut short
    from its end by a transport bound) beside their ranking entries, best first."""
    by_source: dict[str, list[RankedRow]] = {}
    for ranked in outcome.ranking if outcome is not None else ():
        by_source.setdefault(ranked.source_id, []).append(ranked)
    entries: list[tuple[int, int, dict[str, Any]]] = []
    for order, (source, rows) in enumerate(data.items()):
        ranks = by_source.get(source, [])
        for i, row in enumerate(rows):
            if i < len(ranks):
                entries.append((ranks[i].rank, order, _entry(source, ranks[i], row, explain)))
            else:  # not ranked (cannot happen with the synthesizer's data): last
                entry: dict[str, Any] = {"source": source, "rank": None, "score": None}
                entries.append((1 << 62, order, {**entry, "also_from": [], "row": row}))
    entries.sort(key=lambda e: (e[0], e[1]))
    return [e[2] for e in entries]


def _in_data_order(data: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Nothing was ranked (every knob unset, or the ranking fell back): ``data``'s rows
    in its own order, unscored."""
    rows = [(source, row) for source, source_rows in data.items() for row in source_rows]
    return [
        {"source": source, "rank": i + 1, "score": None, "also_from": [], "row": row}
        for i, (source, row) in enumerate(rows)
    ]
