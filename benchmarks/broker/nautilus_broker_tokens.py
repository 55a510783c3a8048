"""What the ranked MCP tool costs an agent in tokens: its definition (as ``tools/list``
gives it: name, description, input schema) and one answer, beside the stock
``nautilus_request`` tool's, counted in ``o200k_base`` tokens (exact, with the
``tokens`` extra; tiktoken's counts).

One broker (nautilus-rkm 0.3.0, attestation on) over the demo's four collections as
``static`` sources (78 rows), ``NAUTILUS_RANKING_TOP_K=10``, the question "ops:
orders-db disk full". The stock tool's answer is what its SDK sends: the response as
indented JSON text and again as structured content; the ranked tool's is one text block
of compact JSON.

    python -m benchmarks.broker.nautilus_broker_tokens [--out docs/nautilus-broker.md]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from benchmarks.broker.inside import demo_sources, run_inside, write_config

QUESTION = "ops: orders-db disk full"


def _inside(folder: Path) -> dict[str, Any]:
    import asyncio

    from nautilus import Broker
    from nautilus.transport.mcp_server import create_server

    from nautilus_ranking import NautilusSettings
    from nautilus_ranking.selection.tokens import count_tokens, tokenizer_name
    from nautilus_ranking.upstream import attach_ranking
    from nautilus_ranking.upstream.ranked_servers import RANKED_TOOL, STOCK_TOOL, add_ranked_tool

    config = write_config(folder, demo_sources())
    broker = Broker.from_config(config)
    attach_ranking(broker, NautilusSettings(ranking_top_k=10), keep=0)
    mcp = create_server(None, existing_broker=broker)
    add_ranked_tool(mcp)
    # a session id of its own: outside a real MCP request the stock tool has no transport one
    context = {"purpose": "support", "session_id": "tokens"}
    arguments = {"agent_id": "agent-alpha", "intent": QUESTION, "context": context}

    def text(value: Any) -> str:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)

    async def run() -> dict[str, Any]:
        await broker.setup()
        tools = {t.name: t for t in await mcp.list_tools()}
        out: dict[str, Any] = {}
        for name in (STOCK_TOOL, RANKED_TOOL):
            tool = tools[name].model_dump(mode="json", exclude_none=True)
            result = await mcp.call_tool(name, arguments)
            blocks, structured = result if isinstance(result, tuple) else (result, None)
            answer = "".join(b.text for b in blocks) + (text(structured) if structured else "")
            rows = json.loads(blocks[0].text)
            rows = rows.get("rows") or [r for rs in rows["data"].values() for r in rs]
            out[name] = {
                "definition": count_tokens([text(tool)], True)[0],
                "answer": count_tokens([answer], True)[0],
                "rows": len(rows),
            }
        out["tokenizer"] = tokenizer_name()
        return out

    try:
        return asyncio.run(run())
    finally:
        broker.close()


def report(result: dict[str, Any], command: str) -> str:
    lines = [
        "<!-- nautilus-broker-tokens:begin -->",
        f"| tool | definition tokens | one answer: rows | tokens ({result['tokenizer']}) |",
        "|---|---|---|---|",
    ]
    for name in ("nautilus_request", "nautilus_request_ranked"):
        r = result[name]
        lines.append(f"| `{name}` | {r['definition']} | {r['rows']} | {r['answer']} |")
    lines += ["", f"`{command}`", "<!-- nautilus-broker-tokens:end -->"]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="write the table into this markdown page")
    parser.add_argument("--inside", type=Path, help=argparse.SUPPRESS)  # in the broker's venv
    args = parser.parse_args()
    if args.inside is not None:
        print(json.dumps(_inside(args.inside)))
        return 0
    import tempfile

    from benchmarks.sections import write_section
    from tools.broker_venv import broker_venv

    venv = broker_venv(extras=("tokens",))
    with tempfile.TemporaryDirectory() as folder:
        result = run_inside(venv.python, "benchmarks.broker.nautilus_broker_tokens", folder)
    if result is None:
        return 1
    section = report(result, "python -m benchmarks.broker.nautilus_broker_tokens")
    print(section)
    if args.out is not None:
        write_section(args.out, section, "nautilus-broker-tokens")
    return 0


if __name__ == "__main__":
    sys.exit(main())
