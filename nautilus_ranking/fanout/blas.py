"""BLAS threads, for a process that nautilus owns (the CLI, a service's workers).

numpy's OpenBLAS starts one thread per core and splits even a small matrix-vector
product across them; under load those threads wait for each other, and a call
of microseconds takes milliseconds. The ranker no longer calls BLAS on small
requests (products below 2**20 entries run on the calling thread), but a large
request still does, and in a server that answers several requests at once,
BLAS's own threads only compete with the request threads. A library must not
change its host's thread pools, so this is a function for the owner of the
process to call once, at start-up. It needs ``threadpoolctl`` (the ``perf``
extra); without it, it changes nothing and says so.
"""

from __future__ import annotations

from nautilus_ranking.log import get_logger

logger = get_logger("nautilus_ranking.fanout.blas")


def limit_blas_threads(threads: int = 1) -> bool:
    """Limit the BLAS libraries loaded in this process to ``threads`` threads, for
    the rest of the process. True when applied; False (one log line) when
    ``threadpoolctl`` is not installed."""
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
        raise ValueError(f"threads must be an integer >= 1, got {threads!r}")
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        logger.info(
            "blas_threads_not_limited",
            reason="threadpoolctl is not installed",
            hint="pip install 'nautilus-ranking[perf]'",
        )
        return False
    import numpy  # noqa: F401  (load numpy's BLAS first, so that the limit reaches it)

    threadpool_limits(limits=threads, user_api="blas")
    return True
