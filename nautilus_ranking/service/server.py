"""``nautilus-ranking serve``: check everything a worker needs, then run uvicorn.

The settings, the sources file and the API keys are checked once here, before
any worker starts, so a bad manifest exits 1 with one clear message instead of
a crash-looping worker. Metrics go through a fresh prometheus-client
multiprocess directory, so ``--workers N`` reports the sum of all workers: in the
system temporary directory, else under ``NAUTILUS_DATA_DIR`` (a container with a
read-only root filesystem has only its volumes writable).
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import socket
import sys
import tempfile
from pathlib import Path
from types import FrameType
from typing import Any

from nautilus_ranking.errors import Problem
from nautilus_ranking.log import get_logger
from nautilus_ranking.settings.model import ConfigError, NautilusSettings
from nautilus_ranking.tracing.sdk import sdk_problem

logger = get_logger("nautilus_ranking.service")

_MULTIPROC = "PROMETHEUS_MULTIPROC_DIR"


class _Terminated(Exception):
    """SIGTERM, re-raised by uvicorn once its graceful shutdown is done."""


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise _Terminated


def listen_problem(host: str, port: int) -> str | None:
    """Why uvicorn could not listen on ``host:port`` (checked with a socket bound as it
    binds one), or None. Checked before any worker starts: uvicorn binds only after the
    application is up, so it would log ``serve_ready`` and then fail in plain text."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return (
                    f"cannot listen on {host}:{port}: the port is already in use by "
                    "another process (choose another with --port or NAUTILUS_SERVE_PORT, "
                    "or stop that process)"
                )
            return (
                f"cannot listen on {host}:{port}: {exc.strerror or exc} (check --host/"
                "NAUTILUS_SERVE_HOST and --port/NAUTILUS_SERVE_PORT)"
            )
    return None


def own_metrics_dir(data_dir: Path) -> str:
    """A fresh multiprocess directory: in the system temporary directory, else under
    ``data_dir/metrics`` (where a read-only root leaves a volume writable)."""
    tried: list[str] = []
    for parent in (None, data_dir.expanduser() / "metrics"):
        try:
            if parent is not None:
                parent.mkdir(parents=True, exist_ok=True)
            return tempfile.mkdtemp(prefix="nautilus-metrics-", dir=parent)
        except OSError as exc:  # no usable temporary directory, a read-only file system
            tried.append(f"{parent or 'the temporary directory'}: {exc.strerror or exc}")
    raise ConfigError(
        (
            Problem(
                _MULTIPROC,
                "(unset)",
                "no writable directory for the metrics (" + "; ".join(tried) + ")",
                f"a writable NAUTILUS_DATA_DIR (a mounted volume), TMPDIR or {_MULTIPROC}",
            ),
        )
    )


def _clear_operator_dir(path: Path) -> None:
    """The operator's multiprocess directory, made ready: created, the last run's files gone."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        for stale in path.glob("*.db"):
            stale.unlink(missing_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".nautilus-probe-"):
            pass
    except OSError as exc:
        raise ConfigError(
            (
                Problem(
                    _MULTIPROC,
                    str(path),
                    f"not a writable directory ({exc.strerror or exc})",
                    "a writable directory, or unset (a fresh one is made)",
                ),
            )
        ) from None


def serve(
    host: str | None = None,
    port: int | None = None,
    workers: int | None = None,
    config: str | None = None,
) -> int:
    try:
        import uvicorn

        from nautilus_ranking.startup.keys_file import load_api_keys
    except ImportError as exc:
        raise ImportError(
            "nautilus-ranking serve needs the 'serve' extra: pip install 'nautilus-ranking[serve]'"
        ) from exc
    if config:  # as NAUTILUS_CONFIG, so every worker process reads the same file
        os.environ["NAUTILUS_CONFIG"] = str(Path(config).expanduser().resolve())
    settings = NautilusSettings()  # strict mode raises ConfigError here
    from nautilus_ranking.startup.checks import check_at_start

    check_at_start(settings)
    load_api_keys(settings.serve_api_keys_file)  # ConfigError when set but unusable
    from nautilus_ranking.request.cursor_keys import cursor_keys

    cursor_keys(settings)  # ConfigError when the key file is refused (before any worker)
    host = host or settings.serve_host
    port = port if port is not None else settings.serve_port
    workers = workers or settings.serve_workers
    problem = listen_problem(host, port) or sdk_problem()
    if problem is not None:
        print(f"nautilus-ranking: {problem}", file=sys.stderr)
        return 1
    settings = settings.model_copy(
        update={"serve_host": host, "serve_port": port, "serve_workers": workers}
    )
    if workers > 1:
        _hand_to_workers(settings)
    own_dir = _metrics_dir(settings.data_dir)
    logger.info(
        "serve_starting", host=host, port=port, workers=workers, metrics_dir=os.environ[_MULTIPROC]
    )
    options = _uvicorn_options(settings)
    app = _app(settings)
    # uvicorn drains in-flight requests on SIGTERM, then raises the signal again with
    # the handler it found: ours turns that into a clean exit 0 that still cleans up.
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        uvicorn.run(app, **options)
    except _Terminated:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        if own_dir is not None:
            shutil.rmtree(own_dir, ignore_errors=True)
            os.environ.pop(_MULTIPROC, None)
    return 0


def _hand_to_workers(settings: NautilusSettings) -> None:
    """Worker processes start afresh and read their settings from the environment:
    give them the flags' values, so /v1/config reports the address actually bound."""
    os.environ.update(
        NAUTILUS_SERVE_HOST=settings.serve_host,
        NAUTILUS_SERVE_PORT=str(settings.serve_port),
        NAUTILUS_SERVE_WORKERS=str(settings.serve_workers),
        NAUTILUS_SERVE_BODY_TIMEOUT_S=(  # positional: what the parser reads
            f"{settings.serve_body_timeout_s:.20f}".rstrip("0").rstrip(".")
        ),
    )


def _metrics_dir(data_dir: Path) -> str | None:
    """Set up the multiprocess metrics directory before prometheus-client is imported:
    the operator's (``PROMETHEUS_MULTIPROC_DIR``), cleared of the last run's files, or a
    fresh one of our own, returned so that it is removed on exit."""
    if os.environ.get(_MULTIPROC):  # the operator's directory: clear the last run's files
        _clear_operator_dir(Path(os.environ[_MULTIPROC]))
        return None
    own_dir = own_metrics_dir(data_dir)
    os.environ[_MULTIPROC] = own_dir
    return own_dir


def _app(settings: NautilusSettings) -> Any:
    """One worker (the default) serves an app built here, from the settings just
    checked; several are processes of their own, which build theirs from the
    environment (uvicorn gets the factory's import path)."""
    if settings.serve_workers > 1:
        return "nautilus_ranking.service.app:create_app"
    from nautilus_ranking.service.app import create_app

    return create_app(settings)


def _uvicorn_options(settings: NautilusSettings) -> dict[str, Any]:
    """How uvicorn runs the app: its address, its workers, and the deadlines a
    graceful drain, an idle connection and slow headers get."""
    # imported once the metrics directory is set (prometheus-client reads it on import)
    from nautilus_ranking.service.protocol import HeaderDeadlineProtocol, with_header_deadline

    workers = settings.serve_workers
    return {
        "factory": workers > 1,
        "host": settings.serve_host,
        "port": settings.serve_port,
        "workers": workers,
        "access_log": False,
        "log_level": "warning",
        # a stalled body is cut at its own deadline: the drain outlasts both
        "timeout_graceful_shutdown": int(
            max(settings.serve_request_timeout_s, settings.serve_body_timeout_s)
        )
        + 5,
        # longer than a load balancer's idle timeout (60 s on the usual ones):
        # the balancer, never the server, closes an idle connection, so a
        # request is never sent on a connection the server is closing
        "timeout_keep_alive": 75,
        # slow headers are cut like slow bodies (a worker process reads the
        # deadline from the environment, as it reads its other settings)
        "http": (
            HeaderDeadlineProtocol
            if workers > 1
            else with_header_deadline(settings.serve_body_timeout_s)
        ),
        "server_header": False,
    }
