"""What a caller of ``nautilus-ranking query --json`` and ``POST /v1/query`` is sent: no row
vectors unless asked, and a passthrough that says it is one (real CLI subprocesses and
a real ``nautilus-ranking serve`` on loopback)."""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cli_process import run_nautilus

from nautilus_ranking.broker import Broker
from nautilus_ranking.records import LEAN_FIELDS
from nautilus_ranking.response_hash import canonical_json
from nautilus_ranking.settings.model import NautilusSettings
from tools.servers import Server, running, wait_ready

QUERY = "orders-db disk full"


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_nautilus(*args, env=env)


def query_json(*flags: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    result = cli("query", QUERY, "--json", *flags, env=env)
    assert result.returncode == 0, result.stderr
    out: dict[str, Any] = json.loads(result.stdout)
    return out


def rows_with(data: dict[str, list[dict[str, Any]]], name: str) -> list[dict[str, Any]]:
    return [row for rows in data.values() for row in rows if name in row]


def sha256(data: object) -> str:
    return "sha256:" + hashlib.sha256(canonical_json(data).encode()).hexdigest()


# --- vectors -----------------------------------------------------------------------------


def test_query_json_leaves_vectors_out_unless_asked_and_the_hash_is_the_upstream_one() -> None:
    lean = query_json()
    full = query_json("--vectors")
    assert lean["vectors_included"] is False and full["vectors_included"] is True
    assert rows_with(lean["data"], "embedding") == []
    vectors = rows_with(full["data"], "embedding")
    assert vectors and all(len(row["embedding"]) == 1024 for row in vectors)
    # the vector sources' rows are still there, with what says which model made them
    assert len(rows_with(lean["data"], "embedding_model")) == len(vectors)
    # same rows, minus the vectors; the hash covers the rows as the sources returned them
    assert lean["data"] == {
        sid: [{k: v for k, v in row.items() if k != "embedding"} for row in rows]
        for sid, rows in full["data"].items()
    }
    assert lean["response_hash"] == full["response_hash"] == sha256(full["data"])
    assert len(json.dumps(lean)) * 2 < len(json.dumps(full))


def test_the_passthrough_is_still_an_exact_no_op_for_data_and_hash() -> None:
    full = query_json("--vectors")
    upstream = {
        r.source_id: r.rows for r in Broker.from_config(None, NautilusSettings()).fetch_sync(QUERY)
    }
    assert full["data"] == json.loads(json.dumps(upstream))
    assert full["response_hash"] == sha256(upstream)


# --- ranking off says so ----------------------------------------------------------------


def test_passthrough_json_says_ranking_is_off_and_has_no_scores() -> None:
    out = query_json()
    assert out["ranking_enabled"] is False and out["synthesizer"] == "BasicSynthesizer"
    first = out["ranking"][0]
    assert first["score"] is None and "similarity" not in first  # components: explain's
    assert first["rank"] == 1 and first["id"] and set(first) == set(LEAN_FIELDS)
    explained = query_json("--explain")["ranking"][0]
    assert explained["similarity"] is None and explained["source_rank"] == 1
    ranked = query_json(env={"NAUTILUS_RANKING_TOP_K": "3"})
    assert ranked["ranking_enabled"] is True and ranked["synthesizer"] == "RankingSynthesizer"
    assert all(isinstance(r["score"], float) and r["score"] > 0 for r in ranked["ranking"])


def test_passthrough_explain_names_the_knobs_that_turn_ranking_on() -> None:
    result = cli("query", QUERY, "--explain")
    assert result.returncode == 0, result.stderr
    line = next(line for line in result.stdout.splitlines() if line.startswith("ranking:"))
    assert "off" in line and "passthrough" in line
    for knob in (
        "NAUTILUS_RANKING_TOP_K",
        "NAUTILUS_RANKING_IDF",
        "NAUTILUS_SOURCE_BOOSTS",
        "--top-k",
    ):
        assert knob in line
    assert " 0.000 " not in result.stdout  # no column of zeros posing as scores
    ranked = cli("query", QUERY, "--explain", "--top-k", "3")
    assert ranked.returncode == 0, ranked.stderr
    assert "ranking: off" not in ranked.stdout and "sim" in ranked.stdout


# --- the service -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("serve-output")
    with running(tmp, {"NAUTILUS_SERVE_API_KEYS_FILE": ""}) as srv:
        assert wait_ready(srv).status_code == 200, srv.logs()
        yield srv


def post(server: Server, body: object) -> httpx.Response:
    return httpx.post(server.url + "/v1/query", json=body, timeout=30)


def test_service_leaves_vectors_out_unless_the_request_asks(server: Server) -> None:
    lean = post(server, {"query": QUERY})
    full = post(server, {"query": QUERY, "vectors": True})
    assert lean.status_code == full.status_code == 200, lean.text
    lean_body, full_body = lean.json(), full.json()
    assert lean_body["vectors_included"] is False and full_body["vectors_included"] is True
    assert rows_with(lean_body["data"], "embedding") == []
    assert rows_with(full_body["data"], "embedding")
    assert lean_body["response_hash"] == full_body["response_hash"] == sha256(full_body["data"])
    assert len(lean.content) * 2 < len(full.content)


def test_service_rejects_a_vectors_value_that_is_not_a_boolean(server: Server) -> None:
    response = post(server, {"query": QUERY, "vectors": "lots"})
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["errors"][0]["field"] == "vectors"
    assert body["errors"][0]["valid"] == "true or false"


def test_service_says_whether_it_ranked(server: Server) -> None:
    passthrough = post(server, {"query": QUERY}).json()
    assert passthrough["ranking_enabled"] is False
    assert passthrough["synthesizer"] == "BasicSynthesizer"
    assert passthrough["ranking"][0]["score"] is None
    ranked = post(server, {"query": QUERY, "top_k": 3}).json()
    assert ranked["ranking_enabled"] is True and ranked["synthesizer"] == "RankingSynthesizer"
    assert len(ranked["ranking"]) == 3 and ranked["ranking"][0]["score"] > 0


def test_the_cli_and_the_service_send_the_same_keys(server: Server, tmp_path: Path) -> None:
    assert set(post(server, {"query": QUERY}).json()) == set(query_json())


def test_vectors_is_no_ranking_override(tmp_path: Path) -> None:
    """A service that forbids overrides still lets a client ask for the vectors."""
    with running(
        tmp_path, {"NAUTILUS_SERVE_API_KEYS_FILE": "", "NAUTILUS_SERVE_ALLOW_OVERRIDES": "false"}
    ) as srv:
        assert wait_ready(srv).status_code == 200, srv.logs()
        full = post(srv, {"query": QUERY, "vectors": True})
        assert full.status_code == 200, full.text
        assert rows_with(full.json()["data"], "embedding")
        assert post(srv, {"query": QUERY, "top_k": 3}).status_code == 403
