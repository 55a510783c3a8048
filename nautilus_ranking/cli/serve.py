"""``nautilus-ranking serve``: the HTTP service (extra ``serve``)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from nautilus_ranking.cli.args import CONFIG_HELP, count, port


def add_parser(commands: Any, argv: Sequence[str] = ()) -> None:
    serve = commands.add_parser(
        "serve", help="run the HTTP service (extra nautilus-ranking[serve])"
    )
    serve.add_argument("--config", help=CONFIG_HELP)
    serve.add_argument("--host", help="address to bind (default NAUTILUS_SERVE_HOST, 127.0.0.1)")
    serve.add_argument("--port", type=port, help="port (default NAUTILUS_SERVE_PORT, 8000)")
    serve.add_argument(
        "--workers",
        type=count,
        metavar="N",
        help="worker processes (default NAUTILUS_SERVE_WORKERS, 1)",
    )
    serve.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from nautilus_ranking.service.server import serve  # the web stack only when serving

    return serve(args.host, args.port, args.workers, args.config)
