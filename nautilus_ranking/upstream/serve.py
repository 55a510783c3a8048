"""``python -m nautilus_ranking.upstream serve ...``: ``nautilus serve``, ranked.

The broker's ``serve`` builds its broker with ``broker_for_serve`` (its config checks,
then ``Broker.from_config``) and hands it to its own FastAPI app (``create_app``) and
MCP server (``create_server``), which call ``arequest``; it has no hook for a
synthesizer. This runs the broker's own command line with three steps wrapped:

- the broker it builds to serve gets
  :func:`~nautilus_ranking.upstream.attach.attach_ranking` (knobs from the
  ``NAUTILUS_*`` environment; a confidence fit checked against the file served) before
  anything binds, and a refusal ends the command as the broker's own refused config
  does (its message, exit 2); it keeps no rankings
  (``keep=0``): nothing in this process reads the accessor, and the ranked route
  reads its ranking from the request itself;
- the FastAPI app gets ``POST /v1/request/ranked`` and the MCP server the
  ``nautilus_request_ranked`` tool (:mod:`.ranked_servers`), beside the stock ones.

A SIGTERM (a container's stop) ends the process through Python once the servers have
shut down, as a SIGINT does, so what is queued for the feedback log is written on the
way out (uvicorn raises the signal it stopped on again, and SIGTERM's default action
would end the process there, before its exit handlers).

Every flag is ``nautilus``'s own. A SIGHUP reload builds its candidate broker with
the broker's own ``broker_for_serve`` (in ``nautilus.cli.serve``, not wrapped here)
and adopts its sources into the running, ranked broker, whose reload listener checks
the boosts again (:mod:`.attach`).
"""

from __future__ import annotations

import functools
import importlib
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nautilus_ranking.settings.model import ConfigError
from nautilus_ranking.upstream.attach import attach_ranking
from nautilus_ranking.upstream.ranked_servers import add_ranked_route, add_ranked_tool
from nautilus_ranking.upstream.version import seam_missing

INSTALL_HINT = (
    "the Nautilus broker is not installed: pip install 'nautilus-ranking[nautilus]' "
    "(Python 3.13 or later)"
)


def broker_cli() -> Any:
    """The broker's ``nautilus.cli`` module; ImportError naming the extra without it."""
    try:
        return importlib.import_module("nautilus.cli")
    except ImportError as exc:
        raise ImportError(INSTALL_HINT) from exc


def _wrap_factory(module_name: str, name: str, seam: str, add: Callable[[Any, Any], bool]) -> None:
    """Wrap ``module_name.name`` (an app or server factory) so that what it builds gets
    ``add`` applied (with the broker it serves, its ``existing_broker``); one warning
    and nothing wrapped when it is not there."""
    try:
        module = importlib.import_module(module_name)
        factory = getattr(module, name)
    except (ImportError, AttributeError):
        seam_missing(seam, "served as the broker serves: no ranked route or tool")
        return

    @functools.wraps(factory)
    def built(*args: Any, **kwargs: Any) -> Any:
        made = factory(*args, **kwargs)
        add(made, kwargs.get("existing_broker"))
        return made

    setattr(module, name, built)


def main(argv: list[str] | None = None) -> int:
    """Run ``nautilus`` with ``argv`` (default: this command's arguments); a broker it
    builds to serve is ranked, and its servers get the ranked route and tool."""
    cli = broker_cli()
    build = getattr(cli, "broker_for_serve", None)
    if not callable(build):
        seam_missing(
            "nautilus.cli.broker_for_serve",
            "served as the broker serves, unranked: nothing to attach to",
        )
        return int(cli.main(sys.argv[1:] if argv is None else argv) or 0)

    def broker_for_serve(config_path: Path, *, air_gapped: bool) -> Any:
        broker = build(config_path, air_gapped=air_gapped)
        try:
            attach_ranking(broker, keep=0, config_path=config_path)
        except ConfigError as exc:  # refused as the broker refuses a config: before binding
            broker.close()
            serve = importlib.import_module("nautilus.cli.serve")
            refused = getattr(serve, "ConfigRefusedError", None)
            if refused is None:
                raise
            raise refused(f"nautilus-ranking: {exc}") from None
        return broker

    cli.broker_for_serve = broker_for_serve
    signal.signal(signal.SIGTERM, _exit_through_python)
    _wrap_factory(
        "nautilus.transport.fastapi_app",
        "create_app",
        "nautilus.transport.fastapi_app.create_app",
        add_ranked_route,
    )
    _wrap_factory(
        "nautilus.transport.mcp_server",
        "create_server",
        "nautilus.transport.mcp_server.create_server",
        add_ranked_tool,
    )
    return int(cli.main(sys.argv[1:] if argv is None else argv) or 0)


def _exit_through_python(signum: int, frame: object) -> None:
    """SIGTERM, once uvicorn has stopped the servers and raised it again: exit with
    status 0, running the process's exit handlers (the feedback log's last writes)."""
    raise SystemExit(0)
