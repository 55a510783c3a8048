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

A row a token budget handed over as its passage (``RankedRow.passage`` with a
``handle``: selection/passage_parts.py) is the passage in ``rows``, its entry marked
``passage``, while ``data`` (what the attestation signs) holds it whole; such an answer
rebuilds ``data`` only once asked again with ``whole`` and those handles.

``rank`` and ``score`` are ours: the attestation covers the rows, not their order,
rank or score (docs/nautilus-broker.md, "What the attestation covers"). ``ranking``
says how the rows were ranked, ``profile`` among it: the ranking profile of the
request's agent (null: the global knobs). A ranked answer's order is covered by
``ranking_hash`` (each row's source and id in rank order, the reference time, the
profile: :func:`recompute_ranking_hash`), signed with the cursor keys in
``ranking_signature``.

Over MCP the answer is held to the broker's ``mcp.max_response_bytes``
(:func:`within_bytes`): the stock tool bounds the broker's answer, and ``explain``
and the entries' fields add to it, so the explanation is cut first (from the
lowest-ranked row up; ``ranking.explained_rows`` says how many kept theirs), then rows
from the end, their sources named in ``truncated_sources``.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from nautilus_ranking.ranking_hash import ranking_hash
from nautilus_ranking.records import RankedRow
from nautilus_ranking.selection.tokens import count_tokens
from nautilus_ranking.upstream.outcome import RequestRanking

#: The components ``explain`` adds to an entry (the lean fields are the entry's own).
_LEAN = frozenset({"source_id", "rank", "score", "also_from"})


def ranked_answer(
    response: Any, outcome: RequestRanking | None, explain: bool = False
) -> dict[str, Any]:
    """``response`` (a ``BrokerResponse``) as the ranked form, JSON-able."""
    body: dict[str, Any] = response.model_dump(mode="json")
    data: dict[str, list[Any]] = body.pop("data") or {}
    ranked = (
        outcome is not None
        and outcome.fallback is None
        and (bool(outcome.ranking) or bool(outcome.nearest))
    )
    rows = _in_rank_order(data, outcome, explain) if ranked else _in_data_order(data)
    head = {
        "request_id": body.pop("request_id"),
        "outcome": body.pop("outcome", None),
        "rows": rows,
        "sources": list(data),
        "ranking": {
            "ranked": ranked,
            "ranked_by": outcome.ranked_by if outcome is not None else None,
            "profile": outcome.profile if outcome is not None else None,
            "budget": outcome.budget if outcome is not None else None,
            "fallback": outcome.fallback if outcome is not None else None,
        },
    }
    if explain and ranked:
        head["ranking"]["explained_rows"] = len(rows)
    if ranked and outcome is not None and outcome.ranking_hash is not None:
        head["ranking_hash"] = outcome.ranking_hash
        head["ranking_signature"] = outcome.ranking_signature
    if outcome is not None and outcome.confidence is not None:
        head["ranking"]["confidence"] = outcome.confidence["value"]
    if outcome is not None and outcome.time is not None:
        head["ranking"]["time"] = outcome.time
    if outcome is not None and outcome.abstain is not None:
        head["ranking"]["abstained"] = bool(outcome.abstain["abstained"])
        head["ranking"]["abstain"] = {
            **{k: v for k, v in outcome.abstain.items() if k != "abstained"},
            "nearest": [
                {"source": r.source_id, "id": r.row.get("id"), "rank": r.rank, "score": r.score}
                for r in outcome.nearest
            ],
        }
    return {**head, **body}


#: Where the ranked MCP tool puts the attestation token with
#: ``NAUTILUS_UPSTREAM_ATTESTATION_IN_META``: the result's ``_meta``, which a client
#: keeps for its code and does not hand the model.
ATTESTATION_META = "nautilus_ranking/attestation_token"


def attestation_out_of_text(answer: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """The answer's attestation token, and the answer without it: in its place
    ``attestation_token_sha256`` (so a verifier can tie the token it holds to the rows
    it read) and ``ranking.answer_tokens``, the tokens of the rows and of the rest."""
    token = answer.get("attestation_token")
    rest = {k: v for k, v in answer.items() if k != "attestation_token"}
    if isinstance(token, str):
        rest["attestation_token_sha256"] = hashlib.sha256(token.encode()).hexdigest()
    rows, whole = count_tokens([answer_text(rest.get("rows", [])), answer_text(rest)])
    ranking = rest.get("ranking")
    if isinstance(ranking, dict):
        rest["ranking"] = {**ranking, "answer_tokens": {"rows": rows, "envelope": whole - rows}}
    return (token if isinstance(token, str) else None), rest


def recompute_ranking_hash(answer: dict[str, Any]) -> str:
    """The ``ranking_hash`` of a ranked answer, from what it carries: its ``rows`` in
    order, ``ranking.time``'s reference and ``ranking.profile`` (the broker has no
    ``as_of``). Equal to the answer's own unless the byte bound cut rows from it."""
    ranking = answer.get("ranking") or {}
    time = ranking.get("time")
    return ranking_hash(
        [(e["source"], e["row"]) for e in answer["rows"]],
        reference=time.get("reference") if isinstance(time, dict) else None,
        profile=ranking.get("profile"),
    )


def answer_text(answer: Any) -> str:
    """The answer as the ranked tool sends it: compact JSON."""
    return json.dumps(answer, separators=(",", ":"), ensure_ascii=False, default=str)


def within_bytes(answer: dict[str, Any], max_bytes: int | None) -> dict[str, Any]:
    """``answer`` cut to ``max_bytes`` bytes of :func:`answer_text` (None: unbounded):
    the rows' explanations first, from the lowest-ranked row up, then rows from the
    end, each source that loses one named in ``truncated_sources``. The answer's other
    fields (the attestation among them) are never cut."""
    if max_bytes is None:
        return answer
    over = _size(answer) - max_bytes
    if over <= 0:
        return answer
    rows = [dict(e) for e in answer["rows"]]
    explained = [i for i, e in enumerate(rows) if "explain" in e]
    while explained and over > 0:
        i = explained.pop()
        over -= _size({"explain": rows[i].pop("explain")}) - 1  # its key, value and comma
    truncated = set(answer.get("truncated_sources") or ())
    while True:
        while rows and over > 0:
            dropped = rows.pop()
            truncated.add(dropped["source"])
            over -= _size(dropped) + 1  # the entry and its comma
        out = {**answer, "rows": rows, "truncated_sources": sorted(truncated)}
        if "explained_rows" in answer.get("ranking", {}):
            explained_rows = sum("explain" in e for e in rows)
            out["ranking"] = {**answer["ranking"], "explained_rows": explained_rows}
        over = _size(out) - max_bytes  # exact: a source newly named costs its bytes
        if over <= 0 or not rows:
            return out


def _size(value: Any) -> int:
    return len(answer_text(value).encode())


def _entry(source: str, ranked: RankedRow, row: Any, explain: bool) -> dict[str, Any]:
    """``row`` (as ``data`` holds it) beside its ranking entry; a row the budget handed
    over as its passage is the passage (``ranked.row``), marked ``passage``."""
    handed = handed_as_passage(ranked)
    entry = {
        "source": source,
        "rank": ranked.rank,
        "score": round(ranked.score, 6),
        "also_from": [c.as_dict() for c in ranked.also_from],
        "row": ranked.row if handed else row,
    }
    if handed and ranked.passage is not None:
        entry["passage"] = dict(ranked.passage)
    if explain:
        entry["explain"] = {k: v for k, v in ranked.explain().items() if k not in _LEAN}
    return entry


def handed_as_passage(ranked: RankedRow) -> bool:
    """Whether the budget handed ``ranked`` over as its passage (its passage carries
    the handle of the whole row; a passage that only scored carries none)."""
    return ranked.passage is not None and "handle" in ranked.passage


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
