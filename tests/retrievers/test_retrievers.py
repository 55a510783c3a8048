"""The LangChain and LlamaIndex retrievers, with the real packages: over an in-process
broker and over a running `nautilus-ranking serve`, sync and async, each giving the rows of
`nautilus-ranking query --json` in its order."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from plain_environment import plain_environment

from nautilus_ranking.broker import Broker
from nautilus_ranking.settings.model import NautilusSettings
from tools.servers import Server, running, wait_ready

pytest.importorskip("langchain_core")
pytest.importorskip("llama_index.core")
from cli_process import run_nautilus

from nautilus_ranking.errors import NautilusError
from nautilus_ranking.retrievers import langchain, llamaindex

QUERY = "orders-db disk full"
SETTINGS = {
    "NAUTILUS_RANKING_TOP_K": "6",
    "NAUTILUS_RANKING_IDF": "true",
    "NAUTILUS_SOURCE_BOOSTS": "runbooks:medium",
}
Row = tuple[str, Any, float]


def cli(*args: str) -> list[Row]:
    env = plain_environment()
    env.update(SETTINGS, NAUTILUS_DATA_DIR=os.environ["NAUTILUS_DATA_DIR"])
    out = run_nautilus("query", QUERY, "--json", *args, env=env, check=True)
    return [(r["source_id"], r["id"], r["score"]) for r in json.loads(out.stdout)["ranking"]]


def of_documents(documents: list[Any]) -> list[Row]:
    for d in documents:
        assert d.page_content and "also_from" in d.metadata["explanation"]  # lean: no components
        assert d.id == f"{d.metadata['source']}:{d.metadata['id']}"
    return [(d.metadata["source"], d.metadata["id"], d.metadata["score"]) for d in documents]


def of_nodes(nodes: list[Any]) -> list[Row]:
    for n in nodes:
        assert n.score == n.node.metadata["score"] and n.node.get_content()
        llm_view = n.node.get_metadata_str(mode="llm")
        assert "source" in llm_view and "explanation" not in llm_view
    return [(n.node.metadata["source"], n.node.metadata["id"], n.score) for n in nodes]


@pytest.fixture
def broker(monkeypatch: pytest.MonkeyPatch) -> Iterator[Broker]:
    for name, value in SETTINGS.items():
        monkeypatch.setenv(name, value)
    with Broker.from_config(None, NautilusSettings()) as built:
        yield built


def test_in_process_retrievers_give_the_cli_rows_in_order(broker: Broker) -> None:
    expected = cli()
    assert len(expected) == 6
    lc = langchain.NautilusRetriever(broker=broker)
    assert of_documents(lc.invoke(QUERY)) == expected
    assert of_documents(asyncio.run(lc.ainvoke(QUERY))) == expected
    li = llamaindex.NautilusRetriever(broker=broker)
    assert of_nodes(li.retrieve(QUERY)) == expected
    assert of_nodes(asyncio.run(li.aretrieve(QUERY))) == expected
    explained = langchain.NautilusRetriever(broker=broker, explain=True).invoke(QUERY)
    assert all(
        set(d.metadata["explanation"]) >= {"similarity", "boost_bump"} for d in explained
    )  # the score components come with explain, as in a JSON answer


def test_with_ranking_off_the_rows_pass_through_unscored() -> None:
    """No ranking knob: the sources' rows in their order, with no score (not a 0)."""
    env = plain_environment()
    env["NAUTILUS_DATA_DIR"] = os.environ["NAUTILUS_DATA_DIR"]
    out = run_nautilus("query", QUERY, "--json", env=env, check=True)
    expected = [(r["source_id"], r["id"]) for r in json.loads(out.stdout)["ranking"]]
    with Broker.from_config(None, NautilusSettings()) as plain:
        nodes = llamaindex.NautilusRetriever(broker=plain).retrieve(QUERY)
        documents = langchain.NautilusRetriever(broker=plain).invoke(QUERY)
    assert [(n.node.metadata["source"], n.node.metadata["id"]) for n in nodes] == expected
    assert [(d.metadata["source"], d.metadata["id"]) for d in documents] == expected
    assert {n.score for n in nodes} == {None} and len(expected) > 6
    assert all(
        "embedding" not in d.metadata["fields"] and "embedding" not in d.page_content
        for d in documents
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running(tmp_path_factory.mktemp("retrievers"), SETTINGS) as srv:
        assert wait_ready(srv).status_code == 200, srv.logs()
        yield srv


def test_http_retrievers_send_overrides_and_give_the_cli_rows_in_order(server: Server) -> None:
    expected = cli("--top-k", "4", "--boost", "graph:high")
    assert len(expected) == 4
    knobs: dict[str, Any] = {"top_k": 4, "boosts": {"graph": "high"}}
    lc = langchain.NautilusRetriever(url=server.url, **knobs)
    assert of_documents(lc.invoke(QUERY)) == expected
    assert of_documents(asyncio.run(lc.ainvoke(QUERY))) == expected
    li = llamaindex.NautilusRetriever(url=server.url, **knobs)
    assert of_nodes(li.retrieve(QUERY)) == expected
    assert of_nodes(asyncio.run(li.aretrieve(QUERY))) == expected
    assert of_nodes(llamaindex.NautilusRetriever(url=server.url).retrieve(QUERY)) == cli()


def test_a_refused_query_or_a_bad_setup_is_one_clear_error(server: Server, broker: Broker) -> None:
    bad = langchain.NautilusRetriever(url=server.url, boosts={"graph": "hgih"})
    with pytest.raises(NautilusError, match=r"422: boosts: 'graph:hgih'.*-low, low, medium, high"):
        bad.invoke(QUERY)
    with pytest.raises(NautilusError, match="ConnectError"):
        llamaindex.NautilusRetriever(url="http://127.0.0.1:9").retrieve(QUERY)
    with pytest.raises(ValueError, match="exactly one of broker="):
        llamaindex.NautilusRetriever()
    with pytest.raises(NautilusError, match=r"invalid request: boosts: 'graph:hgih'"):
        langchain.NautilusRetriever(broker=broker, boosts={"graph": "hgih"}).invoke(QUERY)


def test_in_process_retrievers_take_the_same_overrides_as_the_cli(broker: Broker) -> None:
    expected = cli(
        "--top-k", "3", "--boost", "graph:high", "--source", "graph", "--source", "tickets"
    )
    knobs: dict[str, Any] = {
        "top_k": 3,
        "boosts": {"graph": "high"},
        "sources": ["graph", "tickets"],
    }
    assert (
        of_documents(langchain.NautilusRetriever(broker=broker, **knobs).invoke(QUERY)) == expected
    )
    assert (
        of_nodes(asyncio.run(llamaindex.NautilusRetriever(broker=broker, **knobs).aretrieve(QUERY)))
        == expected
    )


def test_llamaindex_retrieval_makes_no_network_call(tmp_path: Path) -> None:
    """Any connection but loopback raises in this child, and LlamaIndex's NLTK check
    would print its download error: neither happens."""
    script = """
import socket, sys
real = socket.socket.connect
def guarded(self, address):
    if isinstance(address, tuple) and address[0] not in ("127.0.0.1", "::1", "localhost"):
        raise OSError(f"network call to {address}")
    return real(self, address)
socket.socket.connect = guarded
from nautilus_ranking.broker import Broker
from nautilus_ranking.settings.model import NautilusSettings
from nautilus_ranking.retrievers.llamaindex import NautilusRetriever
from nautilus_ranking.retrievers.langchain import NautilusRetriever as LC
broker = Broker.from_config(None, NautilusSettings(ranking_top_k=3))
nodes = NautilusRetriever(broker=broker).retrieve("orders-db disk full")
docs = LC(broker=broker).invoke("orders-db disk full")
print(len(nodes), len(docs), nodes[0].node.get_content(metadata_mode="all")[:40])
"""
    env = plain_environment()
    env["NAUTILUS_DATA_DIR"] = str(tmp_path / "data")
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("3 3 ") and "NLTK" not in out.stdout + out.stderr
