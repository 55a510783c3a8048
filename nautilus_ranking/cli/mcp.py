"""``nautilus-ranking mcp``: the MCP server for agents, over stdio or streamable HTTP (extra
``mcp``)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nautilus_ranking.cli.args import CONFIG_HELP, port


def add_parser(commands: Any, argv: Sequence[str] = ()) -> None:
    mcp = commands.add_parser(
        "mcp", help="run the MCP server for agents (extra nautilus-ranking[mcp])"
    )
    mcp.add_argument("--config", help=CONFIG_HELP)
    mcp.add_argument(
        "--transport",
        choices=("stdio", "http"),
        default="stdio",
        help="stdio (default: an agent starts this command) or http (streamable HTTP at /mcp)",
    )
    mcp.add_argument("--host", help="http: address to bind (default NAUTILUS_SERVE_HOST)")
    mcp.add_argument("--port", type=port, help="http: port (default 8001)")
    mcp.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.transport == "stdio" and (args.host or args.port):
        print("nautilus-ranking: --host and --port need --transport http", file=sys.stderr)
        return 2
    if args.config:  # as NAUTILUS_CONFIG, as serve does
        os.environ["NAUTILUS_CONFIG"] = str(Path(args.config).expanduser().resolve())
    from nautilus_ranking.mcp.server import run_mcp  # the MCP SDK only when serving it

    return run_mcp(args.transport, args.host, args.port)
