"""Every setting, declared once: which are ranking knobs, and what each one is allowed to do.

A ranking knob is a setting that changes which rows an agent reads, or in what order.
For each one this says, in one place, what the rest of the package used to say in
copies that drifted apart:

- ``turns_ranking_on``: setting it ranks (``NautilusSettings.ranking_enabled``, the
  CLI's "ranking: off" line, ``eval``'s passthrough row, which unsets every knob);
- ``per_profile``: a ranking profile may set it (the embedder is per process: every
  profile scores with the process's one model);
- ``in_broker``: what it does inside the Nautilus broker (``upstream/``), or None
  where it does not apply there (docs/nautilus-broker.md's table is made from it);
- ``restricts``: it narrows what a caller is handed (fewer rows, a budget, an abstain),
  so a profile's value that does not parse is refused, never skipped: skipping it would
  give the profile's callers the wider global value.

Every field of ``NautilusSettings`` is a ranking knob, the embedder, or a process
setting (:data:`PROCESS_SETTINGS`); ``tests/settings/test_knobs.py`` fails on a field that is
none of them, so a new knob cannot be forgotten. A knob is "set" when its value
differs from its default (:func:`knob_is_set`).
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

KnobKind = Literal["ranking", "embedder"]


@dataclass(frozen=True)
class Knob:
    """One setting that changes what is ranked or how."""

    field: str  # the NautilusSettings field
    kind: KnobKind
    turns_ranking_on: bool
    per_profile: bool
    summary: str  # what it does, in a few words (docs tables)
    in_broker: str | None  # what it does inside the Nautilus broker; None: not applied
    flag: str | None = None  # the `nautilus-ranking query` flag
    request_field: str | None = None  # the field of a request (POST /v1/query, MCP)
    restricts: bool = False  # it narrows what a caller is handed (see the module docstring)

    @property
    def variable(self) -> str:
        return "NAUTILUS_" + self.field.upper()


KNOBS: tuple[Knob, ...] = (
    Knob(
        "ranking_top_k",
        "ranking",
        turns_ranking_on=True,
        per_profile=True,
        summary="keep the K best rows",
        in_broker="the rows kept",
        flag="--top-k",
        request_field="top_k",
        restricts=True,
    ),
    Knob(
        "ranking_idf",
        "ranking",
        turns_ranking_on=True,
        per_profile=True,
        summary="down-weight words common in the batch",
        in_broker="the batch-local IDF factor",
        flag="--idf",
        request_field="idf",
    ),
    Knob(
        "source_boosts",
        "ranking",
        turns_ranking_on=True,
        per_profile=True,
        summary="favour or demote sources by level",
        in_broker="boosts by the broker's source ids (checked when attaching and on a "
        "reload: warned and dropped, or refused in strict mode)",
        flag="--boost",
        request_field="boosts",
    ),
    Knob(
        "ranking_max_candidates",
        "ranking",
        turns_ranking_on=True,
        per_profile=True,
        summary="score at most N rows, chosen by the sources' ranks",
        in_broker="the candidate cap",
    ),
    Knob(
        "ranking_dedup_key",
        "ranking",
        turns_ranking_on=True,
        per_profile=True,
        summary="rows with one value of this field are copies",
        in_broker="copies by a field (a pgvector metadata field works)",
    ),
    Knob(
        "ranking_cut",
        "ranking",
        turns_ranking_on=True,
        per_profile=True,
        summary="stop the list where relevance falls away",
        in_broker="the relevance cut",
        flag="--cut",
        request_field="cut",
        restricts=True,
    ),
    Knob(
        "ranking_near_duplicates",
        "ranking",
        turns_ranking_on=True,
        per_profile=True,
        summary="collapse near copies into the best-ranked one",
        in_broker="near copies collapsed",
        flag="--near-duplicates",
        request_field="near_duplicates",
    ),
    Knob(
        "ranking_diversity",
        "ranking",
        turns_ranking_on=True,
        per_profile=True,
        summary="re-order for novelty (MMR)",
        in_broker="the MMR re-ordering",
        flag="--diversity",
        request_field="diversity",
    ),
    Knob(
        "ranking_max_per_source",
        "ranking",
        turns_ranking_on=True,
        per_profile=True,
        summary="at most N rows of one source a page",
        in_broker="the per-source cap of the top K",
        flag="--max-per-source",
        request_field="max_per_source",
        restricts=True,
    ),
    Knob(
        "ranking_canonical_sources",
        "ranking",
        # Which copy of a document is shown once copies collapse; it changes nothing
        # until something ranks, so naming sources alone does not turn ranking on.
        turns_ranking_on=False,
        per_profile=True,
        summary="the sources whose copy of a document is kept, in order",
        in_broker="the copy kept of a document",
        flag="--canonical-source",
        request_field="canonical_sources",
    ),
    Knob(
        "ranking_max_tokens",
        "ranking",
        # A budget keeps what fits of whichever list is handed over, ranked or passed
        # through; it needs no relevance, so it does not turn ranking on by itself.
        turns_ranking_on=False,
        per_profile=True,
        summary="hand over only the best rows that fit in N tokens",
        in_broker="in merge: the lowest-ranked rows leave first, across sources, each row "
        "counted as its compact JSON (so the attestation covers the budgeted rows)",
        flag="--max-tokens",
        request_field="max_tokens",
        restricts=True,
    ),
    Knob(
        "ranking_budget_passages",
        "ranking",
        # It changes what a budget hands over of a row too large for it; no budget, no
        # change: it does not turn ranking on.
        turns_ranking_on=False,
        per_profile=True,
        summary="under a budget, hand a row too large for it over as its best passage, "
        "marked (false: whole or not at all)",
        in_broker=None,
    ),
    Knob(
        "ranking_min_confidence",
        "ranking",
        # An abstain needs the ranking's confidence: setting it ranks.
        turns_ranking_on=True,
        per_profile=True,
        summary="abstain (hand over no rows) below this confidence that one is relevant",
        in_broker="in merge: below it, data is empty (the attestation signs the abstained "
        "answer); the ranked route and tool say why and list the nearest rows",
        flag="--min-confidence",
        request_field="min_confidence",
        restricts=True,
    ),
    Knob(
        "ranking_recency",
        "ranking",
        turns_ranking_on=True,
        per_profile=True,
        summary="lower older rows among rows of similar relevance: half_life:D or window:D, "
        "per source where sources differ",
        in_broker="the decay by age, of the rows whose time NAUTILUS_RANKING_TIME_FIELDS maps",
        flag="--recency",
        request_field="recency",
    ),
    Knob(
        "ranking_supersede",
        "ranking",
        turns_ranking_on=True,
        per_profile=True,
        summary="keep only the newest revision of a document (one source's rows by id, or "
        "by document key; across sources only as NAUTILUS_RANKING_MAY_REVISE allows); the "
        "older ones in its also_from",
        in_broker="revisions superseded: within an adapter, or across adapters as "
        "NAUTILUS_RANKING_MAY_REVISE allows",
    ),
    Knob(
        "ranking_time_fields",
        "ranking",
        # Where a row's time is; it changes nothing until recency or supersession is set.
        # Per process: it describes the sources, which every profile shares.
        turns_ranking_on=False,
        per_profile=False,
        summary="by source, the row key or path of a row's time (SOURCE:PATH, comma-separated)",
        in_broker="where each adapter's rows hold their time (the broker's nautilus.yaml "
        "has no place for it)",
    ),
    Knob(
        "ranking_document_keys",
        "ranking",
        # Which rows are revisions of one document; nothing until supersession is set.
        turns_ranking_on=False,
        per_profile=False,
        summary="by source, the row key or path naming a row's document, for supersession "
        "(SOURCE:PATH)",
        in_broker="which adapter rows are revisions of one document",
    ),
    Knob(
        "ranking_may_revise",
        "ranking",
        # Which sources may supersede which others' rows; nothing until supersession is set.
        # Per process: it describes the sources, which every profile shares.
        turns_ranking_on=False,
        per_profile=False,
        summary="which sources' newer revisions may supersede another source's "
        "(REVISER:REVISED, comma-separated; both map a document key); unset: a source "
        "revises only its own rows",
        in_broker="which adapters' revisions may supersede which others'",
    ),
    Knob(
        "ranking_lexical",
        "ranking",
        # Which lexical score content uses; it changes nothing until something ranks.
        turns_ranking_on=False,
        per_profile=True,
        summary="the lexical content score: bm25 (default) or cosine",
        in_broker="the lexical content score",
    ),
    Knob(
        "ranking_curated_keywords",
        "ranking",
        # Which query words rank; it changes nothing until something ranks. Per process:
        # the routing vocabulary is built once for the broker (and on each reload).
        turns_ranking_on=False,
        per_profile=False,
        summary="inside the Nautilus broker only: whether analysis.keyword_map's curated "
        "keywords are content (content) or routing words (routing, the default)",
        in_broker="routing words leave the ranked query: a leading `type:`, the sources' "
        "data_types and their normalised forms, and (routing, the default) "
        "analysis.keyword_map's keywords; `content` ranks by the curated keywords",
    ),
    Knob(
        "embedder",
        "embedder",
        turns_ranking_on=False,
        per_profile=False,
        summary="the model content is scored with (one per process)",
        in_broker="the embedder content is scored with",
    ),
    Knob(
        "embedder_cache_size",
        "embedder",
        turns_ranking_on=False,
        per_profile=False,
        summary="the embedder's cache of row vectors",
        in_broker="the embedder's cache",
    ),
    Knob(
        "embedder_disk_cache_mb",
        "embedder",
        turns_ranking_on=False,
        per_profile=False,
        summary="the model's text vectors kept on disk, in MB (0: off)",
        in_broker="the model's vectors on disk, shared with other processes",
    ),
    Knob(
        "embedder_deadline_ms",
        "embedder",
        turns_ranking_on=False,
        per_profile=False,
        summary="the time a request may spend embedding rows; later rows by words (0: none)",
        in_broker="the time a request may spend embedding rows",
    ),
    Knob(
        "embedder_max_rows",
        "embedder",
        turns_ranking_on=False,
        per_profile=False,
        summary="the model embeds a batch's best rows by words, this many; the rest by words "
        "(0: every row)",
        in_broker="the rows of a batch the model embeds",
    ),
)

#: Settings of the process, not of a ranking: where the sources are, logging, serving.
PROCESS_SETTINGS: frozenset[str] = frozenset(
    {
        "config_strict",
        "config",
        "data_dir",
        "cursor_key",
        "cursor_previous_keys",
        "log_level",
        "log_format",
        "serve_host",
        "serve_port",
        "serve_workers",
        "serve_allow_overrides",
        "serve_max_query_chars",
        "serve_max_body_bytes",
        "serve_max_concurrency",
        "serve_max_ranked_rows",
        "serve_request_timeout_s",
        "serve_body_timeout_s",
        "serve_probe_interval_s",
        "serve_api_keys_file",
        "trace_query_text",
        "trace_propagate",
        "trace_baggage",
        "serve_cors_origins",
        "profiles_file",
        "upstream_rankings_max_bytes",
        "upstream_vector_dim",
        "upstream_attestation_in_meta",
        "upstream_request_tools",
    }
)

BY_FIELD: Mapping[str, Knob] = {k.field: k for k in KNOBS}
#: The ranking knobs (the embedder aside), in declaration order.
RANKING_KNOBS: tuple[Knob, ...] = tuple(k for k in KNOBS if k.kind == "ranking")
#: The knobs whose being set turns ranking on.
RANKING_SWITCHES: tuple[Knob, ...] = tuple(k for k in KNOBS if k.turns_ranking_on)
#: The knobs a ranking profile may set.
PER_PROFILE: tuple[Knob, ...] = tuple(k for k in KNOBS if k.per_profile)
#: The fields a request may override the settings with (a profile may narrow them).
OVERRIDES = (
    "top_k",
    "boosts",
    "idf",
    "sources",
    "max_tokens",
    "cut",
    "near_duplicates",
    "diversity",
    "max_per_source",
    "canonical_sources",
    "min_confidence",
    "recency",
    # the time ages count from and the revision in force at: a ranking input as recency is
    "as_of",
)


def knob_is_set(value: Any, default: Any) -> bool:
    """Whether a knob's ``value`` is a setting rather than its default (unset)."""
    return bool(value != default)


def ranking_on(values: Mapping[str, Any], defaults: Mapping[str, Any]) -> bool:
    """Whether settings with these field values rank (any switch set): the one rule."""
    # a switch turned off (IDF false) is a setting, but not one that asks for ranking
    return any(
        knob_is_set(values.get(k.field), defaults.get(k.field)) and values.get(k.field) is not False
        for k in RANKING_SWITCHES
    )


def switches_sentence(knobs: Iterable[Knob] = RANKING_SWITCHES) -> str:
    """ "set A, B or C (or --a, --b) to rank": what the CLI says when ranking is off."""
    chosen = list(knobs)
    names = [k.variable for k in chosen]
    flags = [k.flag for k in chosen if k.flag]
    listed = ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0]
    return f"set {listed} (or {', '.join(flags)}) to rank"


def markdown_table(columns: Literal["settings", "broker", "switches"]) -> str:
    """The docs' knob tables, made from the declaration (a test keeps the docs equal);
    ``switches``: the sentence that names the knobs turning ranking on."""
    if columns == "switches":
        names = [f"`{k.variable}`" for k in RANKING_SWITCHES]
        listed = ", ".join(names[:-1]) + " and " + names[-1]
        return textwrap.fill(
            f"Setting any one of these turns ranking on: {listed} (the table below marks them).",
            88,
            break_on_hyphens=False,
            break_long_words=False,
        )
    if columns == "broker":
        rows = ["| variable | inside the Nautilus broker |", "|---|---|"]
        rows += [
            f"| `{k.variable}` | {k.in_broker if k.in_broker is not None else 'not applied'} |"
            for k in KNOBS
        ]
        return "\n".join(rows)
    rows = [
        "| variable | what it does | turns ranking on | per profile | flag / request field |",
        "|---|---|---|---|---|",
    ]
    for k in KNOBS:
        where = " / ".join(f"`{x}`" for x in (k.flag, k.request_field) if x) or "—"
        rows.append(
            f"| `{k.variable}` | {k.summary} | {'yes' if k.turns_ranking_on else 'no'} "
            f"| {'yes' if k.per_profile else 'no'} | {where} |"
        )
    return "\n".join(rows)
