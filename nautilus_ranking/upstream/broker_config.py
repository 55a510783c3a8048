"""A Nautilus broker's ``nautilus.yaml`` read for ``nautilus-ranking config``: its sources.

Inside the broker, ``NAUTILUS_SOURCE_BOOSTS`` names the broker's sources, not the ones
of our sources file. So ``nautilus-ranking config --strict --manifest deploy.yaml
--config nautilus.yaml`` checks the boosts against the broker's source ids when
``--config`` is the broker's file: a mapping whose ``sources`` are mappings carrying
the broker's required ``data_types`` (our sources file has no such key). Read with the
same bounded reader as our sources file; nothing is connected to.
"""

from __future__ import annotations

from pathlib import Path

from nautilus_ranking.sources.yaml_file import SourceConfigError, read_yaml


def broker_sources(path: Path) -> list[dict[str, str]] | None:
    """Each source's id and type when ``path`` is a Nautilus broker's config; None when
    it is not one (or cannot be read: our own check then says why)."""
    try:
        document = read_yaml(Path(path))
    except SourceConfigError:
        return None
    sources = document.get("sources") if isinstance(document, dict) else None
    if (
        not isinstance(sources, list)
        or not sources
        or not all(isinstance(s, dict) and "data_types" in s for s in sources)
    ):
        return None
    return [{"id": str(s.get("id")), "type": str(s.get("type"))} for s in sources]


def broker_agents(path: Path) -> list[str] | None:
    """The agent ids a Nautilus broker's config lists (its ``agents`` mapping, or a list
    of mappings with ``id``); None when it lists none (nothing to check a profile's
    agents against)."""
    try:
        document = read_yaml(Path(path))
    except SourceConfigError:
        return None
    agents = document.get("agents") if isinstance(document, dict) else None
    if isinstance(agents, dict):
        return [str(a) for a in agents]
    if isinstance(agents, list):
        return [str(a.get("id")) for a in agents if isinstance(a, dict) and "id" in a]
    return None
