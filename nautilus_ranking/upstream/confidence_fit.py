"""Inside the broker, a configured confidence fit checked against what the broker serves.

A fit (``NAUTILUS_RANKING_CONFIDENCE_FIT``, globally or in a profile) is true only of the
sources, the embedder and the scoring setup it was made for
(``confidence_fit_check.py``). Inside the broker the sources are the broker's: the
``nautilus.yaml`` it was built from, which the broker does not keep, so
``attach_ranking`` is given its path (``python -m nautilus_ranking.upstream serve``
passes the file it serves). The fit is compared with that file (the same digest
``nautilus-ranking config --strict --config nautilus.yaml`` compares it with) and with
the embedder and setup the ranking runs under; a fit that differs, or one that cannot
be checked because no file was given, refuses the attachment, naming the fit, what it
was made for and what is configured. Never a silent fallback to the shipped fit.

After a reload the broker has already adopted its new file: a fit it no longer matches
is one warning (``config_value_skipped``) and ranks on until a restart refuses it.
"""

from __future__ import annotations

from pathlib import Path

from nautilus_ranking.confidence_fit_check import VARIABLE, fit_problems
from nautilus_ranking.errors import Problem
from nautilus_ranking.profiles.build import load_profiles
from nautilus_ranking.settings.model import NautilusSettings


def served_fit_problems(settings: NautilusSettings, config_path: Path | None) -> list[Problem]:
    """Why the fits in force (the global one and each profile's) cannot rank what the
    broker built from ``config_path`` serves; empty when none is set or all match."""
    profiles = load_profiles(settings)
    if config_path is not None:
        return fit_problems(settings, Path(config_path).expanduser(), profiles)
    configured = {VARIABLE: settings.ranking_confidence_fit}
    for _, profile in sorted(getattr(profiles, "by_name", {}).items()):
        if "ranking_confidence_fit" in profile.values:
            where = profile.origins["ranking_confidence_fit"]
            configured[where] = profile.values["ranking_confidence_fit"]
    return [
        Problem(
            variable,
            value,
            "inside the Nautilus broker a fit is checked against the broker's nautilus.yaml, "
            "and attach_ranking was not given it",
            "attach_ranking(broker, config_path='nautilus.yaml') (python -m "
            "nautilus_ranking.upstream serve passes it), or unset",
        )
        for variable, value in configured.items()
        if value is not None
    ]
