"""The environment a test's subprocess starts from: the suite's, without its ``NAUTILUS_*``
variables but the embedder the suite pins (tests/conftest.py)."""

from __future__ import annotations

import os

#: The suite ranks by words: the dev venv has the embed extra, and unset would load
#: the model in every subprocess that ranks (tests/embedders/test_embedder_default.py tests unset).
PINNED = {"NAUTILUS_EMBEDDER": "hashing"}


def plain_environment() -> dict[str, str]:
    """``os.environ`` without ``NAUTILUS_*``, with :data:`PINNED`."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("NAUTILUS_")}
    env.update(PINNED)
    return env
