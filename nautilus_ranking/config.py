"""The settings' public import path, kept for operators' code.

``from nautilus_ranking.config import NautilusSettings`` has been the documented way in
since the first release; the model itself lives in :mod:`nautilus_ranking.settings.model`
beside the rest of the settings. Its log events keep the logger name
``nautilus_ranking.config`` that operators' log filters use.
"""

from __future__ import annotations

from nautilus_ranking.settings.knobs import VALID_EMBEDDERS
from nautilus_ranking.settings.model import (
    PROFILE_VALUES,
    ConfigError,
    NautilusSettings,
    log_problem,
    parse_source_boosts,
)

__all__ = [
    "PROFILE_VALUES",
    "VALID_EMBEDDERS",
    "ConfigError",
    "NautilusSettings",
    "log_problem",
    "parse_source_boosts",
]
