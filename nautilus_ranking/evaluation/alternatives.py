"""What ``eval --sweep`` tries: deployable settings, each one change from the current ones.

Every alternative is a set of ``NAUTILUS_*`` values an operator could deploy, and its
synthesizer is the one the broker would build from them (every ranking knob unset:
passthrough). The knobs come from :mod:`nautilus_ranking.settings.knobs`: passthrough unsets every
ranking knob declared there, and the reference resets every one to its default with
ranking on, so a knob declared later is covered by both with no edit here.

Tried, each where it differs from the current settings: passthrough; IDF off and on;
near copies off and ``on``; diversity off and at the documented 0.3; no per-source cap
and the documented 4 (docs/configuration.md: both measured in
``benchmarks/quality/near_duplicates.py``); every other lexical scorer; with ``embed``, every
other embedder (the rows re-embedded); where the rows carry a time (a source maps
one), recency off and at :data:`RECENCY_SETTINGS`, and supersession off and on; with
the judgments dated (``eval --as-of``), the same ranking without the request's
``as_of``; and each source at every boost level. A scorer
or an embedder does not turn ranking on: from passthrough it is tried ranked, with a
top K of the evaluated depth, which changes nothing else nDCG@k sees.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nautilus_ranking.embedders import Embedder, embedder_from_name
from nautilus_ranking.evaluation.knob_settings import default_of, unset
from nautilus_ranking.settings.boost_entries import VALID_LEVELS
from nautilus_ranking.settings.knobs import KNOBS, RANKING_KNOBS
from nautilus_ranking.settings.model import NautilusSettings
from nautilus_ranking.settings.parsing import LEXICAL_SCORERS, NEAR_DUPLICATES_ON
from nautilus_ranking.settings.time_entries import recency_of
from nautilus_ranking.synthesis.ranking import RankingSynthesizer

#: The documented diversity setting (docs/configuration.md, NAUTILUS_RANKING_DIVERSITY).
DIVERSITY = 0.3
#: The documented per-source cap (docs/configuration.md, NAUTILUS_RANKING_MAX_PER_SOURCE).
MAX_PER_SOURCE = 4
#: The embedders the sweep tries with the ``embed`` extra (int8 onnx: the fast one).
EMBEDDERS = ("hashing", "onnx")
REFERENCE = "reference (ranked, defaults)"
#: The decays tried where rows carry a time: a short and a long half-life, and a window
#: (docs/configuration.md, NAUTILUS_RANKING_RECENCY; docs/tuning-time.md measured them).
RECENCY_SETTINGS = ("half_life:30d", "half_life:365d", "window:730d")
WITHOUT_AS_OF = "without as_of"


@dataclass(frozen=True)
class Alternative:
    """Deployable settings: the ``NAUTILUS_*`` lines that select them, and their synthesizer."""

    name: str
    # current | passthrough | reference | idf | knob | time | as_of | lexical | embedder | boost
    kind: str
    ranker: RankingSynthesizer | None  # None: passthrough (what the broker does)
    env: tuple[tuple[str, str], ...] = ()  # changes against the current settings
    source: str | None = None  # boost rows: the boosted source
    level: str | None = None  # boost rows: low | medium | high | none
    same_as_current: bool = False
    settings: NautilusSettings | None = None  # what the broker would be built from
    as_of: bool = True  # the request carries the judgments' as_of (eval --as-of), if any


def signature(settings: NautilusSettings, ranked: bool | None = None) -> tuple[Any, ...]:
    """What decides a ranking: every declared knob's value (``ranked``: whether it ranks,
    by default whether the settings turn ranking on)."""
    if not (settings.ranking_enabled if ranked is None else ranked):
        return ("passthrough",)
    values = settings.model_dump(mode="json")
    return tuple(repr(values[k.field]) for k in KNOBS)


def synthesizer(settings: NautilusSettings, embedder: Embedder) -> RankingSynthesizer | None:
    """What ``Broker.from_config`` builds from these settings (None: passthrough)."""
    if not settings.ranking_enabled:
        return None
    return measured(settings, embedder)


def measured(settings: NautilusSettings, embedder: Embedder) -> RankingSynthesizer:
    """The ranker of ``settings`` without the embedding deadline: eval measures the
    ranking, every row embedded, not how busy the machine was while it ran."""
    return RankingSynthesizer.from_settings(
        settings.model_copy(update={"embedder_deadline_ms": 0}), embedder=embedder
    )


def boosts_value(boosts: Mapping[str, str], order: Sequence[str]) -> str:
    """``NAUTILUS_SOURCE_BOOSTS`` as written, in the sources' order."""
    rank = {sid.lower(): i for i, sid in enumerate(order)}
    return ",".join(
        f"{sid}:{level}"
        for sid, level in sorted(boosts.items(), key=lambda item: rank.get(item[0], len(rank)))
    )


def _time_changes(settings: NautilusSettings) -> list[tuple[str, str, dict[str, Any], str]]:
    """(name, kind, field changes, .env line value) for the time knobs: recency off and
    at each of :data:`RECENCY_SETTINGS`, supersession off and on."""
    out: list[tuple[str, str, dict[str, Any], str]] = []
    current = str(settings.ranking_recency) if settings.ranking_recency is not None else None
    for value in (None, *RECENCY_SETTINGS):
        if value != current:
            name = f"recency {value}" if value is not None else "recency off"
            decay, _ = recency_of(value)  # the settings hold a decay parsed
            out.append((name, "time", {"ranking_recency": decay}, value or "off"))
    on = not settings.ranking_supersede
    name = f"supersede {'on' if on else 'off'}"
    out.append((name, "time", {"ranking_supersede": on}, str(on).lower()))
    return out


def _knob_changes(
    settings: NautilusSettings, dated: bool = False
) -> list[tuple[str, str, dict[str, Any], str]]:
    """(name, kind, field changes, .env line value) for each knob's documented settings
    (``dated``: the time knobs too)."""
    out: list[tuple[str, str, dict[str, Any], str]] = []
    for on in (False, True):
        if settings.ranking_idf is None and on == settings.resolved_idf:
            continue  # what the current settings already do
        out.append((f"IDF {'on' if on else 'off'}", "idf", {"ranking_idf": on}, str(on).lower()))
    for value, name, line in (
        (None, "near duplicates off", "off"),
        (NEAR_DUPLICATES_ON, "near duplicates on", "on"),
    ):
        out.append((name, "knob", {"ranking_near_duplicates": value}, line))
    for value, name, line in (
        (None, "diversity off", "off"),
        (DIVERSITY, f"diversity {DIVERSITY:g}", f"{DIVERSITY:g}"),
    ):
        out.append((name, "knob", {"ranking_diversity": value}, line))
    for cap, name in (
        (None, "no per-source cap"),
        (MAX_PER_SOURCE, f"at most {MAX_PER_SOURCE} per source"),
    ):
        out.append((name, "knob", {"ranking_max_per_source": cap}, "" if cap is None else str(cap)))
    for scorer in LEXICAL_SCORERS:
        if scorer != settings.ranking_lexical:
            out.append((f"lexical {scorer}", "lexical", {"ranking_lexical": scorer}, scorer))
    return out + (_time_changes(settings) if dated else [])


def alternatives(
    settings: NautilusSettings,
    source_ids: Sequence[str],
    embedder: Embedder,
    sweep: bool,
    k: int = 10,
    embed: bool = False,
    dated: bool = False,
    as_of: bool = False,
) -> list[Alternative]:
    """The current settings first; with ``sweep``, every alternative of the module's list
    (``embed``: the other embedders too; ``dated``: the rows carry a time, so the time
    knobs; ``as_of``: the queries carry one, so the ranking without it), each deployable
    settings once."""
    current = Alternative(
        "current" if settings.ranking_enabled else "current (passthrough)",
        "current",
        synthesizer(settings, embedder),
        settings=settings,
    )
    if not sweep:
        return [current]
    seen = {signature(settings): "current"}
    out = [current]

    def add(
        name: str,
        kind: str,
        changed: NautilusSettings,
        env: list[tuple[str, str]],
        source: str | None = None,
        level: str | None = None,
        with_embedder: Embedder = embedder,
    ) -> None:
        if kind in ("lexical", "embedder") and not changed.ranking_enabled:
            changed = changed.model_copy(update={"ranking_top_k": k})
            env = [*env, ("NAUTILUS_RANKING_TOP_K", str(k))]
        key = signature(changed)
        same = seen.get(key) == "current"
        if key in seen and kind != "boost":
            return  # the same deployable settings as a row already listed
        seen.setdefault(key, name)
        out.append(
            Alternative(
                name,
                kind,
                synthesizer(changed, with_embedder),
                tuple(env),
                source,
                level,
                same,
                changed,
            )
        )

    passthrough, lines = unset(settings)
    add("passthrough", "passthrough", passthrough, lines)
    if as_of and current.ranker is not None:
        out.append(
            Alternative(WITHOUT_AS_OF, "as_of", current.ranker, settings=settings, as_of=False)
        )
    for name, kind, update, line in _knob_changes(settings, dated):
        variable = "NAUTILUS_" + next(iter(update)).upper()
        add(name, kind, settings.model_copy(update=update), [(variable, line)])
    if embed:
        for other in EMBEDDERS:
            if other != settings.resolved_embedder:
                add(
                    f"embedder {other}",
                    "embedder",
                    settings.model_copy(update={"embedder": other}),
                    [("NAUTILUS_EMBEDDER", other)],
                    with_embedder=embedder_from_name(
                        other,
                        cache_size=settings.embedder_cache_size,
                        data_dir=settings.data_dir,
                        disk_cache_mb=settings.embedder_disk_cache_mb,
                    ),
                )
    for sid in source_ids:
        key = sid.lower()
        levels: list[str] = list(VALID_LEVELS)
        if key in settings.source_boosts:
            levels.insert(0, "none")
        for level in levels:
            boosts = {k: v for k, v in settings.source_boosts.items() if k != key}
            if level != "none":
                boosts[key] = level
            add(
                f"{sid}:{level}",
                "boost",
                settings.model_copy(update={"source_boosts": boosts}),
                [("NAUTILUS_SOURCE_BOOSTS", boosts_value(boosts, source_ids))],
                sid,
                level,
            )
    return out


def reference(settings: NautilusSettings, embedder: Embedder) -> Alternative:
    """Ranking on with every ranking knob at its default (the embedder is the process's):
    what the docs call the reference, and the baseline a boost is checked against when
    the current settings pass rows through."""
    changed = settings.model_copy(update={k.field: default_of(k.field) for k in RANKING_KNOBS})
    return Alternative(
        REFERENCE,
        "reference",
        measured(changed, embedder),
        settings=changed,
    )


def unboosted(settings: NautilusSettings, source: str, embedder: Embedder) -> Alternative:
    """The same ranking without ``source``'s boost (ranking kept on): the hijack baseline."""
    boosts = {k: v for k, v in settings.source_boosts.items() if k != source.lower()}
    changed = settings.model_copy(update={"source_boosts": boosts})
    if not changed.ranking_enabled:
        return reference(settings, embedder)
    return Alternative(
        f"{source}:none (ranked)",
        "reference",
        measured(changed, embedder),
        settings=changed,
    )
