"""``python -m nautilus_ranking.upstream serve ...``: ``nautilus serve``, ranked.

The broker's ``serve`` builds its broker with ``broker_for_serve`` (its config checks,
then ``Broker.from_config``) and hands it to its own FastAPI app and MCP server, which
call ``arequest``; it has no hook for a synthesizer. This runs the broker's own
command line with that one step wrapped: the broker it builds gets
:func:`~nautilus_ranking.upstream.attach.attach_ranking` (knobs from the
``NAUTILUS_*`` environment) before anything binds. Every flag is ``nautilus``'s own.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

from nautilus_ranking.upstream.attach import attach_ranking

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


def main(argv: list[str] | None = None) -> int:
    """Run ``nautilus`` with ``argv`` (default: this command's arguments); a broker it
    builds to serve is ranked."""
    cli = broker_cli()
    build = cli.broker_for_serve

    def broker_for_serve(config_path: Path, *, air_gapped: bool) -> Any:
        broker = build(config_path, air_gapped=air_gapped)
        attach_ranking(broker)
        return broker

    cli.broker_for_serve = broker_for_serve
    return int(cli.main(sys.argv[1:] if argv is None else argv) or 0)
