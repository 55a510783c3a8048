"""What a ``search`` call answers: the structured content, and the text a model reads.

One result per ranked row, written as ``POST /v1/query`` writes it (``_as_http``); the
text is one line a result (what a token budget counts, ``row_text``); a bad call is a
tool error naming the field (``error_result``).
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

import mcp_types as types

from nautilus_ranking.records import VECTOR_FIELDS, RankedRow
from nautilus_ranking.request.answer import Answer, cap_relaxed
from nautilus_ranking.request.errors import ProblemError
from nautilus_ranking.request.model import QueryRequest
from nautilus_ranking.selection.budget_pages import too_large_note
from nautilus_ranking.service.problems import strict_json


def search_content(result: Answer) -> dict[str, Any]:
    request, response = result.request, result.response
    out: dict[str, Any] = {
        "query": request.query,
        "results": [
            _result(r, bool(request.explain), result.ranked, bool(request.vectors))
            for r in response.ranking
        ],
        "page": result.page,
        "sources_queried": list(response.sources_queried),
        "sources_errored": [
            {"source_id": e.source_id, "error_type": e.error_type, "message": e.message}
            for e in response.sources_errored
        ],
        "response_hash": response.response_hash,
        "request_id": response.request_id,
    }
    if result.citations is not None:  # feedback on: what a citation of a result names
        out["ranking_id"] = result.citations.ranking_id
        result.citations.add_to(out["results"])
    hashed = result.ranking_hash
    if hashed is not None:  # only a ranked answer: the order the results are in
        out["ranking_hash"] = hashed
    if response.budget is not None:
        out["budget"] = response.budget
    if response.cut is not None:
        out["cut"] = response.cut
    if response.embedding is not None:
        out["embedding"] = response.embedding
    cap = result.per_source_cap
    if cap is not None:
        out["per_source_cap"] = cap
    if response.confidence is not None:  # a ranked answer: null without a fit
        out["confidence"] = response.confidence["value"]
        out["confidence_fit"] = response.confidence.get("fit", "shipped")  # whose number
    if response.abstain is not None:  # under a minimum confidence: why, and what was near
        out["abstained"] = bool(response.abstain["abstained"])
        out["abstain"] = {
            **{k: v for k, v in response.abstain.items() if k != "abstained"},
            "nearest": [
                {"source": r.source_id, "id": _as_http(r.row.get("id")), "score": r.score}
                for r in response.nearest
            ],
        }
    if request.explain:
        out["explain"] = result.explain if result.profiled else result.plan.explain
    if result.profiled:
        out["profile"] = result.profile
    return out


def _result(r: RankedRow, explain: bool, ranked: bool, vectors: bool) -> dict[str, Any]:
    components = r.explain()
    why = (
        {k: v for k, v in components.items() if k not in ("source_id", "rank", "score")}
        if explain
        else r.why()
    )
    why["also_from"] = [c.as_dict() for c in r.also_from]
    # A vector source's 1,024 floats are for the ranker: most of what a model would read.
    row = r.row if vectors else {k: v for k, v in r.row.items() if k not in VECTOR_FIELDS}
    out = {
        "rank": r.rank,
        "source": r.source_id,
        "id": _as_http(r.row.get("id")),
        "score": r.score if ranked else None,
        "source_rank": r.source_rank,
        "why": why,
        "row": _as_http(row),
    }
    if r.passage is not None and "handle" in r.passage:  # handed over in part
        out["passage"] = dict(r.passage)
    return out


def _as_http(value: Any) -> Any:
    """``value`` as ``POST /v1/query`` writes it: JSON, a value JSON does not know (bytes,
    an object) as its text, a NaN as null. A row the broker kept is answered, never the
    reason the whole call fails (the SDK could not serialise it)."""
    return json.loads(strict_json(value))


def scored_passage(row: RankedRow) -> dict[str, Any] | None:
    """The passage that scored a row past the model's window, when the row is handed
    over whole (a row handed over in part already is its passage); else None."""
    passage = row.passage
    return passage if passage is not None and "handle" not in passage else None


def search_text(out: dict[str, Any], scored: Sequence[Mapping[str, Any] | None] = ()) -> str:
    """The compact form an agent reads: one line a result, then errors, budget, paging.
    ``scored``: each result's :func:`scored_passage`, what its line shows of it."""
    results = out["results"]
    lines = [f"{len(results)} result(s) for {out['query']!r}"]
    if "profile" in out:
        lines[0] += f", ranked by profile {out['profile'] or '(none: the global knobs)'}"
    focus = list(scored) + [None] * (len(results) - len(scored))
    lines.extend(_result_line(r, f) for r, f in zip(results, focus, strict=True))
    abstain = out.get("abstain")
    if out.get("abstained") and abstain is not None:
        nearest = ", ".join(f"{n['source']}:{n['id']}" for n in abstain["nearest"][:5])
        lines.append(
            f"abstained: {abstain['reason']}; no result is likely to answer this query"
            + (f" (nearest, not shown: {nearest})" if nearest else "")
        )
    elif out.get("confidence") is not None:
        lines.append(
            f"confidence that a result is relevant: {out['confidence']:.2f}"
            + (
                " (the shipped fit's: a relative score here, not a probability)"
                if out.get("confidence_fit") == "shipped"
                else ""
            )
        )
    for e in out["sources_errored"]:
        lines.append(f"source {e['source_id']} failed ({e['error_type']}): {e['message']}")
    budget = out.get("budget")
    if budget is not None:
        lines.append(
            f"budget: {budget['tokens_used']} of {budget['max_tokens']} tokens "
            f"({'estimated' if budget.get('tokenizer', 'estimate') == 'estimate' else 'exact'}), "
            f"{budget['rows_left_out']} more result(s) left out"
            + (
                " (the first result alone is over the budget)"
                if budget["first_row_over_budget"]
                else ""
            )
            + too_large_note(budget)
        )
    cut = out.get("cut")
    if cut is not None:
        lines.append(f"cut: {cut['setting']} left out {cut['rows_left_out']} more result(s)")
    cap = out.get("per_source_cap")
    if cap is not None and cap["relaxed"]:
        lines.append(cap_relaxed(cap))
    page = out["page"]
    if page is not None:
        lines.append(
            f"page {page['number']}; "
            + (f"next_cursor: {page['next_cursor']}" if page["next_cursor"] else "last page")
        )
    return "\n".join(lines)


def _result_line(r: dict[str, Any], scored: Mapping[str, Any] | None = None) -> str:
    score = "" if r["score"] is None else f" score {r['score']:.4f}"
    copies = r["why"]["also_from"]
    also = "; also in: " + ", ".join(map(_copy_label, copies)) if copies else ""
    part = r.get("passage")
    marked = (
        f" (part: {part['field']} {part['start']}-{part['end']} of {part['length']} chars; "
        f"whole: {part['handle']})"
        if part is not None
        else ""
    )
    cite = f" (cite: {r['cite']})" if "cite" in r else ""
    # a row handed over in part is its passage: its line shows the whole part
    width = 200 + (part["end"] - part["start"] if part is not None else 0)
    line = _line(r["row"], scored, width)
    return f"{r['rank']}. [{r['source']}]{score}{also}{marked}{cite}: {line}"


def _copy_label(copy: dict[str, Any]) -> str:
    """One ``also_from`` entry as the tool's text names it: a revision with its time, so
    a model reading it knows the shown row replaced an older text (or, as of a past
    time, that a later one exists)."""
    tail = {
        "near": " (near)",
        "revision": f" (older revision, {copy.get('time')})",
        "later_revision": f" (later revision, {copy.get('time')})",
    }.get(copy["copy"], "")
    return f"{copy['source_id']}:{copy['id']}{tail}"


def row_text(row: RankedRow, request: QueryRequest, ranked: bool) -> str:
    """A row as the tool's text hands it to a model: its result line (what a token
    budget counts)."""
    result = _result(row, bool(request.explain), ranked, bool(request.vectors))
    return _result_line(result, scored_passage(row))


row_text.counted_as = "mcp_line"  # type: ignore[attr-defined]  # what its budget reports


#: Fields a row's line leaves out: its id (shown first) and the name of the model that
#: made its vector (a vector source's rows carry it; it says nothing about the row).
_NOT_TEXT = frozenset({"id", "embedding_model"})


def _line(row: dict[str, Any], scored: Mapping[str, Any] | None = None, width: int = 200) -> str:
    """A row in one line: its id, then its text fields (a model reads the whole line).
    A row past the model's window shows the passage that ``scored`` it in its field,
    ``…`` where cut, and its line is longer by the passage (a window of at most 128
    pieces): the words the agent reads are the part that answers, not the row's first.
    (A row handed over in part is its passage already; its caller widens its line.)"""
    ident = row.get("id")
    texts = [
        " ".join(_scored_part(v, scored if scored and scored["field"] == k else None).split())
        for k, v in row.items()
        if isinstance(v, str) and k not in _NOT_TEXT and v.strip() and v != ident
    ]
    line = (f"{ident} — " if ident is not None else "") + " | ".join(texts)
    width += scored["end"] - scored["start"] if scored else 0
    return textwrap.shorten(line, width=width, placeholder="…") if line else "(no text)"


def _scored_part(value: str, scored: Mapping[str, Any] | None) -> str:
    """``value``, or the part of it ``scored`` names, marked ``…`` where it was cut."""
    if scored is None:
        return value
    start, end = scored["start"], scored["end"]
    return ("…" if start > 0 else "") + value[start:end] + ("…" if end < len(value) else "")


def error_result(exc: ProblemError) -> types.CallToolResult:
    """A tool error: the problem's text for the model, its fields for a program."""
    body = {
        "status": exc.status,
        "type": exc.slug,
        "title": exc.title,
        "detail": exc.detail,
        **{
            k: v
            for k, v in exc.extra.items()
            if k in ("field", "value", "valid", "errors", "setting")
        },
    }
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=f"{exc.title}: {exc.detail}")],
        structured_content={"error": body},
        is_error=True,
    )
