"""How ``nautilus query`` and ``nautilus demo`` show rows to a person: one line a row."""

from __future__ import annotations

import textwrap
from typing import Any

from nautilus.records import RankedRow

#: What ``query`` says when no ranking knob is set (the rows are the sources' own order).
RANKING_OFF = ("ranking: off — exact passthrough: rows in source order, no scores to explain; "
               "set NAUTILUS_RANKING_TOP_K, NAUTILUS_RANKING_IDF, NAUTILUS_SOURCE_BOOSTS, "
               "NAUTILUS_RANKING_MAX_CANDIDATES or NAUTILUS_RANKING_DEDUP_KEY "
               "(or --top-k, --idf, --boost) to rank")
_SUMMARY_FIELDS = ("title", "name", "subject", "question", "summary", "description", "text",
                   "body", "answer", "content")


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


def ranked_table(ranking: list[RankedRow], explain: bool, ranked: bool = True) -> str:
    """The ranking as ``query`` prints it: one line a row; ``explain`` adds the score's parts."""
    head = f"{'rank':>4}  {'source':<12} {'score':>7}  "
    if explain:
        head += f"{'sim':>6} {'idf':>5} {'c.rank':>6} {'content':>7} {'c.w':>4} {'evid.':>7} " \
                f"{'w':>4} {'unrank.':>7} {'bump':>6} {'stage1':>7} {'unb.':>4}  "
    lines = [head + "row"]
    for r in ranking:
        score = f"{r.score:>7.4f}" if ranked else f"{'-':>7}"  # passthrough: no score
        line = f"{r.rank:>4}  {r.source_id[:12]:<12} {score}  "
        if explain:
            line += (f"{r.similarity:>6.3f} {r.idf_factor:>5.2f} {r.content_rank:>6} "
                     f"{r.content:>7.5f} {r.content_weight:>4.2f} {r.evidence:>7.5f} "
                     f"{r.source_weight:>4.2f} {r.unranked_vote:>7.5f} "
                     f"{r.boost_bump:>6.4f} {r.stage1_key:>7.5f} "
                     f"{r.unboosted_rank or '-':>4}  ")
        line += summarize(r.row, 60 if explain else 72)
        if explain and r.also_from:
            line += "  (also " + ", ".join(f"{s}#{n}" for s, n in r.also_from) + ")"
        lines.append(line)
    if len(lines) == 1:
        lines.append("  (no rows)")
    return "\n".join(lines)
