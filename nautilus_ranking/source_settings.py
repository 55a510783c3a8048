"""The settings as they apply to the sources a broker serves: which sources file it
reads, the ids the settings name that no source has (boosts, and every knob declared
to name sources), and the settings with boosts naming no source dropped. Shared by the
broker, start-up checks, ``config``, ``eval`` and the Nautilus broker's attachment.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from nautilus_ranking.errors import Problem
from nautilus_ranking.settings.knobs import named_sources
from nautilus_ranking.settings.model import NautilusSettings
from nautilus_ranking.sources.factory import bundled_demo_config


def config_path(settings: NautilusSettings, given: str | Path | None = None) -> Path:
    """The sources file a broker reads: ``given`` (``--config``), else NAUTILUS_CONFIG,
    else the bundled demo's."""
    return Path(given or settings.config or bundled_demo_config()).expanduser()


def boost_problems(settings: NautilusSettings, source_ids: Sequence[str]) -> tuple[Problem, ...]:
    """One problem for each boosted id that no source has (ids compare lower-cased)."""
    known = {sid.lower() for sid in source_ids}
    return tuple(
        Problem("NAUTILUS_SOURCE_BOOSTS", sid, f"no source has id {sid!r}", ", ".join(source_ids))
        for sid in settings.source_boosts
        if sid not in known
    )


def named_source_problems(
    settings: NautilusSettings, source_ids: Sequence[str]
) -> tuple[Problem, ...]:
    """One problem for each id no source has among those the settings name a source by
    (besides boosts): every knob declared to name sources (``names_sources`` in
    ``settings/knobs.py``: the canonical sources, a recency entry for one source, the
    time fields, the document keys, either side of a may-revise pair). A misspelt id
    silently does nothing where the operator meant something done."""
    known = {sid.lower() for sid in source_ids}
    return tuple(
        Problem(variable, sid, f"no source has id {sid!r}", ", ".join(source_ids))
        for variable, ids in named_sources(settings)
        for sid in ids
        if sid.lower() not in known
    )


def applied_settings(settings: NautilusSettings, source_ids: Sequence[str]) -> NautilusSettings:
    """The settings as a broker over these sources applies them: boosts naming no
    source dropped."""
    known = {sid.lower() for sid in source_ids}
    kept = {sid: level for sid, level in settings.source_boosts.items() if sid in known}
    return settings.model_copy(update={"source_boosts": kept})
