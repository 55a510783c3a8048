"""A token budget holds every way in: the rows handed over — as each way hands them over —
never exceed ``max_tokens`` tokens (counted here with the tokenizer itself), except the
flagged case of a first row over the budget on its own. The CLI and a real ``nautilus
serve`` carry JSON entries, ``nautilus-ranking mcp`` one text line a result. A retriever
counts its rows as the JSON answer does, so in-process and over HTTP it keeps the same
rows."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import toktok

from nautilus_ranking.broker import Broker
from nautilus_ranking.settings.model import NautilusSettings
from tools.servers import NAUTILUS, running

pytest.importorskip("mcp")
from cli_process import run_nautilus
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from plain_environment import plain_environment

from nautilus_ranking.retrievers import langchain

QUERY = "users keep getting logged out of their sessions"
SETTINGS = {"NAUTILUS_RANKING_TOP_K": "10", "NAUTILUS_RANKING_IDF": "true"}
BUDGETS = (60, 400, 1500)


def count(texts: list[str]) -> list[int]:
    return list(toktok.batch_count(texts, "o200k_base"))


def check(
    counts: list[int], budget: dict[str, Any] | None, max_tokens: int, unbudgeted: int
) -> None:
    assert budget is not None and budget["max_tokens"] == max_tokens
    assert budget["tokens_used"] == sum(counts)
    if budget["first_row_over_budget"]:
        assert len(counts) == 1 and counts[0] > max_tokens
    else:
        assert sum(counts) <= max_tokens
    assert budget["rows_left_out"] == unbudgeted - len(counts)


def json_entries(body: dict[str, Any]) -> list[str]:
    """Each ranking entry with its row (the next of its source in ``data``), as JSON."""
    seen: dict[str, int] = {}
    texts = []
    for entry in body["ranking"]:
        sid = entry["source_id"]
        row = body["data"][sid][seen.get(sid, 0)]
        seen[sid] = seen.get(sid, 0) + 1
        texts.append(json.dumps({**entry, "row": row}, sort_keys=True, separators=(",", ":")))
    return texts


def test_every_way_in_keeps_within_the_budget(tmp_path: Path) -> None:
    env = plain_environment()
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    env.update(SETTINGS, NAUTILUS_DATA_DIR=str(tmp_path / "data"))

    def cli(*args: str) -> dict[str, Any]:
        out = run_nautilus("query", QUERY, "--json", *args, env=env, check=True)
        body: dict[str, Any] = json.loads(out.stdout)
        return body

    full = len(cli()["ranking"])
    assert full == 10
    for n in BUDGETS:
        body = cli("--max-tokens", str(n))
        check(count(json_entries(body)), body["budget"], n, full)
        assert body["budget"]["tokenizer"] == "o200k_base"  # the counts are exact: said so
        assert body["budget"]["counted_as"] == "json_entry"  # and what they count
    assert cli("--max-tokens", "60")["budget"]["first_row_over_budget"] is True

    over_http: dict[int, list[str | None]] = {}
    with running(tmp_path, SETTINGS) as server:
        for n in BUDGETS:
            body = httpx.post(
                server.url + "/v1/query", timeout=30, json={"query": QUERY, "max_tokens": n}
            ).json()
            check(count(json_entries(body)), body["budget"], n, full)
            assert body["budget"]["tokenizer"] == "o200k_base"
            retriever = langchain.NautilusRetriever(url=server.url, max_tokens=n)
            over_http[n] = [d.id for d in retriever.invoke(QUERY)]

    async def over_mcp() -> None:
        params = StdioServerParameters(command=NAUTILUS, args=["mcp"], env=env, cwd=tmp_path)
        with (tmp_path / "mcp.log").open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                for n in (40, 120, 400):
                    result = await client.call_tool("search", {"query": QUERY, "max_tokens": n})
                    assert not result.is_error, result.content
                    out = result.structured_content
                    text = "".join(getattr(b, "text", "") for b in result.content)
                    lines = text.splitlines()[1 : 1 + len(out["results"])]  # one a result
                    assert [line.split(".")[0] for line in lines] == [
                        str(r["rank"]) for r in out["results"]
                    ]
                    check(count(lines), out["budget"], n, full)
                    assert f"budget: {out['budget']['tokens_used']} of {n} tokens (exact)" in text
                    assert out["budget"]["tokenizer"] == "o200k_base"
                    assert out["budget"]["counted_as"] == "mcp_line"

    asyncio.run(over_mcp())

    with pytest.MonkeyPatch.context() as patch:
        for name, value in SETTINGS.items():
            patch.setenv(name, value)
        with Broker.from_config(None, NautilusSettings()) as broker:
            for n in BUDGETS:
                documents = langchain.NautilusRetriever(broker=broker, max_tokens=n).invoke(QUERY)
                assert 1 <= len(documents) <= full
                # one rule: the rows a JSON answer's budget keeps, whichever way the
                # retriever reaches the ranking
                assert [d.id for d in documents] == over_http[n]


def test_exact_counts_are_labelled_exact_in_the_text_too(tmp_path: Path) -> None:
    env = plain_environment()
    env.update(SETTINGS, NAUTILUS_DATA_DIR=str(tmp_path / "data"))
    shown = run_nautilus("query", QUERY, "--max-tokens", "1500", env=env)
    assert shown.returncode == 0, shown.stderr
    line = next(x for x in shown.stdout.splitlines() if x.startswith("budget: "))
    assert "tokens (exact, o200k_base)" in line and "estimated" not in line
