"""What each stage tells the ranking span, and what a source call tells its span.

Called only when someone records (:func:`~nautilus_ranking.tracing.spans.stages` or a
:class:`~nautilus_ranking.tracing.spans.SourceSpan` is not None), so the facts below
are counted only then: the ranking's hot path pays one ``ContextVar.get`` per stage.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from nautilus_ranking.tracing.spans import SourceSpan, Stages, source_span

#: A source call's answer (the broker's tuple: its result first, its warnings third).
A = TypeVar("A", bound=Sequence[Any])

if TYPE_CHECKING:
    from nautilus_ranking.records import RankedRow
    from nautilus_ranking.selection.budget import BudgetResult


async def in_source_span(kind: str, source_id: str, timeout_s: float, call: Awaitable[A]) -> A:
    """``call`` (one source's call in the broker) inside that source's span (``kind``:
    the source's type)."""
    span = source_span(kind, source_id, timeout_s)
    answer: A | None = None
    try:
        answer = await call
        return answer
    finally:
        if span is not None:
            source_done(span, answer)


def source_done(span: SourceSpan, answer: Sequence[Any] | None) -> None:
    """End a source's span with its row count and, when it failed, its error type
    (``timeout``, ``build_timeout``, an exception's class…) as the span's status. No
    answer: the call itself was cancelled (the request's deadline)."""
    if answer is None:
        span.done(0, "cancelled")
        return
    result, warned = answer[0], answer[2]
    error = result.error
    dropped = sum(w.count for w in warned if w.warning_type == "rows_dropped")
    span.done(len(result.rows), error.error_type if error is not None else None, dropped)


def confidence_stage(
    stages: Stages, rows: int, value: float | None, abstain: Mapping[str, Any] | None
) -> None:
    """The ranking's confidence (absent: no fit for its setup) and, under a minimum
    confidence, whether the answer abstained (its ``rows`` then all held back)."""
    abstained = bool(abstain["abstained"]) if abstain is not None else None
    stages.add(
        "confidence",
        rows,
        0 if abstained else rows,
        value=value,
        min_confidence=abstain["min_confidence"] if abstain is not None else None,
        abstained=abstained,
    )


def budget_stage(stages: Stages, fitted: BudgetResult, kept: Sequence[RankedRow] = ()) -> None:
    stages.add(
        "budget",
        len(fitted.kept) + fitted.left_out,
        len(fitted.kept),
        max_tokens=fitted.max_tokens,
        tokens_used=fitted.tokens_used,
        rows_left_out=fitted.left_out,
        first_row_over_budget=fitted.over_budget_first,
        tokenizer=fitted.tokenizer,
        rows_in_part=rows_in_part(kept) or None,
    )


def rows_in_part(kept: Sequence[RankedRow]) -> int:
    """The rows a budget handed over as a passage (their entry carries its handle)."""
    return sum(r.passage is not None and "handle" in r.passage for r in kept)


def fusion_stage(
    stages: Stages,
    rows: int,
    source_ids: Sequence[str],
    boosts: Mapping[str, str],
    rows_boosted: int,
) -> None:
    """Fusion scores every candidate; the boosted sources are those with a level (the
    operator's source ids, never a caller's text: a request's boosts name sources too)."""
    boosted = sorted(
        {
            f"{sid}:{boosts[sid.lower()]}"
            for sid in source_ids
            if isinstance(sid, str) and sid.lower() in boosts
        }
    )
    stages.add(
        "fusion", rows, rows, boosted_sources=boosted or None, rows_boosted=rows_boosted or None
    )


def passages_stage(stages: Stages, rows: int, long_rows: int, by_words: int, by_model: int) -> None:
    """The rows past the model's window read as passages: how many (``long_rows``), the
    passages scored by words (every window of them) and by the model (the best by
    words of the rows it embeds, within the deadline). Every row goes on."""
    stages.add("passages", rows, rows, long_rows=long_rows, by_words=by_words, by_model=by_model)


def copies_stage(stages: Stages, name: str, rows_in: int, rows_out: int) -> None:
    stages.add(name, rows_in, rows_out, collapsed=rows_in - rows_out)


def cut_stage(stages: Stages, rows_out: int, cut: Mapping[str, Any]) -> None:
    """The relevance cut kept ``rows_out`` rows of the top K (it left ``rows_left_out``)."""
    left_out = int(cut.get("rows_left_out", 0))
    setting = str(cut.get("setting"))
    stages.add("cut", rows_out + left_out, rows_out, setting=setting, rows_left_out=left_out)
