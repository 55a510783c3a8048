"""Pages under a token budget, through a real ``serve``, the command line and MCP: the
next page starts at the first ranked row the budget left out, so paging to the end hands
over every row of the ranking once, less only the rows reported too large to fit a page
alone. A cursor is honoured by another way in that counts rows alike (``serve`` and the
command line both count JSON entries) and refused by one that counts them otherwise
(MCP counts a result's text line)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from cli_process import run_nautilus
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from plain_environment import plain_environment

from tools.servers import NAUTILUS, running

pytestmark = pytest.mark.slow

QUERY = "card payments failing with timeouts at checkout"
SETTINGS = {
    "NAUTILUS_RANKING_IDF": "true",
    "NAUTILUS_RANKING_TOP_K": "3",
    "NAUTILUS_RANKING_MAX_TOKENS": "180",
    "NAUTILUS_CURSOR_KEY": "c" * 40,
}

Page = tuple[list[int], list[int], str | None]  # ranks handed over, too large, next


def check_pages(pages: list[Page], total: int) -> None:
    """No row twice; each page starts at the first row no earlier page handed over or
    reported; all pages together: every rank, less only the reported ones."""
    done: list[int] = []
    for ranks, too_large, _ in pages:
        assert not set(ranks) & set(done) and not set(too_large) & set(done)
        pending = [r for r in range(1, total + 1) if r not in done]
        shown = sorted(ranks + too_large)
        assert not shown or shown[0] == pending[0]
        done += ranks + too_large
    assert sorted(done) == list(range(1, total + 1))
    assert pages[-1][2] is None


def test_pages_under_a_budget_skip_nothing_over_http_the_command_line_and_mcp(
    tmp_path: Path,
) -> None:
    env = plain_environment()
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    env.update(SETTINGS, NAUTILUS_DATA_DIR=str(tmp_path / "data"))

    def cli(*args: str) -> dict[str, Any]:
        out = run_nautilus("query", QUERY, "--json", *args, env=env)
        assert out.returncode == 0, out.stderr
        body: dict[str, Any] = json.loads(out.stdout)
        return body

    def page_of(body: dict[str, Any]) -> Page:
        ranks = [e["rank"] for e in body["ranking"]]
        return ranks, body["budget"]["too_large_ranks"], body["page"]["next_cursor"]

    with running(tmp_path, SETTINGS) as server:

        def ask(body: dict[str, Any]) -> dict[str, Any]:
            answer = httpx.post(server.url + "/v1/query", json={"query": QUERY, **body}, timeout=30)
            assert answer.status_code == 200, answer.text
            out: dict[str, Any] = answer.json()
            return out

        whole = ask({"top_k": 1000, "max_tokens": 10**6})["ranking"]
        by_rank = {e["rank"]: e["id"] for e in whole}
        pages: list[Page] = []
        cursors: list[str] = []
        body: dict[str, Any] = {"page": 1}
        while True:
            answer = ask(body)
            pages.append(page_of(answer))
            assert [e["id"] for e in answer["ranking"]] == [by_rank[r] for r in pages[-1][0]]
            if pages[-1][2] is None:
                break
            cursors.append(pages[-1][2])
            body = {"cursor": pages[-1][2]}
        check_pages(pages, len(whole))
        # skip-and-continue happened: a page handed over a row below one it left out,
        # and that row opened the next page
        gaps = [
            i
            for i, (ranks, _, _) in enumerate(pages)
            if ranks != list(range(ranks[0], ranks[0] + len(ranks)))
        ]
        assert gaps, pages
        skipped = next(
            r
            for r in range(pages[gaps[0]][0][0], pages[gaps[0]][0][-1])
            if r not in pages[gaps[0]][0]
        )
        assert pages[gaps[0] + 1][0][0] == skipped

        # the command line pages on from the server's cursor as the server did
        following = cli("--cursor", cursors[gaps[0] - 1])
        assert page_of(following) == pages[gaps[0]]
        assert page_of(cli("--cursor", following["page"]["next_cursor"])) == pages[gaps[0] + 1]
        # and says what it counted and what it left out
        assert following["budget"]["tokenizer"] == "o200k_base"

    async def over_mcp() -> None:
        params = StdioServerParameters(command=NAUTILUS, args=["mcp"], env=env, cwd=tmp_path)
        with (tmp_path / "mcp.log").open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                mcp_pages: list[Page] = []
                arguments: dict[str, Any] = {"query": QUERY, "page": 1}
                while True:
                    result = await client.call_tool("search", arguments)
                    assert not result.is_error, result.content
                    out = result.structured_content
                    ranks = [r["rank"] for r in out["results"]]
                    nxt = out["page"]["next_cursor"]
                    mcp_pages.append((ranks, out["budget"]["too_large_ranks"], nxt))
                    if nxt is None:
                        break
                    arguments = {"query": QUERY, "cursor": nxt}
                check_pages(mcp_pages, len(whole))
                # a cursor of the JSON way in: its earlier pages are not MCP's
                refused = await client.call_tool(
                    "search", {"query": QUERY, "cursor": cursors[gaps[0]]}
                )
                assert refused.is_error
                error = refused.structured_content["error"]
                assert error["field"] == "cursor" and "way of counting rows" in error["detail"]

    asyncio.run(over_mcp())
