"""How ``nautilus-ranking query`` and ``nautilus-ranking demo`` show rows to a person: one line a
row."""

from __future__ import annotations

import shlex
import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from nautilus_ranking.embedders.default import embedder_line
from nautilus_ranking.records import SCORE_COMPONENTS, BrokerResponse, RankedRow
from nautilus_ranking.selection.budget_pages import too_large_note
from nautilus_ranking.settings.knobs import switches_sentence

if TYPE_CHECKING:
    from nautilus_ranking.request.answer import Answer

#: Characters a terminal acts on instead of showing: the C0 controls (ESC starts the
#: sequences that clear a screen, set a window title or move the cursor back over a line),
#: DEL, the C1 controls (CSI and OSC in one byte), and the bidirectional controls that
#: make a line read otherwise than it is. Engine content and error messages are someone
#: else's text: :func:`printable` shows each of these as a visible ``\xNN`` or ``\uNNNN``.
_CONTROLS = (
    *range(0x20),
    *range(0x7F, 0xA0),
    0x061C,
    0x200E,
    0x200F,
    *range(0x202A, 0x202F),
    *range(0x2066, 0x206A),
)
_ESCAPED = {c: (f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}") for c in _CONTROLS}
_ESCAPED_LINES = {c: e for c, e in _ESCAPED.items() if c != 0x0A}


def printable(text: str, lines: bool = False) -> str:
    """``text`` with every control character shown as an escape, so that printing it
    cannot drive the terminal; ``lines`` keeps newlines (text whose lines are ours)."""
    return text.translate(_ESCAPED_LINES if lines else _ESCAPED)


#: What ``query`` says when no ranking knob is set (the rows are the sources' own order).
RANKING_OFF = (
    "ranking: off — exact passthrough: rows in source order, no scores to explain; "
    + switches_sentence()
)
_SUMMARY_FIELDS = (
    "title",
    "name",
    "subject",
    "question",
    "summary",
    "description",
    "text",
    "body",
    "answer",
    "content",
)


def summarize(row: dict[str, Any], width: int = 72) -> str:
    """One line that tells a person what a row is."""
    ident = row.get("id")
    text = next((str(row[f]) for f in _SUMMARY_FIELDS if isinstance(row.get(f), str)), None)
    if text is None:
        text = " ".join(str(v) for k, v in row.items() if isinstance(v, str) and k != "id")
    if isinstance(row.get("edge"), str):
        text = f"{text} [{row['edge']}]"
    line = f"{ident}  {text}" if ident is not None and str(ident) not in text else text
    line = " ".join(line.split())
    return textwrap.shorten(line, width=width, placeholder="…") if line else "(no text)"


#: The components ``--explain`` shows by default, so a row fits in :data:`WIDTH` columns;
#: ``--wide`` shows every one (the JSON always carries every one).
COMPACT = (
    "similarity",
    "idf_factor",
    "content",
    "evidence",
    "voters",
    "relevance",
    "boost_bump",
    "unboosted_rank",
)
#: The width ``query``'s tables fit in unless ``--wide`` is asked for.
WIDTH = 120
#: What "clearly better" means for a boost, in the columns ``--explain`` shows.
CLEARLY_BETTER = (
    "a row passes another only when the other's relev. leads its own by less than their "
    "bumps differ (a bump is at most a share of the batch's relevance spread); a row that "
    "leads by more is clearly better and stays ahead. relev. counts the sources' votes "
    "(a rank 1 is worth a whole vote) beside content, so it can lead with a lower sim."
)


#: The note under a table whose rows absorbed copies (without ``--explain``).
COPIES = (
    "(+N copies): copies of the row from other sources, or near copies, collapsed into "
    "it; --explain names them"
)


#: Row fields that carry a source's own score of the row, which ``--explain`` shows.
ENGINE_FIELDS = ("engine_score", "distance", "bm25", "similarity")
ENGINE_LEGEND = (
    "the source's own score of the row, as it gave it (an engine's engine_score, a "
    "distance, a bm25), to 4 digits; the JSON carries it exactly"
)


def engine_score(row: dict[str, Any]) -> str:
    """The first of a row's :data:`ENGINE_FIELDS` that is a number (or an integer's
    digits, as an engine score past 2**53 is carried), to 4 digits; ``-`` for none."""
    for name in ENGINE_FIELDS:
        value = row.get(name)
        if isinstance(value, str) and value.lstrip("-").isascii() and value.lstrip("-").isdigit():
            value = float(value)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return f"{value:.4g}"
    return "-"


#: The widest the source column grows to fit an id (a sources file allows 100
#: characters); a longer id is cut to it, ending in '…'. ``--wide`` shows every id whole.
SOURCE_WIDTH = 32


def elided(text: str, width: int) -> str:
    """``text`` whole when it fits in ``width``, else cut to it with a visible '…'."""
    return text if len(text) <= width else text[: width - 1] + "…"


def ranked_table(
    ranking: list[RankedRow], explain: bool, ranked: bool = True, wide: bool = False
) -> str:
    """The ranking as ``query`` prints it: one line a row; ``explain`` adds the score's
    components, one column each (declared with :class:`RankedRow`), and a legend. The
    lines fit in :data:`WIDTH` columns, with the main components; ``wide`` shows every
    component and lets lines run as long as they need."""
    shown = [
        (name, meta) for name, meta in SCORE_COMPONENTS if wide or not explain or name in COMPACT
    ]
    width = max([12, *(len(r.source_id) for r in ranking)])
    width = width if wide else min(width, SOURCE_WIDTH)
    head = f"{'rank':>4}  {'source':<{width}} {'score':>7}  "
    timed = explain and any(r.time is not None for r in ranking)  # recency or supersession
    if explain:
        head += "".join(f"{meta['column']:>{meta['width']}} " for _, meta in shown)
        head += f"{'age(d)':>8} {'recency':>8} " if timed else ""
        head += f"{'engine':>8}  "
    lines = [head + "row"]
    for r in ranking:
        score = f"{r.score:>7.4f}" if ranked else f"{'-':>7}"  # passthrough: no score
        line = f"{r.rank:>4}  {elided(r.source_id, width):<{width}} {score}  "
        if explain:
            line += (
                "".join(
                    f"{getattr(r, name):>{meta['width']}{meta['fmt']}} " for name, meta in shown
                )
                + (time_columns(r.time) if timed else "")
                + f"{engine_score(r.row):>8}  "
            )
        also = (
            (
                ("  (also in: " + ", ".join(c.label() for c in r.also_from) + ")")
                if explain
                else f"  (+{len(r.also_from)} cop{'y' if len(r.also_from) == 1 else 'ies'})"
            )
            if r.also_from
            else ""
        )
        room = 60 if wide else max(WIDTH - len(line) - len(also), 20)
        line += summarize(r.row, room if explain else 72) + also
        lines.append(printable(line))
        if r.passage is not None and (explain or "handle" in r.passage):
            lines.append(printable(passage_line(r.passage)))
    if len(lines) == 1:
        lines.append("  (no rows)")
    if not explain and any(r.also_from for r in ranking):
        lines.append(COPIES)
    if explain:
        lines.append("")
        legend = [(meta["column"], f"{name}: {meta['doc']}") for name, meta in shown]
        if not wide:
            hidden = [meta["column"] for name, meta in SCORE_COMPONENTS if name not in COMPACT]
            legend.append(("--wide", "every component: " + ", ".join(hidden)))
        if timed:
            legend.append(("age(d)", AGE_LEGEND))
            legend.append(("recency", RECENCY_LEGEND))
        legend.append(("engine", ENGINE_LEGEND))
        legend.append(("boosts", CLEARLY_BETTER))
        for column, text in legend:
            entry = f"  {column:<8} {text}"
            lines.extend(
                [entry]
                if wide
                else textwrap.wrap(entry, WIDTH, subsequent_indent=" " * 11, break_on_hyphens=False)
            )
    return "\n".join(lines)


AGE_LEGEND = "the row's age in days from the reference time (the time line below); - : no time read"
RECENCY_LEGEND = (
    "what recency added to the score (score = relev. + bump + recency): at most a share of "
    "the batch's relevance spread, so it passes rows of similar relevance, never a clearly "
    "better one"
)


def passage_line(passage: dict[str, Any]) -> str:
    """Which part of a long row scored (``--explain``) or was handed over under a budget
    (with the handle that asks for the whole row)."""
    part = (
        f"      passage: {passage['field']}[{passage['start']}:{passage['end']}] "
        f"of {passage['length']} characters"
    )
    handle = passage.get("handle")
    return part + (f"; the whole row: --whole {handle}" if handle else "")


def time_columns(time: dict[str, Any] | None) -> str:
    """A row's age and recency as ``--explain`` shows them."""
    age = time.get("age_days") if time is not None else None
    recency = time.get("recency", 0.0) if time is not None else 0.0
    shown = f"{age:>8.1f}" if age is not None else f"{'-':>8}"
    return f"{shown} {recency:>8.5f} "


def time_line(time: dict[str, Any]) -> str:
    """What time did in a ranking, for a person."""
    origin = {"as_of": "as_of", "newest_row": "the newest row's time", "none": "no row's time"}
    reference = time.get("reference") or "none"
    parts = [f"time: ages from {reference} ({origin.get(time.get('from', ''), '?')})"]
    if time.get("recency"):
        parts.append(f"recency {time['recency']}")
    parts.append(f"{time.get('dated', 0)} row(s) dated, {time.get('undated', 0)} not")
    if time.get("ahead"):
        parts.append(f"{time['ahead']} ahead of the reference (aged 0)")
    if time.get("superseded"):
        parts.append(f"{time['superseded']} older revision(s) superseded")
    return "; ".join(parts)


def counted(budget: dict[str, Any]) -> str:
    """How a budget's tokens were counted, for a reader: exact, or an over-estimate."""
    tokenizer = budget.get("tokenizer")
    return "estimated" if tokenizer in (None, "estimate") else f"exact, {tokenizer}"


def next_command(argv: Sequence[str], cursor: str) -> str:
    """The command that shows the next page: ``argv`` (a ``query`` command's arguments)
    with any ``--page``/``--cursor`` replaced by ``--cursor CURSOR``, quoted for a shell."""
    kept: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in ("--page", "--cursor"):
            skip = True
        elif not arg.startswith(("--page=", "--cursor=")):
            kept.append(arg)
    return shlex.join(["nautilus-ranking", *kept, "--cursor", cursor])


def answer_text(result: Answer, argv: Sequence[str] | None = None, wide: bool = False) -> str:
    """A request's answer as ``nautilus-ranking query`` prints it to a person; ``argv``
    (the command's arguments) makes the next page's hint a command that runs as shown;
    ``wide``: every score component under ``explain``, lines as long as they need."""
    response, ranked = result.response, result.ranked
    applied = result.plan.effective.source_boosts if ranked else {}
    lines = [
        printable(f"query: {result.request.query}"),
        f"synthesizer: {result.synthesizer}"
        + (f"  (boosts: {', '.join(f'{k}:{v}' for k, v in applied.items())})" if applied else ""),
    ]
    if result.profiled:
        lines.append(f"profile: {result.profile or '(none: the global knobs)'}")
    said = embedder_line(result.plan.effective.embedder) if ranked else None
    if said is not None:
        lines.append(said)
    if not ranked:
        lines.append(RANKING_OFF)
    explain = bool(result.request.explain) and ranked
    lines.append(ranked_table(response.ranking, explain, ranked, wide))
    lines.extend(
        printable(f"error: {error.source_id}: {error.error_type}: {error.message}")
        for error in response.sources_errored
    )
    lines.append(f"response_hash: {response.response_hash}  ({response.duration_ms} ms)")
    budget = response.budget
    if budget is not None:
        lines.append(
            f"budget: {budget['tokens_used']} of {budget['max_tokens']} tokens "
            f"({counted(budget)}), {budget['rows_left_out']} ranked row(s) left out"
            + ("; the first row alone is over it" if budget["first_row_over_budget"] else "")
            + too_large_note(budget)
        )
    cap = result.per_source_cap
    if cap is not None and cap["relaxed"]:
        from nautilus_ranking.request.answer import cap_relaxed  # loaded: result is one

        lines.append(cap_relaxed(cap))
    if response.cut is not None:
        lines.append(
            f"cut: {response.cut['setting']} left out {response.cut['rows_left_out']} "
            "ranked row(s) (off is the recommendation: docs/configuration.md)"
        )
    embedding = response.embedding
    if embedding is not None:
        lines.append(
            f"embedding: past its {embedding['deadline_ms']} ms deadline, "
            f"{embedding['rows_lexical']} row(s) scored by words "
            f"({embedding['rows_embedded']} by the model; NAUTILUS_EMBEDDER_DEADLINE_MS)"
        )
    if response.time is not None:
        lines.append(time_line(response.time))
    lines.extend(confidence_lines(response, explain, wide))
    cursor = result.next_cursor
    follow = (
        (f"next: {next_command(argv, cursor)}" if argv is not None else f"next: --cursor {cursor}")
        if cursor
        else None
    )
    page = result.page
    if page is not None:
        lines.append(
            f"page {page['number']} ({page['size']} rows a page); " + (follow or "no next page")
        )
    elif follow:  # a top K with more rows past it
        lines.append(f"more rows past these {len(response.ranking)}; {follow}")
    return printable("\n".join(lines), lines=True)


def confidence_lines(response: BrokerResponse, explain: bool, wide: bool) -> list[str]:
    """With ``explain`` or a minimum confidence: the ranking's confidence and, when the
    answer abstained, why, and (``explain``) the rows it held back as a table. (The
    JSON answer carries the confidence always.)"""
    lines: list[str] = []
    found = response.confidence
    if found is not None and (explain or response.abstain is not None):
        value = found["value"]
        lines.append(
            f"confidence: {value:.3f} that one of the top 10 is relevant ({found['setup']})"
            if value is not None
            else f"confidence: none (no fit for {found['setup']})"
        )
        if explain:
            signals = ", ".join(f"{k} {v:.3g}" for k, v in found["signals"].items())
            lines.extend(
                textwrap.wrap(
                    f"confidence signals: {signals}",
                    120 if not wide else 10_000,
                    subsequent_indent="  ",
                )
            )
    abstain = response.abstain
    if abstain is not None and abstain["abstained"]:
        lines.append(
            f"abstained: {abstain['reason']}; {len(response.nearest)} nearest row(s) held back"
            + ("" if explain else " (--explain lists them)")
        )
        if explain:
            lines.append(ranked_table(response.nearest, True, True, wide))
    elif abstain is not None and "reason" in abstain:
        lines.append(f"abstain: {abstain['reason']}")
    return lines
