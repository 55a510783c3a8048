"""A keys file's grant that cannot be honoured stops ``serve`` and ``mcp`` at start.

With ``k-support profile=support`` in the keys file, a missing or unparsable
``NAUTILUS_PROFILES_FILE`` or a grant naming ``Support`` used to start the server with one
warning, and the key then ranked with the global knobs and every override (``top_k: 20``
answered 20 rows where the file present answers 403). Now each refuses to start, as an
unreadable keys file does; so does a key listed twice (which line's grant wins is a guess).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import httpx
import pytest
from fakes import sources_file

from tools.servers import NAUTILUS, free_port, running

pytestmark = pytest.mark.slow

PROFILES = "support:\n  ranking_top_k: 3\n  source_boosts: runbooks:high\n"
OVERRIDE = {"query": "disk full on the database", "top_k": 20, "boosts": {"graph": "high"}}


def _environment(tmp: Path, keys: str, profiles: str | None) -> dict[str, str]:
    sources_file(tmp)
    (tmp / "keys").write_text(keys)
    (tmp / "keys").chmod(0o600)  # a secret: owner-only
    if profiles is not None:
        (tmp / "profiles.yaml").write_text(profiles)
    return {
        "NAUTILUS_CONFIG": str(tmp / "nautilus.yaml"),
        "NAUTILUS_SERVE_API_KEYS_FILE": str(tmp / "keys"),
        "NAUTILUS_PROFILES_FILE": str(tmp / "profiles.yaml"),
    }


def _start(tmp: Path, env: dict[str, str], *command: str) -> subprocess.CompletedProcess[str]:
    """The server's run; one still up after 60 s (it started) is stopped and fails."""
    base = {k: v for k, v in os.environ.items() if not k.upper().startswith("NAUTILUS_")}
    base.pop("PROMETHEUS_MULTIPROC_DIR", None)
    args = [NAUTILUS, *command, "--host", "127.0.0.1", "--port", str(free_port())]
    process = subprocess.Popen(
        args,
        env={**base, "NAUTILUS_DATA_DIR": str(tmp / "data"), **env},
        cwd=tmp,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, err = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        pytest.fail(f"the server started instead of refusing:\n{err[-2000:]}")
    return subprocess.CompletedProcess(args, process.returncode, out, err)


@pytest.mark.parametrize(
    ("keys", "profiles", "reason"),
    [
        (
            "k-support profile=support\n",
            None,
            "NAUTILUS_PROFILES_FILE cannot be read",
        ),
        (
            "k-support profile=support\n",
            "support: [unclosed\n",
            "NAUTILUS_PROFILES_FILE cannot be read",
        ),
        (
            "k-support profile=Support\n",
            PROFILES,
            "'profile=Support': no profile of that name is configured",
        ),
        (
            "k-support allow=suport\n",
            PROFILES,
            "'allow=suport': no profile of that name is configured",
        ),
        (
            "k-support profile=support\nk-other\nk-support\n",
            PROFILES,
            "a key is listed twice (lines 1 and 3)",
        ),
    ],
    ids=["profiles-file-missing", "profiles-file-unparsable", "case", "allow-typo", "twice"],
)
@pytest.mark.parametrize("command", [("serve",), ("mcp", "--transport", "http")])
def test_a_grant_that_cannot_be_honoured_stops_the_server(
    tmp_path: Path, keys: str, profiles: str | None, reason: str, command: tuple[str, ...]
) -> None:
    result = _start(tmp_path, _environment(tmp_path, keys, profiles), *command)
    assert result.returncode == 1, result.stderr
    assert "NAUTILUS_SERVE_API_KEYS_FILE" in result.stderr and reason in result.stderr
    assert "_ready" not in result.stderr and "Traceback" not in result.stderr
    assert "k-support" not in result.stderr  # a key is a secret: the line number says which


@pytest.mark.parametrize("command", [("serve",), ("mcp", "--transport", "http")])
def test_a_profile_s_top_k_that_does_not_parse_stops_the_server(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    """Skipped with a warning, ``ranking_top_k: 3x`` gave the key the global knobs: every
    row where the operator wrote three."""
    profiles = PROFILES.replace("ranking_top_k: 3", "ranking_top_k: 3x")
    env = _environment(tmp_path, "k-support profile=support\n", profiles)
    result = _start(tmp_path, env, *command)
    assert result.returncode == 1, result.stderr
    assert "profiles.yaml: support.ranking_top_k: '3x': not an integer" in result.stderr
    assert "nothing starts until it parses" in result.stderr
    assert "_ready" not in result.stderr and "Traceback" not in result.stderr


def test_the_same_grant_with_its_profile_present_holds(tmp_path: Path) -> None:
    env = _environment(tmp_path, "k-support profile=support\n", PROFILES)
    with running(tmp_path, env) as server:
        refused = httpx.post(
            server.url + "/v1/query", json=OVERRIDE, headers={"X-API-Key": "k-support"}
        )
        ranked = httpx.post(
            server.url + "/v1/query",
            json={"query": OVERRIDE["query"]},
            headers={"X-API-Key": "k-support"},
        )
    assert refused.status_code == 403 and refused.json()["field"] == "top_k", refused.text
    assert ranked.status_code == 200 and ranked.json()["profile"] == "support"
    assert len(ranked.json()["ranking"]) == 3


def test_a_key_cannot_tell_an_unknown_profile_from_a_forbidden_one(tmp_path: Path) -> None:
    """Two answers (422 unknown, 403 forbidden) let a key enumerate the names; and
    ``/v1/config`` named a misconfigured profile to any key."""
    profiles = PROFILES + "audit:\n  ranking_max_candidates: lots\n"
    keys = "k-support profile=support\nk-audit profile=audit\n"
    with running(tmp_path, _environment(tmp_path, keys, profiles)) as server:

        def ask(key: str, path: str = "/v1/query", **body: object) -> httpx.Response:
            if path != "/v1/query":
                return httpx.get(server.url + path, headers={"X-API-Key": key})
            return httpx.post(
                server.url + path,
                json={"query": OVERRIDE["query"], **body},
                headers={"X-API-Key": key},
            )

        unknown, forbidden = ask("k-support", profile="nope"), ask("k-support", profile="audit")
        support_config = ask("k-support", "/v1/config").json()
        audit_config = ask("k-audit", "/v1/config").json()
    assert unknown.status_code == forbidden.status_code == 403
    shape = {k: v for k, v in unknown.json().items() if k not in ("detail", "value", "request_id")}
    assert shape == {
        k: v for k, v in forbidden.json().items() if k not in ("detail", "value", "request_id")
    }
    assert unknown.json()["detail"].replace("nope", "X") == forbidden.json()["detail"].replace(
        "audit", "X"
    )
    assert "audit" not in str(support_config["skipped"])
    [audit_problem] = audit_config["skipped"]
    assert audit_problem["variable"].endswith("profiles.yaml: audit.ranking_max_candidates")
