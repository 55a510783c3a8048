"""The HTTP source against a real JSON engine on loopback: the query changes only the
text searched for, pages are walked, the connection is kept, credentials never show,
and a sources file is checked without calling the engine."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import socket
import subprocess
from pathlib import Path

import pytest
from cli_process import run_nautilus
from http_support import DOCS, built, es_entry, search, write_sources

from nautilus_ranking import Broker
from nautilus_ranking.service.readiness import Readiness
from nautilus_ranking.sources.http.client import HttpUnavailableError
from tools.json_engine import json_engine

HOSTILE_QUERIES = ['disk "}, "size": 10000, "x": {"', "disk&size=10000", "disk\n{{size}}"]


def cli(
    folder: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return run_nautilus(
        *args, env={"NAUTILUS_DATA_DIR": str(folder / "data"), **(env or {})}, cwd=folder
    )


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("query", HOSTILE_QUERIES)
def test_a_hostile_query_changes_nothing_but_the_text_in_a_json_body(
    tmp_path: Path, query: str
) -> None:
    with json_engine(DOCS) as engine, built(tmp_path, es_entry(engine.url)) as [source]:
        search(source, "disk", 3)
        search(source, query, 3)
        plain, hostile = (r["body"] for r in engine.requests)
    assert hostile["query"]["multi_match"]["query"] == query
    assert hostile["size"] == 3
    hostile["query"]["multi_match"]["query"] = "disk"
    assert hostile == plain


def test_the_urls_own_parameters_are_sent_with_the_templates(tmp_path: Path) -> None:
    entry = {
        "id": "kb",
        "type": "http",
        "url": "",
        "method": "GET",
        "params": {"q": "{{query}}", "size": "{{size}}"},
        "response": {"hits": "results", "id": "_id"},
    }
    with json_engine(DOCS) as engine:
        entry["url"] = f"{engine.url}/search?x-api-key=k%26ey&offset=1"
        with built(tmp_path, entry) as [source]:
            rows = search(source, "disk", 2)
        [request] = engine.requests
    assert request["params"] == {
        "x-api-key": ["k&ey"],
        "offset": ["1"],
        "q": ["disk"],
        "size": ["2"],
    }
    assert [r["id"] for r in rows] == ["d01", "d02"]  # offset 1 of the URL applied


@pytest.mark.parametrize("query", HOSTILE_QUERIES)
def test_a_hostile_query_changes_nothing_but_the_text_in_url_parameters(
    tmp_path: Path, query: str
) -> None:
    entry = {
        "id": "kb",
        "type": "http",
        "url": "",
        "method": "GET",
        "params": {"q": "{{query}}", "size": "{{size}}", "offset": "{{offset}}"},
        "response": {"hits": "results", "id": "_id", "title": "_source.title", "score": "_score"},
    }
    with json_engine(DOCS) as engine:
        entry["url"] = f"{engine.url}/search"
        with built(tmp_path, entry) as [source]:
            rows = search(source, query, 2)
        [request] = engine.requests
    assert request["path"] == "/search"
    assert request["params"] == {"q": [query], "size": ["2"], "offset": ["0"]}
    assert [r["id"] for r in rows] == ["d00", "d01"]


def test_rows_hold_the_mapped_fields_in_the_engine_order(tmp_path: Path) -> None:
    with json_engine(DOCS) as engine, built(tmp_path, es_entry(engine.url)) as [source]:
        rows = search(source, "orders-db disk", 3)
    assert rows[0] == {
        "id": "d00",
        "title": "orders-db disk full",
        "body": "the primary's disk is 91% full",
        "engine_score": 3.0,  # the engine's own score: "orders", "db" and "disk" match
    }
    assert [r["engine_score"] for r in rows] == sorted(
        (r["engine_score"] for r in rows), reverse=True
    )


def test_pages_by_offset_until_the_limit_is_filled(tmp_path: Path) -> None:
    entry = es_entry("", paging={"by": "offset", "page_size": 2})
    with json_engine(DOCS) as engine:
        entry["url"] = engine.url
        with built(tmp_path, entry) as [source]:
            rows = search(source, "disk", 5)
        asked = [(r["body"]["from"], r["body"]["size"]) for r in engine.requests]
    assert asked == [(0, 2), (2, 2), (4, 1)]
    assert len({r["id"] for r in rows}) == 5


def test_a_short_page_ends_the_walk(tmp_path: Path) -> None:
    entry = es_entry("", paging={"by": "offset", "page_size": 4})
    with json_engine(DOCS) as engine:
        entry["url"] = engine.url
        with built(tmp_path, entry) as [source]:
            rows = search(source, "disk", 30)
        pages = len(engine.requests)
    assert len(rows) == 5  # the documents with "disk"
    assert pages == 2  # 4, then 1 < 4: no third request


def test_one_connection_serves_every_request_sync_and_async(tmp_path: Path) -> None:
    with json_engine(DOCS) as engine:
        path = write_sources(tmp_path, es_entry(engine.url))
        broker = Broker.from_config(path)
        try:
            for _ in range(5):
                assert broker.request("disk").data["es"]
            for _ in range(5):
                assert asyncio.run(broker.arequest("disk")).data["es"]
        finally:
            for source in broker.sources:
                source.close()
        assert len(engine.requests) == 10
        assert engine.connections == 1


def test_an_unreachable_engine_is_one_clear_error_and_readyz_reports_it(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    with built(tmp_path, es_entry(url)) as [source]:
        with pytest.raises(HttpUnavailableError, match=r"es: POST .*/docs/_search: cannot reach"):
            search(source, "disk")
        readiness = Readiness([source], 10.0)
        asyncio.run(readiness.probe_once())
        assert "cannot reach the engine" in readiness.failing()["es"]


def test_readiness_gets_the_health_url_instead_of_a_search(tmp_path: Path) -> None:
    with json_engine(DOCS) as engine:
        entry = es_entry(engine.url, health_url=f"{engine.url}/health")
        with built(tmp_path, entry) as [source]:
            readiness = Readiness([source], 10.0)
            asyncio.run(readiness.probe_once())
            assert readiness.failing() == {}
        assert [r["path"] for r in engine.requests] == ["/health"]


def test_credentials_never_show_and_strict_checks_without_calling(tmp_path: Path) -> None:
    port = closed_port()  # nothing listens: --strict must not call it
    entry = {
        "id": "kb",
        "type": "http",
        "url": f"http://ops:hunter2hunter@127.0.0.1:{port}/s?api_key=${{KB_KEY}}&x=1",
        "headers": {"X-Token": "${KB_TOKEN}"},
        "params": {"q": "{{query}}"},
        "response": {"hits": "results", "id": "_id"},
    }
    write_sources(tmp_path, entry)
    env = {"KB_TOKEN": "tok-SECRET-123", "KB_KEY": "key-SECRET-456"}
    out = cli(tmp_path, "config", "--strict", "--json", "--config", "nautilus.yaml", env=env)
    assert out.returncode == 0, out.stderr
    listed = json.loads(out.stdout)["sources_file"]["sources"]
    assert listed == [
        {"id": "kb", "type": "http", "url": f"http://ops:***@127.0.0.1:{port}/s?api_key=***&x=1"}
    ]
    query = cli(tmp_path, "query", "disk", "--json", "--config", "nautilus.yaml", env=env)
    for text in (out.stdout, out.stderr, query.stdout, query.stderr):
        assert "SECRET" not in text and "hunter2" not in text
    assert "cannot reach the engine" in query.stdout + query.stderr
    assert "Traceback" not in query.stderr


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"params": {"q": "text:{{query}}"}}, "a placeholder stands for a whole value"),
        ({"params": {"q": "{{qeury}}"}}, "unknown placeholder {{qeury}}"),
        ({"response": {"hits": "results[", "id": "_id"}}, "invalid JMESPath 'results['"),
        ({"headers": {"X-Token": "${KB_UNSET_TOKEN}"}}, "environment variable KB_UNSET_TOKEN"),
        ({"paging": {"by": "page"}}, "paging.by page needs {{page}}"),
        ({"url": "http://127.0.0.1:9/{{query}}"}, "a URL takes no placeholder"),
        ({"params": {"q": "{{vector}}"}}, "{{vector}} needs dim"),
        (
            {"params": {"q": "{{vector}}"}, "embedder": "hashing", "dim": 64, "response": None},
            "missing option 'response'",
        ),
    ],
)
def test_strict_names_each_problem(tmp_path: Path, change: dict[str, object], message: str) -> None:
    entry: dict[str, object] = {
        "id": "kb",
        "type": "http",
        "url": f"http://127.0.0.1:{closed_port()}/s",
        "headers": {"X-Token": "tok-SECRET-123"},
        "params": {"q": "{{query}}"},
        "response": {"hits": "results", "id": "_id"},
        **change,
    }
    entry = {k: v for k, v in entry.items() if v is not None}
    write_sources(tmp_path, entry)
    out = cli(tmp_path, "config", "--strict", "--config", "nautilus.yaml")
    assert out.returncode == 1
    assert message in out.stderr
    assert ("(kb, http)" in out.stderr or "sources[0]" in out.stderr) and "SECRET" not in out.stderr


def test_probe_shows_each_sources_first_mapped_row_and_time(tmp_path: Path) -> None:
    down = es_entry(f"http://127.0.0.1:{closed_port()}", headers={"X-Key": "${KB_TOKEN}"})
    down["id"] = "down"
    with json_engine(DOCS) as engine:
        write_sources(tmp_path, es_entry(engine.url), down)
        env = {"KB_TOKEN": "tok-SECRET-123"}
        out = cli(tmp_path, "sources", "probe", "replica lag", "--config", "nautilus.yaml", env=env)
        as_json = cli(
            tmp_path,
            "sources",
            "probe",
            "replica lag",
            "--json",
            "--config",
            "nautilus.yaml",
            env=env,
        )
        asked = [r["body"]["size"] for r in engine.requests]
    assert out.returncode == 1  # one source failed
    es_line, down_line = out.stdout.splitlines()
    assert re.match(r"^es +\d+\.\d ms  id=d01  score=2  replica lag on orders-db$", es_line)
    assert re.match(
        r"^down +\d+\.\d ms  ERROR HttpUnavailableError: down: POST .*cannot reach", down_line
    )
    es, failed = (json.loads(line) for line in as_json.stdout.splitlines())
    assert es["row"] == {"id": "d01", "text": "replica lag on orders-db", "score": 2.0}
    assert es["error"] == "" and failed["row"] is None
    assert asked == [10, 10]  # enough rows to judge the mapping by, from each call
    assert "Traceback" not in out.stderr + as_json.stderr
    assert "SECRET" not in out.stdout + out.stderr + as_json.stdout


def test_the_query_vector_is_the_sources_own_unless_the_callers_model_matches(
    tmp_path: Path,
) -> None:
    from nautilus_ranking.embedders import embedder_from_name

    entry = {
        "id": "vec",
        "type": "http",
        "url": "",
        "body": {
            "query": {"multi_match": {"query": "{{query}}"}},
            "size": "{{size}}",
            "knn": {"vector": "{{vector}}"},
        },
        "response": {"hits": "hits.hits", "id": "_id", "score": "_score"},
        "embedder": "hashing",
        "dim": 64,
    }
    own = [float(x) for x in embedder_from_name("hashing", 64).embed("replica lag")]
    model = embedder_from_name("hashing", 64).model_id
    given = [0.5] * 64
    with json_engine(DOCS) as engine:
        entry["url"] = f"{engine.url}/kb/_search"
        with built(tmp_path, entry) as [source]:
            for context in (
                {},
                {"embedding": given, "embedding_model": model},
                {"embedding": given, "embedding_model": "another-model"},
                {"embedding": given},
            ):
                asyncio.run(source.search("replica lag", context, 2))
        sent = [r["body"]["knn"]["vector"] for r in engine.requests]
    assert sent == [own, given, own, own]  # a caller's vector only from the same model


def test_tls_is_verified_and_a_ca_file_is_trusted(tmp_path: Path) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed: it makes the test's self-signed certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            openssl,
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    with json_engine(DOCS, tls=(cert, key)) as engine:
        assert engine.url.startswith("https://127.0.0.1:")
        with (
            built(tmp_path, es_entry(engine.url)) as [source],
            pytest.raises(
                HttpUnavailableError, match=r"es: POST https://.*CERTIFICATE_VERIFY_FAILED"
            ),
        ):
            search(source, "disk")
        trusted = es_entry(engine.url, ca_file=str(cert))
        with built(tmp_path, trusted) as [source]:
            assert [r["id"] for r in search(source, "disk", 2)] == ["d00", "d01"]
