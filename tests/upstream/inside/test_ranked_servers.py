"""The ranked order reaches the agent over the broker's own servers: ``POST
/v1/request/ranked`` and the MCP tool ``nautilus_request_ranked`` of a real served
broker on loopback, on a judged set of our own (judged.py)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from conftest import AGENT, CONTEXT, claims, static_source, write_config
from judged import ARTICLES, QUESTIONS, TICKETS, WIKI, mean, ndcg_at_10
from serving import KEY, mcp_session, serving

from nautilus_ranking import NautilusSettings
from nautilus_ranking.upstream import attach_ranking

TOP_K = 10
PREFIX = "kb: "


def judged_config(folder: Path) -> Path:
    config = write_config(
        folder,
        [
            static_source("articles", ARTICLES, "kb"),
            static_source("tickets", TICKETS, "kb"),
            static_source("wiki", WIKI, "kb"),
        ],
    )
    document = yaml.safe_load(config.read_text())
    document["api"] = {"keys": [KEY]}
    config.write_text(yaml.safe_dump(document))
    return config


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return judged_config(tmp_path_factory.mktemp("judged"))


@pytest.fixture(scope="module")
def served(config: Path) -> Iterator[int]:
    env = {"NAUTILUS_RANKING_TOP_K": str(TOP_K), "NAUTILUS_DATA_DIR": str(config.parent)}
    with serving(config, env, config.parent / "serve.log") as (port, _):
        yield port


@pytest.fixture(scope="module")
def ranking_order(config: Path) -> dict[str, list[tuple[str, str]]]:
    """Each question's ranking, in-process, with the same settings: (source, id)."""
    from nautilus import Broker

    broker = Broker.from_config(config)
    try:
        attached = attach_ranking(broker, NautilusSettings(ranking_top_k=TOP_K))
        order = {}
        for question in QUESTIONS:
            response = broker.request(AGENT, PREFIX + question, dict(CONTEXT))
            ranking = attached.ranking(response.request_id)
            assert ranking is not None and ranking.fallback is None
            order[question] = [(r.source_id, r.row["id"]) for r in ranking.ranking]
    finally:
        broker.close()
    return order


def post(port: int, path: str, body: dict[str, Any], key: str | None = KEY) -> httpx.Response:
    headers = {"X-API-Key": key} if key else {}
    return httpx.post(f"http://127.0.0.1:{port}{path}", headers=headers, json=body, timeout=30)


def ask(question: str, **extra: Any) -> dict[str, Any]:
    return {"agent_id": AGENT, "intent": PREFIX + question, "context": CONTEXT, **extra}


def read_order(answer: dict[str, Any]) -> list[tuple[str, str]]:
    return [(e["source"], e["row"]["id"]) for e in answer["rows"]]


def score(order: dict[str, list[tuple[str, str]]]) -> float:
    return mean(ndcg_at_10([i for _, i in order[q]], g) for q, g in QUESTIONS.items())


def test_over_rest_the_agent_reads_the_ranking_in_its_order(
    served: int, ranking_order: dict[str, list[tuple[str, str]]]
) -> None:
    ranked, stock = {}, {}
    for question in QUESTIONS:
        answer = post(served, "/v1/request/ranked", ask(question))
        assert answer.status_code == 200, answer.text
        body = answer.json()
        ranked[question] = read_order(body)
        assert [e["rank"] for e in body["rows"]] == sorted(e["rank"] for e in body["rows"])
        assert all(isinstance(e["score"], float) and "also_from" in e for e in body["rows"])
        assert "data" not in body and "explain" not in body["rows"][0]
        plain = post(served, "/v1/request", ask(question))
        assert plain.status_code == 200 and "rows" not in plain.json()
        data = plain.json()["data"]
        stock[question] = [(s, row["id"]) for s, rows in data.items() for row in rows]
    assert ranked == ranking_order
    assert score(ranked) == score(ranking_order)
    # what the stock route's data gives an agent that reads it from the top
    assert score(stock) < score(ranked)
    assert sum(stock[q] != ranked[q] for q in QUESTIONS) >= len(QUESTIONS) // 2


def test_the_ranked_route_is_the_brokers_auth_audit_and_attestation(
    served: int, config: Path
) -> None:
    from nautilus.core.attestation_payload import compute_response_hash

    question = "how do I reset my password"
    assert post(served, "/v1/request/ranked", ask(question), key=None).status_code in (401, 403)
    assert post(served, "/v1/request/ranked", ask(question), key="wrong").status_code == 401
    assert post(served, "/v1/request/ranked", ask(question, extra=1)).status_code == 422
    body = post(served, "/v1/request/ranked", ask(question)).json()
    data = {s: [e["row"] for e in body["rows"] if e["source"] == s] for s in body["sources"]}
    token = claims(body["attestation_token"])
    assert compute_response_hash(data) == token["response_hash"]
    audit = (config.parent / "audit.jsonl").read_text()
    assert body["request_id"] in audit


def test_explain_is_opt_in(served: int) -> None:
    body = post(served, "/v1/request/ranked", ask("webhook deliveries failing", explain=True))
    assert body.status_code == 200, body.text
    first = body.json()["rows"][0]
    assert first["explain"]["similarity"] > 0 and "source_rank" in first["explain"]


def test_over_mcp_the_agent_reads_the_ranking_in_its_order(
    served: int, ranking_order: dict[str, list[tuple[str, str]]]
) -> None:

    async def calls() -> tuple[list[str], dict[str, Any], dict[str, Any]]:
        async with mcp_session(served) as session:
            tools = [t.name for t in (await session.list_tools()).tools]
            answers = {}
            for question in QUESTIONS:
                result = await session.call_tool("nautilus_request_ranked", ask(question))
                assert not result.isError, result
                answers[question] = json.loads(result.content[0].text)
            stock = await session.call_tool("nautilus_request", ask("webhook deliveries failing"))
            return tools, answers, json.loads(stock.content[0].text)

    tools, answers, stock = asyncio.run(calls())
    assert {"nautilus_request", "nautilus_request_ranked"} <= set(tools)
    assert "nautilus_feedback" not in tools  # feedback off: no tool to report use
    assert "data" in stock and "rows" not in stock  # the stock tool keeps its shape
    assert {q: read_order(a) for q, a in answers.items()} == ranking_order
    assert all(not a["truncated_sources"] for a in answers.values())  # the bound did not bind


def test_over_mcp_below_the_byte_bound_the_budget_decides(
    config: Path, ranking_order: dict[str, list[tuple[str, str]]]
) -> None:

    from nautilus_ranking.selection.tokens import count_tokens

    env = {
        "NAUTILUS_RANKING_TOP_K": str(TOP_K),
        "NAUTILUS_RANKING_MAX_TOKENS": "120",
        "NAUTILUS_DATA_DIR": str(config.parent),
    }
    question = "refund for a duplicate charge"

    async def call(port: int) -> dict[str, Any]:
        async with mcp_session(port) as session:
            result = await session.call_tool("nautilus_request_ranked", ask(question))
            assert not result.isError, result
            answer: dict[str, Any] = json.loads(result.content[0].text)
            return answer

    with serving(config, env, config.parent / "serve-budget.log") as (port, _):
        answer = asyncio.run(call(port))
    budget = answer["ranking"]["budget"]
    rows = [e["row"] for e in answer["rows"]]
    compact = [json.dumps(r, separators=(",", ":"), ensure_ascii=False) for r in rows]
    assert not answer["truncated_sources"]  # the MCP byte bound did not bind
    assert budget["rows_left_out"] > 0 and sum(count_tokens(compact)) == budget["tokens_used"]
    assert budget["tokens_used"] <= 120
    read = read_order(answer)
    assert read == [r for r in ranking_order[question] if r in read]  # the ranking's order
    assert read[0] == ranking_order[question][0]


def test_explain_over_mcp_stays_within_the_byte_bound_cutting_explanation_first(
    tmp_path: Path,
) -> None:
    """With the bound between the lean answer and the explained one, every row is
    answered and only the lowest-ranked rows lose their explanation."""

    question = "refund for a duplicate charge"
    env = {"NAUTILUS_RANKING_TOP_K": str(TOP_K), "NAUTILUS_DATA_DIR": str(tmp_path)}

    async def call(port: int, explain: bool) -> tuple[dict[str, Any], int]:
        async with mcp_session(port) as session:
            result = await session.call_tool(
                "nautilus_request_ranked", ask(question, explain=explain)
            )
            assert not result.isError, result
            text = result.content[0].text
            answer: dict[str, Any] = json.loads(text)
            return answer, len(text.encode())

    (tmp_path / "unbounded").mkdir()
    (tmp_path / "bounded").mkdir()
    unbounded = judged_config(tmp_path / "unbounded")
    with serving(unbounded, env, tmp_path / "serve-unbounded.log") as (port, _):
        lean, lean_bytes = asyncio.run(call(port, False))
        explained, explained_bytes = asyncio.run(call(port, True))
    assert explained["ranking"]["explained_rows"] == len(explained["rows"]) == TOP_K
    bound = (lean_bytes + explained_bytes) // 2
    bounded = judged_config(tmp_path / "bounded")
    document = yaml.safe_load(bounded.read_text())
    document["mcp"] = {"max_response_bytes": bound}
    bounded.write_text(yaml.safe_dump(document))
    with serving(bounded, env, tmp_path / "serve-bounded.log") as (port, _):
        held, held_bytes = asyncio.run(call(port, True))
    assert held_bytes <= bound < explained_bytes
    assert read_order(held) == read_order(lean)  # every row: explanation went first
    kept = ["explain" in e for e in held["rows"]]
    assert 0 < sum(kept) < TOP_K and kept == sorted(kept, reverse=True)
    assert held["ranking"]["explained_rows"] == sum(kept)
    assert held["attestation_token"].count(".") == 2  # the attestation is never cut


def test_the_attestation_kept_out_of_the_text_is_still_verifiable(tmp_path: Path) -> None:
    """``NAUTILUS_UPSTREAM_ATTESTATION_IN_META``: the token leaves the text the agent reads
    for the result's ``_meta``, whole; its signature checks out against the public half
    of the broker's attestation key (``attestation.private_key_path``) and the docs'
    recipe recomputes its ``response_hash`` from the rows. (The broker's
    ``/v1/keys/jwks.json`` publishes its session-token keys, not this one.)"""
    import hashlib

    import jwt
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from nautilus.core.attestation_payload import compute_response_hash

    from nautilus_ranking.selection.tokens import count_tokens
    from nautilus_ranking.upstream.ranked_answer import ATTESTATION_META

    question = "refund for a duplicate charge"
    folder = tmp_path / "broker"
    folder.mkdir()
    config = judged_config(folder)
    signing = Ed25519PrivateKey.generate()
    (folder / "attestation.pem").write_bytes(
        signing.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    document = yaml.safe_load(config.read_text())
    document["attestation"] = {"enabled": True, "private_key_path": "attestation.pem"}
    config.write_text(yaml.safe_dump(document))

    async def call(port: int) -> tuple[str, dict[str, Any] | None]:
        async with mcp_session(port) as session:
            result = await session.call_tool("nautilus_request_ranked", ask(question))
            assert not result.isError, result
            return result.content[0].text, result.meta

    base = {"NAUTILUS_RANKING_TOP_K": str(TOP_K), "NAUTILUS_DATA_DIR": str(tmp_path)}
    with serving(config, base, tmp_path / "serve-text.log") as (port, _):
        before, _ = asyncio.run(call(port))
    meta_env = {**base, "NAUTILUS_UPSTREAM_ATTESTATION_IN_META": "true"}
    with serving(config, meta_env, tmp_path / "serve-meta.log") as (port, _):
        after, meta = asyncio.run(call(port))
    answer = json.loads(after)
    assert "attestation_token" in json.loads(before) and "attestation_token" not in answer
    assert meta is not None
    token = meta[ATTESTATION_META]
    assert answer["attestation_token_sha256"] == hashlib.sha256(token.encode()).hexdigest()
    # the signature, against the attestation key's public half
    public = signing.public_key()
    claims = jwt.decode(token, public, algorithms=["EdDSA"], options={"verify_aud": False})
    # the docs' recipe: response_hash recomputed from the rows the agent read
    data = {s: [e["row"] for e in answer["rows"] if e["source"] == s] for s in answer["sources"]}
    assert compute_response_hash(data) == claims["response_hash"]
    parts = answer["ranking"]["answer_tokens"]
    tokens_before, tokens_after = count_tokens([before, after])
    assert tokens_after < tokens_before and parts["rows"] + parts["envelope"] <= tokens_after
    print(
        f"ranked answer: {tokens_before} tokens with the attestation in the text, "
        f"{tokens_after} without (rows {parts['rows']}, envelope {parts['envelope']})"
    )


def test_the_ranked_tool_alone_is_listed_when_the_setting_says_so(
    config: Path, tmp_path: Path
) -> None:
    """``NAUTILUS_UPSTREAM_REQUEST_TOOLS=ranked``: ``tools/list`` shows
    ``nautilus_request_ranked`` without the stock ``nautilus_request`` (whose definition
    is ten times its size), which is not callable either; the ranked tool answers, the
    broker's other tools stay, and REST keeps both routes."""

    async def tools_and_calls(port: int) -> tuple[list[str], bool, str, bool]:
        async with mcp_session(port) as session:
            tools = [t.name for t in (await session.list_tools()).tools]
            ranked = await session.call_tool("nautilus_request_ranked", ask("refund"))
            stock = await session.call_tool("nautilus_request", ask("refund"))
            return tools, ranked.isError, stock.content[0].text, stock.isError

    base = {"NAUTILUS_RANKING_TOP_K": str(TOP_K), "NAUTILUS_DATA_DIR": str(tmp_path)}
    with serving(config, base, tmp_path / "serve-both.log") as (port, _):
        both, *_ = asyncio.run(tools_and_calls(port))
    env = {**base, "NAUTILUS_UPSTREAM_REQUEST_TOOLS": "ranked"}
    with serving(config, env, tmp_path / "serve-ranked.log") as (port, _):
        tools, ranked_error, stock_text, stock_error = asyncio.run(tools_and_calls(port))
        assert post(port, "/v1/request", ask("refund")).status_code == 200
        assert post(port, "/v1/request/ranked", ask("refund")).status_code == 200
    assert {"nautilus_request", "nautilus_request_ranked"} <= set(both)
    assert "nautilus_request" not in tools and "nautilus_request_ranked" in tools
    assert set(tools) == set(both) - {"nautilus_request"}
    assert not ranked_error
    assert stock_error and "nautilus_request" in stock_text
