"""Under a token budget, a retriever hands a row too large for it over as its passage
and says so in the hit's metadata (offsets, the row's length, the handle); the same
retriever given ``whole=[handle]`` hands that row over whole — in-process and over a
running ``serve`` alike."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from long_rows import LONG, QUERY, write_sources

from nautilus_ranking.broker import Broker
from nautilus_ranking.settings.model import NautilusSettings
from tools.servers import Server, running, wait_ready

pytest.importorskip("langchain_core")
pytest.importorskip("llama_index.core")

from nautilus_ranking.retrievers import langchain, llamaindex

#: Room for a passage and a short row, not for the long row whole (about 1,100 tokens).
KNOBS: dict[str, Any] = {"top_k": 5, "max_tokens": 400}


def check_part(documents: list[Any]) -> str:
    """The long row's document is its passage, marked; the handle that gets it whole."""
    [doc] = [d for d in documents if d.metadata["id"] == "long"]
    part = doc.metadata["passage"]
    assert part["field"] == "body" and part["length"] == len(LONG)
    assert part["end"] - part["start"] < part["length"]  # the row is longer
    assert doc.metadata["fields"]["body"] == LONG[part["start"] : part["end"]]
    assert LONG[part["start"] : part["end"]] in doc.page_content and len(doc.page_content) < len(
        LONG
    )
    assert "passage" not in doc.metadata["explanation"]
    [short] = [d for d in documents if d.metadata["id"] == "short"]
    assert "passage" not in short.metadata  # handed over whole: nothing to say
    handle: str = part["handle"]
    assert handle.startswith("row:")
    return handle


def check_whole(documents: list[Any]) -> None:
    [doc] = [d for d in documents if d.metadata["id"] == "long"]
    assert doc.metadata["fields"]["body"] == LONG and "passage" not in doc.metadata
    assert LONG in doc.page_content


def check_nodes(nodes: list[Any], handle: str) -> None:
    """LlamaIndex: the passage is metadata an LLM reads, never embedded."""
    [node] = [n.node for n in nodes if n.node.metadata["id"] == "long"]
    assert node.metadata["passage"]["handle"] == handle
    assert handle in node.get_metadata_str(mode="llm")
    assert handle not in node.get_metadata_str(mode="embed")


@pytest.fixture
def sources(tmp_path: Path) -> Path:
    return write_sources(tmp_path)


def test_in_process_a_long_row_is_a_marked_passage_and_whole_when_asked(sources: Path) -> None:
    with Broker.from_config(str(sources), NautilusSettings()) as broker:
        handle = check_part(langchain.NautilusRetriever(broker=broker, **KNOBS).invoke(QUERY))
        check_nodes(llamaindex.NautilusRetriever(broker=broker, **KNOBS).retrieve(QUERY), handle)
        again = langchain.NautilusRetriever(broker=broker, whole=[handle], **KNOBS)
        check_whole(again.invoke(QUERY))
        check_whole(asyncio.run(again.ainvoke(QUERY)))
        nodes = llamaindex.NautilusRetriever(broker=broker, whole=[handle], **KNOBS).retrieve(QUERY)
        [node] = [n.node for n in nodes if n.node.metadata["id"] == "long"]
        assert node.metadata["fields"]["body"] == LONG and "passage" not in node.metadata


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("retriever-passages")
    with running(tmp, {"NAUTILUS_CONFIG": str(write_sources(tmp))}) as srv:
        assert wait_ready(srv).status_code == 200, srv.logs()
        yield srv


def test_over_http_a_long_row_is_a_marked_passage_and_whole_when_asked(server: Server) -> None:
    lc = langchain.NautilusRetriever(url=server.url, **KNOBS)
    handle = check_part(lc.invoke(QUERY))
    check_part(asyncio.run(lc.ainvoke(QUERY)))
    check_nodes(llamaindex.NautilusRetriever(url=server.url, **KNOBS).retrieve(QUERY), handle)
    check_whole(langchain.NautilusRetriever(url=server.url, whole=[handle], **KNOBS).invoke(QUERY))
    # a handle is not a fetch: without the budget that cut it, the row is whole anyway,
    # and a handle that names no row of the answer changes nothing
    check_whole(langchain.NautilusRetriever(url=server.url, top_k=5).invoke(QUERY))
    other = langchain.NautilusRetriever(url=server.url, whole=["row:" + "0" * 24], **KNOBS)
    assert check_part(other.invoke(QUERY)) == handle
