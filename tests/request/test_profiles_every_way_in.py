"""One configuration, two profiles, in each way in: two callers get different rankings,
each by its own profile.

- ``serve``: two callers at once with different keys (a key's default profile);
- the MCP HTTP transport: two calls at once with different keys;
- MCP stdio: two calls at once naming different profiles;
- ``nautilus-ranking query --profile``: two invocations;
- the retrievers: two, each with its ``profile=``.

The same configuration ranks ``QUERY`` runbooks-first for ``support`` and
postmortems-first for ``oncall``; the global knobs do not rank at all. The keys file
grants ``k-support`` the support profile, ``k-oncall`` the on-call one (and lets it name
``audit``), and ``k-plain`` (a plain line) the global knobs.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cli_process import run_nautilus
from fakes import sources_file
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_support import connect
from plain_environment import plain_environment

from tools.servers import NAUTILUS, Server, running

pytestmark = pytest.mark.slow

QUERY = "disk full on the database"
PROFILES = {
    "NAUTILUS_PROFILES__SUPPORT__SOURCE_BOOSTS": "runbooks:high",
    "NAUTILUS_PROFILES__SUPPORT__RANKING_TOP_K": "3",
    "NAUTILUS_PROFILES__ONCALL__SOURCE_BOOSTS": "postmortems:high,runbooks:-high",
    "NAUTILUS_PROFILES__ONCALL__RANKING_TOP_K": "3",
    "NAUTILUS_PROFILES__ONCALL__OVERRIDES": "top_k",
    "NAUTILUS_PROFILES__AUDIT__RANKING_TOP_K": "8",
}
KEYS = "# agents\nk-support profile=support\nk-oncall profile=oncall allow=audit\nk-plain\n"


def environment(tmp: Path) -> dict[str, str]:
    sources_file(tmp)
    (tmp / "keys").write_text(KEYS)
    (tmp / "keys").chmod(0o600)  # a secret: owner-only
    return {
        "NAUTILUS_CONFIG": str(tmp / "nautilus.yaml"),
        "NAUTILUS_SERVE_API_KEYS_FILE": str(tmp / "keys"),
        "NAUTILUS_SERVE_PROBE_INTERVAL_S": "0.5",
        **PROFILES,
    }


def first_sources(ranking: list[dict[str, Any]]) -> list[str]:
    return [entry["source_id"] for entry in ranking]


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("serve-profiles")
    with running(tmp, environment(tmp)) as server:
        yield server


async def _post(url: str, key: str, body: dict[str, Any]) -> httpx.Response:
    async with httpx.AsyncClient(timeout=30) as client:
        return await client.post(
            url + "/v1/query", json=body, headers={"Authorization": f"Bearer {key}"}
        )


def test_serve_two_callers_at_once_each_ranked_by_its_key_s_profile(serve: Server) -> None:
    async def both() -> list[httpx.Response]:
        return list(
            await asyncio.gather(
                *[_post(serve.url, key, {"query": QUERY}) for key in ("k-support", "k-oncall") * 4]
            )
        )

    answers = asyncio.run(both())
    assert all(a.status_code == 200 for a in answers), [a.text for a in answers]
    support, oncall = answers[0].json(), answers[1].json()
    assert support["profile"] == "support" and oncall["profile"] == "oncall"
    assert first_sources(support["ranking"])[0] == "runbooks"
    assert first_sources(oncall["ranking"])[0] == "postmortems"
    assert "runbooks" not in first_sources(oncall["ranking"])
    # the same key, the same answer, however interleaved
    assert {a.json()["response_hash"] for a in answers[0::2]} == {support["response_hash"]}
    assert {a.json()["response_hash"] for a in answers[1::2]} == {oncall["response_hash"]}
    plain = httpx.post(
        serve.url + "/v1/query",
        json={"query": QUERY, "explain": True},
        headers={"X-API-Key": "k-plain"},
    ).json()
    assert plain["profile"] is None and plain["explain"]["profile"] is None
    assert plain["synthesizer"] == "BasicSynthesizer"  # the global knobs rank nothing


def test_serve_a_key_names_only_profiles_it_allows(serve: Server) -> None:
    def post(key: str, **body: Any) -> httpx.Response:
        return httpx.post(
            serve.url + "/v1/query",
            json={"query": QUERY, **body},
            headers={"Authorization": f"Bearer {key}"},
        )

    audit = post("k-oncall", profile="audit")
    assert audit.status_code == 200 and audit.json()["profile"] == "audit"
    assert len(audit.json()["ranking"]) == 8
    for key, name, status in (
        ("k-support", "audit", 403),
        ("k-plain", "support", 403),
        ("k-support", "nope", 403),  # unknown or forbidden: one answer to a key
        ("k-support", "Bad-Name", 422),
    ):
        refused = post(key, profile=name)
        assert refused.status_code == status, refused.text
        body = refused.text
        others = {"support", "oncall", "audit"} - {name}
        assert not any(f"'{o}'" in body or f'"{o}"' in body for o in others), body
    # a profile says which overrides its callers may give: on-call top_k, support none
    assert post("k-oncall", top_k=2).status_code == 200
    forbidden = post("k-support", top_k=2)
    assert forbidden.status_code == 403 and forbidden.json()["field"] == "top_k"
    as_of = post("k-oncall", as_of="1990-01-01")  # a ranking input, as recency is
    assert as_of.status_code == 403 and as_of.json()["field"] == "as_of"
    # what a key allows
    mine = httpx.get(serve.url + "/v1/profiles", headers={"X-API-Key": "k-oncall"}).json()
    assert mine == {"default": "oncall", "allowed": ["audit", "oncall"]}
    assert httpx.get(serve.url + "/v1/profiles").status_code == 401
    schema = httpx.get(serve.url + "/openapi.json", headers={"X-API-Key": "k-plain"}).json()
    body_schema = schema["paths"]["/v1/query"]["post"]["requestBody"]["content"]
    assert "profile" in body_schema["application/json"]["schema"]["properties"]

    # metrics: a label per configured profile, '' for the global knobs; a profile's only
    # to a key that may name it (the API hides the names from the others)
    def labels(key: str | None) -> set[str]:
        headers = {"X-API-Key": key} if key else {}
        metrics = httpx.get(serve.url + "/metrics", headers=headers).text
        return set(re.findall(r'nautilus_profile_queries_total\{profile="([^"]*)"\}', metrics))

    assert labels("k-oncall") == {"oncall", "audit", ""}
    assert labels("k-support") == {"support", ""}
    assert labels(None) == labels("k-plain") == labels("k-wrong") == {""}
    no_key = httpx.get(serve.url + "/metrics").text
    assert not any(name in no_key for name in ("support", "oncall", "audit")), no_key
    assert '"event": "query_profile"' in serve.logs()


def test_serve_a_cursor_carries_its_profile(serve: Server) -> None:
    def post(key: str, **body: Any) -> httpx.Response:
        return httpx.post(
            serve.url + "/v1/query", json={"query": QUERY, **body}, headers={"X-API-Key": key}
        )

    first = post("k-oncall").json()
    cursor = first["next_cursor"]
    assert cursor
    assert post("k-oncall", cursor=cursor).status_code == 200
    # another profile of the same key: not the ranking the cursor pages
    other = post("k-oncall", cursor=cursor, profile="audit")
    assert other.status_code == 422 and "profile" in other.json()["errors"][0]["reason"]


# --- MCP ---------------------------------------------------------------------------------


def _mcp_sources(result: Any) -> list[str]:
    return [r["source"] for r in result.structured_content["results"]]


def test_mcp_http_two_calls_at_once_with_different_keys(tmp_path: Path) -> None:
    env = environment(tmp_path)
    with running(tmp_path, env, subcommand=("mcp", "--transport", "http")) as server:

        async def call(key: str) -> Any:
            http, client = connect(server.url, key)
            async with http, client:
                return await client.call_tool("search", {"query": QUERY})

        async def both() -> list[Any]:
            return list(await asyncio.gather(call("k-support"), call("k-oncall")))

        support, oncall = asyncio.run(both())

        async def named(key: str, profile: str) -> Any:
            http, client = connect(server.url, key)
            async with http, client:
                tools = await client.list_tools()
                schema = tools.tools[0].input_schema
                assert "profile" in schema["properties"]
                return await client.call_tool("search", {"query": QUERY, "profile": profile})

        async def listing(key: str) -> Any:
            http, client = connect(server.url, key)
            async with http, client:
                return await client.call_tool("list_sources", {})

        refused = asyncio.run(named("k-support", "oncall"))
        mine = asyncio.run(listing("k-oncall"))
        metrics = httpx.get(server.url + "/metrics", headers={"X-API-Key": "k-oncall"}).text
        no_key = httpx.get(server.url + "/metrics").text
    assert support.structured_content["profile"] == "support"
    assert oncall.structured_content["profile"] == "oncall"
    assert _mcp_sources(support)[0] == "runbooks"
    assert _mcp_sources(oncall)[0] == "postmortems"
    assert "ranked by profile support" in support.content[0].text
    assert refused.is_error and "may not use profile 'oncall'" in refused.content[0].text
    # what its key allows: the caller asks list_sources
    assert mine.structured_content["profiles"] == {
        "default": "oncall",
        "allowed": ["audit", "oncall"],
    }
    assert 'nautilus_profile_queries_total{profile="oncall"} 1.0' in metrics
    assert 'profile="support"' not in metrics  # k-oncall may not name it
    assert not any(name in no_key for name in ("support", "oncall", "audit")), no_key


def test_mcp_stdio_two_calls_at_once_naming_different_profiles(tmp_path: Path) -> None:
    env = environment(tmp_path)
    # stdio has no keys: any profile may be named, a keys file in the environment or not
    assert env["NAUTILUS_SERVE_API_KEYS_FILE"]
    base = plain_environment()
    params = StdioServerParameters(
        command=NAUTILUS,
        args=["mcp"],
        env={**base, **env, "NAUTILUS_DATA_DIR": str(tmp_path / "data")},
        cwd=tmp_path,
    )

    async def session() -> list[Any]:
        with (tmp_path / "stderr").open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                return list(
                    await asyncio.gather(
                        client.call_tool("search", {"query": QUERY, "profile": "support"}),
                        client.call_tool("search", {"query": QUERY, "profile": "oncall"}),
                        client.call_tool("search", {"query": QUERY}),
                    )
                )

    support, oncall, unnamed = asyncio.run(session())
    assert _mcp_sources(support)[0] == "runbooks"
    assert _mcp_sources(oncall)[0] == "postmortems"
    assert support.structured_content["profile"] == "support"
    assert unnamed.structured_content["profile"] is None
    # each query_profile line names the request it logs: the id its answer carries
    logged = [
        json.loads(line)
        for line in (tmp_path / "stderr").read_text().splitlines()
        if '"event": "query_profile"' in line
    ]
    answered = {r.structured_content["request_id"] for r in (support, oncall, unnamed)}
    assert len(logged) == 3 and {line["request_id"] for line in logged} == answered
    assert None not in answered


# --- the CLI and the retrievers ----------------------------------------------------------


def test_cli_two_invocations_with_different_profiles(tmp_path: Path) -> None:
    env = environment(tmp_path)
    base = plain_environment()
    full = {**base, **env, "NAUTILUS_DATA_DIR": str(tmp_path / "data")}

    def query(*args: str) -> subprocess.CompletedProcess[str]:
        return run_nautilus("query", QUERY, *args, env=full, cwd=tmp_path)

    support = json.loads(query("--profile", "support", "--json").stdout)
    oncall = json.loads(query("--profile", "oncall", "--json").stdout)
    assert (support["profile"], oncall["profile"]) == ("support", "oncall")
    assert first_sources(support["ranking"])[0] == "runbooks"
    assert first_sources(oncall["ranking"])[0] == "postmortems"
    shown = query("--profile", "oncall", "--explain")
    assert shown.returncode == 0 and "profile: oncall" in shown.stdout
    unknown = query("--profile", "nope")
    assert unknown.returncode == 2 and "--profile: 'nope'" in unknown.stderr
    assert "support" not in unknown.stderr and "oncall" not in unknown.stderr
    forbidden = query("--profile", "support", "--top-k", "2")
    assert forbidden.returncode == 2 and "does not let its callers override" in forbidden.stderr
    assert "nautilus-ranking: --top-k: '2': profile 'support'" in forbidden.stderr  # not None
    near = query("--profile", "support", "--near-duplicates", "on")
    assert "nautilus-ranking: --near-duplicates: 'on': profile 'support'" in near.stderr


def test_two_retrievers_each_with_its_profile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nautilus_ranking.broker import Broker
    from nautilus_ranking.retrievers.langchain import NautilusRetriever

    for name, value in environment(tmp_path).items():
        monkeypatch.setenv(name, value)
    with Broker.from_config(tmp_path / "nautilus.yaml") as broker:
        support = NautilusRetriever(broker=broker, profile="support").invoke(QUERY)
        oncall = NautilusRetriever(broker=broker, profile="oncall").invoke(QUERY)
    assert support[0].metadata["source"] == "runbooks"
    assert oncall[0].metadata["source"] == "postmortems"
    assert len(support) == len(oncall) == 3


def test_a_retriever_over_http_sends_its_profile(serve: Server) -> None:
    from nautilus_ranking.retrievers.source import HitSource, ServiceError

    hits = HitSource(url=serve.url, api_key="k-oncall", profile="audit").hits(QUERY)
    assert len(hits) == 8
    with pytest.raises(ServiceError, match="may not use profile"):
        HitSource(url=serve.url, api_key="k-support", profile="audit").hits(QUERY)


def test_serve_in_strict_mode_refuses_a_bad_profile_or_grant_before_serving(
    tmp_path: Path,
) -> None:
    env = environment(tmp_path)
    (tmp_path / "keys").write_text(KEYS + "k-typo profile=suport\n")
    (tmp_path / "keys").chmod(0o600)
    base = plain_environment()
    done = run_nautilus(
        "serve",
        "--port",
        "1",
        env={
            **base,
            **env,
            "NAUTILUS_DATA_DIR": str(tmp_path / "data"),
            "NAUTILUS_CONFIG_STRICT": "true",
            "NAUTILUS_PROFILES__ONCALL__SOURCE_BOOSTS": "postmortems:high,wiki:-high",
        },
        cwd=tmp_path,
    )
    assert done.returncode == 1, done.stderr
    assert "NAUTILUS_PROFILES__ONCALL__SOURCE_BOOSTS: 'wiki': no source has id" in done.stderr
    assert "'profile=suport': no profile of that name is configured" in done.stderr
    assert "Traceback" not in done.stderr
