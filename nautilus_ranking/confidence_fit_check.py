"""The configured confidence fit, checked at start against what is configured.

A fit (``selection/local_fit.py``) is true only of the sources file, the embedder and
the scoring setup it was made for. A file that is missing or is not a fit, or one made
for other sources, another embedder or another setup, is a problem no start skips
(``serve``, ``mcp``, ``query``, ``eval``, ``calibrate``: exit 1; ``config --strict``
fails), named with the fit, what it was made for and what is configured.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nautilus_ranking.errors import Problem
from nautilus_ranking.selection import confidence
from nautilus_ranking.selection.local_fit import FitFileError, read_fit, sources_digest
from nautilus_ranking.settings.model import NautilusSettings

VARIABLE = "NAUTILUS_RANKING_CONFIDENCE_FIT"
_VALID = (
    "a fit nautilus-ranking calibrate wrote for these sources and this embedder "
    "(run it again), or unset for the shipped fit"
)
_NAMES = {"sources_sha256": "the sources", "embedder": "the embedder", "setup": "the setup"}


def scoring_setup(settings: NautilusSettings) -> str:
    """The scoring setup ``settings`` rank under (a fit's key, ``confidence.setup_key``)."""
    return confidence.setup_key(
        settings.resolved_embedder, settings.ranking_lexical, settings.resolved_idf
    )


def made_for(settings: NautilusSettings, sources_file: Path) -> dict[str, Any]:
    """What a fit made now, with these settings on these sources, is made for."""
    return {
        "sources_file": str(sources_file),
        "sources_sha256": sources_digest(sources_file),
        "embedder": settings.resolved_embedder,
        "setup": scoring_setup(settings),
    }


def fit_problem(
    settings: NautilusSettings, sources_file: Path, variable: str = VARIABLE
) -> Problem | None:
    """Why the configured fit cannot rank with these settings and sources, or None."""
    value = settings.ranking_confidence_fit
    if value is None:
        return None
    try:
        fit = read_fit(value)
    except FitFileError as exc:
        return Problem(variable, value, str(exc), _VALID)
    try:
        configured = made_for(settings, sources_file)
    except OSError:  # no sources file to compare with: its own check names it
        return None
    differ = [k for k in _NAMES if fit.made_for.get(k) != configured[k]]
    if not differ:
        return None
    return Problem(
        variable,
        value,
        f"the fit {fit.path} was made for {_describe(fit.made_for)}; configured: "
        f"{_describe(configured)} (they differ in {', '.join(_NAMES[k] for k in differ)})",
        _VALID,
    )


def _describe(facts: dict[str, Any]) -> str:
    digest = str(facts.get("sources_sha256") or "?")[:12]
    return (
        f"sources file {facts.get('sources_file')} (sha256 {digest}…), embedder "
        f"{facts.get('embedder')}, setup {facts.get('setup')}"
    )


def fit_problems(
    settings: NautilusSettings, sources_file: Path, profiles: Any = None
) -> list[Problem]:
    """The global fit's problem and each profile's (``profiles``: a
    ``profiles.build.Profiles``): a profile ranks with the fit in force for it, its own
    or the global one, under its own setup."""
    found = [fit_problem(settings, sources_file)]
    for name, profile in sorted(getattr(profiles, "by_name", {}).items()):
        own = profile.settings(settings)
        variable = profile.origins.get("ranking_confidence_fit", f"{VARIABLE} (profile {name})")
        found.append(fit_problem(own, sources_file, variable))
    unique: dict[str, Problem] = {}
    for problem in found:
        if problem is not None:
            unique.setdefault(problem.message, problem)
    return list(unique.values())
