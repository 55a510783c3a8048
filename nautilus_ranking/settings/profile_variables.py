"""Which ``NAUTILUS_*`` names are a ranking profile's, so the settings' typo check leaves
them to the profile reader (``nautilus_ranking/profiles/read.py``)."""

from __future__ import annotations

FILE_VAR = "NAUTILUS_PROFILES_FILE"
#: What a misspelt profile variable starts with (``NAUTILUS_PROFILE_…``, one underscore…).
_NEAR = "NAUTILUS_PROFILE"


def is_profile_variable(name: str) -> bool:
    """Whether ``name`` is (or was meant to be) a profile variable: the profile reader
    judges these, not the settings' typo check."""
    upper = name.upper()
    return upper.startswith(_NEAR) and upper != FILE_VAR
