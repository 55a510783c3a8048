"""Every ranking knob, declared once: its field, parser, default and what it may do.

A ranking knob is a setting that changes which rows an agent reads, or in what order.
Each is one field of :class:`RankingKnobs` (which ``NautilusSettings`` extends) with
its :class:`~nautilus_ranking.settings.declaration.Knob` in the field's metadata: the
field holds its name, type and default; the Knob its parser, its doc line, whether a
request (``override``) or a profile (``per_profile``) may set it, whether it enters a
cursor's key (``in_key``) and ``explain`` (``in_explain``), and the ranker argument
it sets. Everything else derives from these declarations:

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

One module past 400 lines because it is the declarations: a knob is its field and its
Knob side by side, and keeping every one here is what "declared once" means; the
declaration's types live in ``settings/declaration.py``, the parsers in
``settings/parsing.py``.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, PlainSerializer
from pydantic_settings import NoDecode

from nautilus_ranking.embedders.default import AUTO, installed_embedder
from nautilus_ranking.errors import Problem
from nautilus_ranking.settings.boost_entries import collect_source_boosts
from nautilus_ranking.settings.declaration import (
    MAX_SOURCE_ITEMS,
    Arg,
    Knob,
    Level,
    Override,
    Parser,
    RequestCount,
    RequestFraction,
    Setting,
    SourceId,
)
from nautilus_ranking.settings.parsing import (
    CURATED_KEYWORDS,
    LEXICAL_SCORERS,
    parse_bool,
    parse_choice,
    parse_diversity,
    parse_field_name,
    parse_fit_file,
    parse_idf,
    parse_int,
    parse_min_confidence,
    parse_near_duplicates,
    parse_ranking_cut,
    parse_source_ids,
)
from nautilus_ranking.settings.time_entries import (
    Recency,
    parse_may_revise,
    parse_recency_value,
    parse_source_paths,
)

#: ``auto`` (the default): the model where the ``embed`` extra is installed, else hashing
#: (nautilus_ranking/embedders/default.py).
VALID_EMBEDDERS: tuple[str, ...] = ("auto", "hashing", "onnx", "onnx-float32", "noop")
#: The longest ``cut`` a request may carry (``relative:0.8`` is 12 characters).
MAX_CUT_CHARS = 64
#: The longest ``recency`` a request may carry (a decay for each of a few dozen sources).
MAX_RECENCY_CHARS = 2048


# --- parsers, as a declaration takes them: (variable, raw, default) ------------------


def counted(minimum: int = 1, valid: str = "an integer >= 1, or unset") -> Parser:
    """An integer from ``minimum``; a bad one is the field's default."""
    return lambda var, raw, default: parse_int(
        var, raw, minimum=minimum, default=default, valid=valid
    )


def unset_or(parse: Any) -> Parser:
    """A parser of ``(variable, raw)`` whose unset value is its own (None, empty)."""
    return lambda var, raw, default: parse(var, raw)


def one_of(choices: tuple[str, ...]) -> Parser:
    """One of ``choices``; a bad one is the field's default."""
    return lambda var, raw, default: parse_choice(var, raw, choices, default)


def boolean(var: str, raw: object, default: Any) -> tuple[bool, Problem | None]:
    return parse_bool(var, raw, default)


def boost_entries(var: str, raw: object, default: Any) -> tuple[dict[str, str], list[Problem]]:
    """``graph:high,sql:low`` (or a mapping): every good entry, each bad one a problem."""
    if raw is not None and not isinstance(raw, str | Mapping):
        raw = str(raw)
    return collect_source_boosts(raw)


def embedder_name(var: str, raw: object, default: Any) -> tuple[str, Problem | None]:
    """A known embedder whose extra is installed; else the default, and why."""
    name, problem = parse_choice(var, raw, VALID_EMBEDDERS, default)
    if problem is not None:
        return name, problem
    return installed_embedder(var, name, default)


def _pairs(mapping: Mapping[str, Any]) -> list[tuple[str, Any]]:
    return sorted(mapping.items())


def _revisions(may_revise: Mapping[str, Sequence[str]]) -> list[str]:
    return [f"{k}:{v}" for k, vs in may_revise.items() for v in vs]


def _recency_text(recency: Recency | None) -> str | None:
    return str(recency) if recency is not None else None


def _local_fits(settings: Any) -> Any:
    """The fits a configured fit file holds (None: the shipped ones), read when a ranker
    is made (the start has checked the file)."""
    from nautilus_ranking.selection.local_fit import local_fits  # reads numpy's module

    return local_fits(settings.ranking_confidence_fit)


def ranks_by_time(settings: Any) -> bool:
    """Whether time ranks under ``settings`` (a knob declared ``by_time`` is set): then
    where rows keep their time, and ``as_of``, shape the ranking."""
    return any(knob_is_set(k.value(settings), _default(k)) for k in KNOBS if k.by_time)


def _supersedes(settings: Any) -> bool:
    return bool(settings.ranking_supersede)


class RankingKnobs(BaseModel):
    """The ranking knobs and the embedder, each declared once (see the module docstring)."""

    ranking_top_k: Annotated[
        int | None,
        Knob(
            counted(),
            summary="keep the K best rows",
            in_broker="the rows kept",
            turns_ranking_on=True,
            restricts=True,
            override=Override(
                RequestCount,
                Arg("--top-k", "an integer >= 1", "K"),
                "keep the K best rows (the page size when paging); replaces NAUTILUS_RANKING_TOP_K",
            ),
            in_key="always",
            in_explain=True,
            ranker="top_k",
        ),
    ] = None
    source_boosts: Annotated[
        dict[str, str],
        NoDecode,
        Knob(
            boost_entries,
            summary="favour or demote sources by level",
            in_broker="boosts by the broker's source ids (checked when attaching and on a "
            "reload: warned and dropped, or refused in strict mode)",
            turns_ranking_on=True,
            short="boosts",
            override=Override(
                dict[SourceId, Level] | None,
                Arg(
                    "--boost",
                    "an object {source_id: level}, levels -high, -medium, -low, low, medium, high",
                    "ID:LEVEL",
                    repeat=True,
                ),
                "{source_id: level}: low < medium < high favour a source, "
                "-low, -medium, -high hold one back; replaces NAUTILUS_SOURCE_BOOSTS",
                max_length=MAX_SOURCE_ITEMS,
                source_ids=lambda boosts: list(boosts),
            ),
            in_key="always",
            in_explain=True,
            key_form=_pairs,
            ranker="source_boosts",
        ),
    ] = Field(default_factory=dict)
    ranking_idf: Annotated[
        bool | None,  # None: unset, IDF as the embedder's default (auto)
        Knob(
            unset_or(parse_idf),
            summary="down-weight words common in the batch",
            in_broker="the batch-local IDF factor",
            turns_ranking_on=True,
            override=Override(
                bool | None,
                Arg("--idf", "true or false"),
                "down-weight words that recur across the candidate rows "
                "(the batch-local IDF); replaces NAUTILUS_RANKING_IDF",
            ),
            in_key="always",
            in_explain=True,
            resolve=lambda settings: settings.resolved_idf,
            ranker="idf",
        ),
    ] = None
    ranking_max_tokens: Annotated[
        int | None,
        Knob(
            counted(valid="an integer >= 1 (tokens of the rows handed over), or unset"),
            # A budget keeps what fits of whichever list is handed over, ranked or passed
            # through; it needs no relevance, so it does not turn ranking on by itself.
            summary="hand over only the best rows that fit in N tokens",
            in_broker="in merge: the lowest-ranked rows leave first, across sources, each "
            "row counted as its compact JSON (so the attestation covers the budgeted rows)",
            restricts=True,
            override=Override(
                RequestCount,
                Arg("--max-tokens", "an integer >= 1", "N"),
                "hand over only the best rows that fit in N tokens, each "
                "counted as it is handed over (the first row always, flagged when it alone "
                "is over); replaces NAUTILUS_RANKING_MAX_TOKENS",
            ),
            in_explain=True,
        ),
    ] = None
    ranking_cut: Annotated[
        str | None,
        Knob(
            unset_or(parse_ranking_cut),
            summary="stop the list where relevance falls away",
            in_broker="the relevance cut",
            turns_ranking_on=True,
            restricts=True,
            override=Override(
                str | None,
                Arg(
                    "--cut",
                    "relative:A, floor:T or gap:G with a number in (0, 1], e.g. relative:0.8; "
                    "or off",
                    "CUT",
                ),
                "stop the ranking where relevance falls away (a prefix, never before the "
                "first row): relative:0.8, floor:0.6 or gap:0.1; replaces "
                "NAUTILUS_RANKING_CUT. Off is the recommendation: measured on the shared "
                "collections, no setting kept out enough irrelevant rows for the recall it "
                "cost (measure yours with eval --sweep); the answer's cut says how many rows "
                "it left out",
                max_length=MAX_CUT_CHARS,
            ),
            in_key="set",  # a cut ends the ranking sooner: other pages
            in_explain=True,
            ranker="cut",
        ),
    ] = None
    ranking_near_duplicates: Annotated[
        float | None,
        Knob(
            unset_or(parse_near_duplicates),
            summary="collapse near copies into the best-ranked one",
            in_broker="near copies collapsed",
            turns_ranking_on=True,
            override=Override(
                RequestFraction,
                Arg(
                    "--near-duplicates",
                    "on, off, or a number in (0, 1] (1: identical text), e.g. 0.6",
                    "on|off|T",
                ),
                "collapse rows whose text is nearly the same (word-shingle "
                "resemblance at least T; on: the measured default) into the best-ranked "
                "copy, listed in its also_from; replaces NAUTILUS_RANKING_NEAR_DUPLICATES",
            ),
            # copies collapsed, novelty and a cap re-order the ranking: other pages (unset,
            # the key is what it was, so earlier cursors still hold)
            in_key="set",
            in_explain=True,
            ranker="near_duplicates",
        ),
    ] = None
    ranking_diversity: Annotated[
        float | None,
        Knob(
            unset_or(parse_diversity),
            summary="re-order for novelty (MMR)",
            in_broker="the MMR re-ordering",
            turns_ranking_on=True,
            override=Override(
                RequestFraction,
                Arg("--diversity", "a number in [0, 1] (0: off), e.g. 0.3", "W"),
                "trade relevance for novelty over the whole ranking (MMR, by the "
                "same text resemblance; 0 is off); measured, off is the recommendation; "
                "replaces NAUTILUS_RANKING_DIVERSITY",
            ),
            in_key="set",
            in_explain=True,
            ranker="diversity",
        ),
    ] = None
    ranking_max_per_source: Annotated[
        int | None,
        Knob(
            counted(),
            summary="at most N rows of one source a page",
            in_broker="the per-source cap of the top K",
            turns_ranking_on=True,
            restricts=True,
            override=Override(
                RequestCount,
                Arg("--max-per-source", "an integer >= 1", "N"),
                "at most N rows of one source in each page of the top K (it "
                "beats a boost); replaces NAUTILUS_RANKING_MAX_PER_SOURCE",
            ),
            in_key="set",
            in_explain=True,
            ranker="max_per_source",
        ),
    ] = None
    ranking_canonical_sources: Annotated[
        list[str],
        NoDecode,
        Knob(
            unset_or(parse_source_ids),
            # Which copy of a document is shown once copies collapse; it changes nothing
            # until something ranks, so naming sources alone does not turn ranking on.
            summary="the sources whose copy of a document is kept, in order",
            in_broker="the copy kept of a document",
            override=Override(
                list[SourceId] | None,
                Arg("--canonical-source", "a list of source ids, first preferred", "ID", True),
                "when copies of a document collapse, keep the copy of the first of "
                "these sources that has one (default: the best-ranked copy); replaces "
                "NAUTILUS_RANKING_CANONICAL_SOURCES",
                max_length=MAX_SOURCE_ITEMS,
                source_ids=lambda ids: ids,
            ),
            in_key="set",  # another copy shown: the cap counts it
            in_explain=True,
            ranker="canonical_sources",
            names_sources=lambda ids: ids,
        ),
    ] = Field(default_factory=list)
    ranking_budget_passages: Annotated[
        bool,
        Knob(
            boolean,
            # It changes what a budget hands over of a row too large for it; no budget,
            # no change: it does not turn ranking on.
            summary="under a budget, hand a row too large for its page over as its best "
            "passage, marked (false: whole or not at all)",
            in_broker="in merge: a row too large for the budget is counted as its passage, "
            "handed over as it in the ranked route's and tool's rows (whole: [handle] asks "
            "for it whole); data, which the attestation signs, keeps the row whole",
        ),
    ] = True
    ranking_min_confidence: Annotated[
        float | None,
        Knob(
            unset_or(parse_min_confidence),
            # An abstain needs the ranking's confidence: setting it ranks.
            summary="abstain (hand over no rows) below this confidence that one is relevant",
            in_broker="in merge: below it, data is empty (the attestation signs the "
            "abstained answer); the ranked route and tool say why and list the nearest rows",
            turns_ranking_on=True,
            restricts=True,
            override=Override(
                RequestFraction,
                Arg("--min-confidence", "a number in [0, 1] (0: never abstain), e.g. 0.12", "P"),
                "abstain (hand over no rows; the nearest are listed in abstain) when "
                "the ranking's confidence that one of its top 10 rows is relevant is below P; "
                "0 never abstains; replaces NAUTILUS_RANKING_MIN_CONFIDENCE",
            ),
            in_explain=True,
        ),
    ] = None
    ranking_confidence_fit: Annotated[
        str | None,
        Knob(
            unset_or(parse_fit_file),
            # A fit reads the ranking's confidence; with ranking off there is none to
            # read, and a fit alone gives no reason to rank.
            summary="the confidence's fit made on these sources by nautilus-ranking "
            "calibrate (unset: the shipped fit)",
            in_broker="the confidence the abstain reads; checked when attaching against the "
            "broker's nautilus.yaml, the embedder and the setup: a fit made for others "
            "refuses the attachment",
            resolve=_local_fits,
            ranker="confidence_fits",
        ),
    ] = None
    ranking_recency: Annotated[
        Recency | None,
        PlainSerializer(_recency_text, when_used="json"),
        Knob(
            unset_or(parse_recency_value),
            summary="lower older rows among rows of similar relevance: half_life:D or "
            "window:D, per source where sources differ",
            in_broker="the decay by age, of the rows whose time NAUTILUS_RANKING_TIME_FIELDS maps",
            turns_ranking_on=True,
            override=Override(
                str | None,
                Arg(
                    "--recency",
                    "half_life:D or window:D (D e.g. 90d; units s, m, h, d, w, y), "
                    "optionally SOURCE:-prefixed entries, comma-separated; or off",
                    "DECAY",
                ),
                "lower older rows among rows of similar relevance (never past a clearly "
                "better match): half_life:90d or window:365d, per source as "
                "tickets:half_life:7d; off for none; replaces NAUTILUS_RANKING_RECENCY",
                max_length=MAX_RECENCY_CHARS,
            ),
            # time reorders and supersedes (unset, the key is what it was); the newest
            # row's time, the reference without as_of, is in the data key already
            in_key="set",
            in_explain=True,
            show=_recency_text,
            ranker="recency",
            names_sources=lambda recency: list(recency.per_source) if recency else [],
            by_time=True,
        ),
    ] = None
    embedder: Annotated[
        str,
        Knob(
            embedder_name,
            summary="the model content is scored with (one per process)",
            in_broker="the embedder content is scored with",
            kind="embedder",
            per_profile=False,
            in_key="always",
            in_explain=True,
            resolve=lambda settings: settings.resolved_embedder,
        ),
    ] = AUTO
    ranking_supersede: Annotated[
        bool,
        Knob(
            boolean,
            summary="keep only the newest revision of a document (one source's rows by id, "
            "or by document key; across sources only as NAUTILUS_RANKING_MAY_REVISE allows); "
            "the older ones in its also_from",
            in_broker="revisions superseded: within an adapter, or across adapters as "
            "NAUTILUS_RANKING_MAY_REVISE allows",
            turns_ranking_on=True,
            in_key="set",
            in_explain=True,
            ranker="supersede",
            by_time=True,
        ),
    ] = False
    ranking_max_candidates: Annotated[
        int | None,
        Knob(
            counted(),
            summary="score at most N rows, chosen by the sources' ranks",
            in_broker="the candidate cap",
            turns_ranking_on=True,
            in_key="always",
            ranker="max_candidates",
        ),
    ] = None
    ranking_dedup_key: Annotated[
        str | None,
        Knob(
            unset_or(parse_field_name),
            summary="rows with one value of this field are copies",
            in_broker="copies by a field (a pgvector metadata field works)",
            turns_ranking_on=True,
            in_key="always",
            ranker="dedup_key",
        ),
    ] = None
    # Where a row's time and its document key are, by source (synthesis/recency.py).
    ranking_time_fields: Annotated[
        dict[str, str],
        NoDecode,
        Knob(
            unset_or(parse_source_paths),
            # Where a row's time is; it changes nothing until recency or supersession is
            # set. Per process: it describes the sources, which every profile shares.
            summary="by source, the row key or path of a row's time (SOURCE:PATH, comma-separated)",
            in_broker="where each adapter's rows hold their time (the broker's nautilus.yaml "
            "has no place for it)",
            per_profile=False,
            in_key=ranks_by_time,
            key_form=_pairs,
            ranker="time_fields",
            names_sources=lambda paths: list(paths),
        ),
    ] = Field(default_factory=dict)
    ranking_document_keys: Annotated[
        dict[str, str],
        NoDecode,
        Knob(
            unset_or(parse_source_paths),
            # Which rows are revisions of one document; nothing until supersession is set.
            summary="by source, the row key or path naming a row's document, for "
            "supersession (SOURCE:PATH)",
            in_broker="which adapter rows are revisions of one document",
            per_profile=False,
            in_key=_supersedes,
            key_form=_pairs,
            ranker="document_keys",
            names_sources=lambda paths: list(paths),
        ),
    ] = Field(default_factory=dict)
    # Which sources' newer revisions may supersede which other sources' (by document key).
    ranking_may_revise: Annotated[
        dict[str, list[str]],
        NoDecode,
        Knob(
            unset_or(parse_may_revise),
            # Which sources may supersede which others' rows; nothing until supersession
            # is set. Per process: it describes the sources, which every profile shares.
            summary="which sources' newer revisions may supersede another source's "
            "(REVISER:REVISED, comma-separated; both map a document key); unset: a source "
            "revises only its own rows",
            in_broker="which adapters' revisions may supersede which others'",
            per_profile=False,
            in_key=_supersedes,
            key_form=_revisions,
            ranker="may_revise",
            names_sources=lambda pairs: sorted({s for k, vs in pairs.items() for s in (k, *vs)}),
        ),
    ] = Field(default_factory=dict)
    ranking_lexical: Annotated[
        str,
        Knob(
            one_of(LEXICAL_SCORERS),
            # Which lexical score content uses; it changes nothing until something ranks.
            summary="the lexical content score: bm25 (default) or cosine",
            in_broker="the lexical content score",
            ranker="lexical",
        ),
    ] = "bm25"
    ranking_curated_keywords: Annotated[
        str,
        Knob(
            one_of(CURATED_KEYWORDS),
            # Which query words rank; it changes nothing until something ranks. Per
            # process: the routing vocabulary is built once for the broker (and on each
            # reload).
            summary="inside the Nautilus broker only: whether analysis.keyword_map's curated "
            "keywords are content (content) or routing words (routing, the default)",
            in_broker="routing words leave the ranked query: a leading `type:`, the sources' "
            "data_types and their normalised forms, and (routing, the default) "
            "analysis.keyword_map's keywords; `content` ranks by the curated keywords",
            per_profile=False,
        ),
    ] = "routing"
    embedder_cache_size: Annotated[
        int,
        Knob(
            counted(0, "an integer >= 0 (0: no cache)"),
            summary="the embedder's cache of row vectors",
            in_broker="the embedder's cache",
            kind="embedder",
            per_profile=False,
        ),
    ] = 10_000
    embedder_disk_cache_mb: Annotated[
        int,
        Knob(
            counted(0, "an integer >= 0 (MB; 0: no cache on disk)"),
            summary="the model's text vectors kept on disk, in MB (0: off)",
            in_broker="the model's vectors on disk, shared with other processes",
            kind="embedder",
            per_profile=False,
        ),
    ] = 256
    embedder_deadline_ms: Annotated[
        int,
        Knob(
            counted(0, "an integer >= 0 (milliseconds; 0: no deadline)"),
            summary="the time a request may spend embedding rows; later rows by words (0: none)",
            in_broker="the time a request may spend embedding rows",
            kind="embedder",
            per_profile=False,
            ranker="embedding_deadline_ms",
        ),
    ] = 1500
    embedder_max_rows: Annotated[
        int,
        Knob(
            counted(0, "an integer >= 0 (rows; 0: every row)"),
            summary="the model embeds a batch's best rows by words, this many; the rest by "
            "words (0: every row)",
            in_broker="the rows of a batch the model embeds",
            kind="embedder",
            per_profile=False,
            ranker="embedding_max_rows",
        ),
    ] = 100


def _declared() -> tuple[Knob, ...]:
    """Each field's Knob, named for its field."""
    knobs = []
    for name, info in RankingKnobs.model_fields.items():
        knob = next(m for m in info.metadata if isinstance(m, Knob))
        knobs.append(replace(knob, field=name, short=knob.short or name.removeprefix("ranking_")))
    return tuple(knobs)


#: Every knob, in declaration order (the order ``explain`` shows them in).
KNOBS: tuple[Knob, ...] = _declared()


#: Each knob's default (unset) value, by field: what "set" is measured against.
DEFAULTS: Mapping[str, Any] = {
    k.field: RankingKnobs.model_fields[k.field].get_default(call_default_factory=True)
    for k in KNOBS
}


def _default(knob: Knob) -> Any:
    return DEFAULTS[knob.field]


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
        "feedback",
        "feedback_cite_lifetime_days",
        "feedback_retention_days",
        "feedback_max_mb",
        "feedback_text",
        "feedback_opensearch_url",
    }
)

BY_FIELD: Mapping[str, Knob] = {k.field: k for k in KNOBS}
#: The ranking knobs (the embedder aside), in declaration order.
RANKING_KNOBS: tuple[Knob, ...] = tuple(k for k in KNOBS if k.kind == "ranking")
#: The knobs whose being set turns ranking on.
RANKING_SWITCHES: tuple[Knob, ...] = tuple(k for k in KNOBS if k.turns_ranking_on)
#: The knobs a ranking profile may set.
PER_PROFILE: tuple[Knob, ...] = tuple(k for k in KNOBS if k.per_profile)
#: The knobs a request may override, in declaration order.
OVERRIDING: tuple[Knob, ...] = tuple(k for k in KNOBS if k.override is not None)
#: The fields a request may override the settings with (a profile may narrow them): the
#: knobs', which sources it asks, and ``as_of`` (the time ages count from and the
#: revision in force at: a ranking input as recency is).
OVERRIDES: tuple[str, ...] = (*(k.short for k in OVERRIDING), "sources", "as_of")


def cursor_key_entries(settings: Any) -> dict[str, Any]:
    """Each knob that enters a cursor's ranking key under ``settings``, by its short
    name, written as the key writes it (the same bytes as before knobs were declared:
    a knob entered only when set leaves older keys as they were)."""
    entries: dict[str, Any] = {}
    for knob in KNOBS:
        rule = knob.in_key
        if rule is None:
            continue
        if rule == "set":
            enters = knob_is_set(knob.value(settings), _default(knob))
        else:
            enters = rule == "always" or (callable(rule) and rule(settings))
        if enters:
            entries[knob.short] = knob.keyed(settings)
    return entries


def explained(settings: Any) -> dict[str, Any]:
    """Each knob ``explain`` shows, by its short name, as it shows it."""
    return {k.short: k.shown(settings) for k in KNOBS if k.in_explain}


def ranker_arguments(settings: Any) -> dict[str, Any]:
    """The ``RankingSynthesizer`` arguments the knobs set under ``settings``."""
    return {k.ranker: k.value(settings) for k in KNOBS if k.ranker}


def named_sources(settings: Any) -> list[tuple[str, list[str]]]:
    """By variable, the source ids the settings' knobs name (boosts aside: a boost
    naming no source is dropped, not only reported)."""
    return [
        (k.variable, list(k.names_sources(getattr(settings, k.field))))
        for k in KNOBS
        if k.names_sources is not None
    ]


def parse_knobs(values: Mapping[str, Any]) -> tuple[dict[str, Any], list[Problem]]:
    """Each knob that ``values`` gives, through its parser (a bad value is the field's
    default, and named in the problems); what is not a knob is left as it is."""
    return parse_declared(values, KNOBS, DEFAULTS)


def parse_declared(
    values: Mapping[str, Any], declared: Iterable[Setting], defaults: Mapping[str, Any]
) -> tuple[dict[str, Any], list[Problem]]:
    """Each of the ``declared`` settings that ``values`` gives, through its parser (a bad
    value is its entry in ``defaults``, and named in the problems); the rest as it is."""
    parsed = dict(values)
    found: list[Problem] = []
    for setting in declared:
        if setting.field in values:
            value, problems = parse_one(setting, values[setting.field], defaults[setting.field])
            parsed[setting.field] = value
            found.extend(problems)
    return parsed, found


def parse_one(setting: Setting, raw: object, default: Any) -> tuple[Any, list[Problem]]:
    """One setting's value through its parser (a bad one is ``default``), the problems
    as a list."""
    value, problems = setting.parse(setting.variable, raw, default)
    if problems is None:
        return value, []
    return value, [problems] if isinstance(problems, Problem) else list(problems)


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
