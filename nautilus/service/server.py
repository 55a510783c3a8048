"""``nautilus serve``: check everything a worker needs, then run uvicorn.

The settings, the sources file and the API keys are checked once here, before
any worker starts, so a bad manifest exits 1 with one clear message instead of
a crash-looping worker. Metrics go through a fresh prometheus-client
multiprocess directory, so ``--workers N`` reports the sum of all workers.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from pathlib import Path
from types import FrameType

from nautilus.broker import Broker
from nautilus.config import NautilusSettings
from nautilus.log import get_logger

logger = get_logger("nautilus.service")

_MULTIPROC = "PROMETHEUS_MULTIPROC_DIR"


class _Terminated(Exception):
    """SIGTERM, re-raised by uvicorn once its graceful shutdown is done."""


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise _Terminated


def serve(host: str | None = None, port: int | None = None,
          workers: int | None = None) -> int:
    try:
        import uvicorn

        from nautilus.service.limits import load_api_keys
    except ImportError as exc:
        raise ImportError("nautilus serve needs the 'serve' extra: "
                          "pip install 'nautilus[serve]'") from exc
    settings = NautilusSettings()  # strict mode raises ConfigError here
    Broker.from_config(None, settings).close()  # sources file and boosted ids
    load_api_keys(settings.serve_api_keys_file)  # ConfigError when set but unusable
    host = host or settings.serve_host
    port = port if port is not None else settings.serve_port
    workers = workers or settings.serve_workers
    # The workers read their settings again: give them the flags' values, so
    # /v1/config reports the address actually bound.
    os.environ.update(NAUTILUS_SERVE_HOST=host, NAUTILUS_SERVE_PORT=str(port),
                      NAUTILUS_SERVE_WORKERS=str(workers),
                      NAUTILUS_SERVE_BODY_TIMEOUT_S=(  # positional: what the parser reads
                          f"{settings.serve_body_timeout_s:.20f}".rstrip("0").rstrip(".")))
    own_dir = None
    if os.environ.get(_MULTIPROC):  # the operator's directory: clear the last run's files
        for stale in Path(os.environ[_MULTIPROC]).glob("*.db"):
            stale.unlink(missing_ok=True)
    else:
        own_dir = tempfile.mkdtemp(prefix="nautilus-metrics-")
        os.environ[_MULTIPROC] = own_dir
    logger.info("serve_starting", host=host, port=port, workers=workers,
                metrics_dir=os.environ[_MULTIPROC])
    # imported once the metrics directory is set (prometheus-client reads it on import)
    from nautilus.service.protocol import HeaderDeadlineProtocol
    # uvicorn drains in-flight requests on SIGTERM, then raises the signal again with
    # the handler it found: ours turns that into a clean exit 0 that still cleans up.
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        uvicorn.run("nautilus.service.app:create_app", factory=True, host=host, port=port,
                    workers=workers, access_log=False, log_level="warning",
                    # a stalled body is cut at its own deadline: the drain outlasts both
                    timeout_graceful_shutdown=int(max(settings.serve_request_timeout_s,
                                                      settings.serve_body_timeout_s)) + 5,
                    # longer than a load balancer's idle timeout (60 s on the usual ones):
                    # the balancer, never the server, closes an idle connection, so a
                    # request is never sent on a connection the server is closing
                    timeout_keep_alive=75,
                    http=HeaderDeadlineProtocol,  # slow headers are cut like slow bodies
                    server_header=False)
    except _Terminated:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        if own_dir is not None:
            shutil.rmtree(own_dir, ignore_errors=True)
            os.environ.pop(_MULTIPROC, None)
    return 0
