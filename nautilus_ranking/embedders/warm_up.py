"""Load the model before the first request needs it, where waiting is cheap.

A server (``serve``, the MCP server) and the broker attachment load the sentence
model at start, so the first request does not pay its load (about a second on 2
cores) and a second; the CLI loads it only when a vector is missing. An embedder
with nothing to load (``hashing``, ``noop``) has no ``warm_up`` and is left alone.
"""

from __future__ import annotations

import time

from nautilus_ranking.log import get_logger

logger = get_logger("nautilus_ranking.embedders")


def needs_warm_up(embedder: object) -> bool:
    """Whether ``embedder`` has a model to load (it offers ``warm_up()``)."""
    return callable(getattr(embedder, "warm_up", None))


def warm_up(embedder: object) -> bool:
    """Load ``embedder``'s model and run it once; one ``embedder_loaded`` log line with
    the time it took. False, with a warning, when loading failed (the first request that
    needs a vector then fails the same way, as it would have without the warm-up)."""
    if not needs_warm_up(embedder):
        return False
    started = time.perf_counter()
    try:
        embedder.warm_up()  # type: ignore[attr-defined]
    except Exception as exc:  # the model's own error, said where an operator looks
        logger.warning(
            "embedder_load_failed",
            model_id=getattr(embedder, "model_id", None),
            error=f"{type(exc).__name__}: {exc}",
        )
        return False
    logger.info(
        "embedder_loaded",
        model_id=getattr(embedder, "model_id", None),
        ms=round((time.perf_counter() - started) * 1000),
    )
    return True
