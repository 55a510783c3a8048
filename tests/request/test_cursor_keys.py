"""Signed cursors: a cursor is honoured only as it was made, under the key that signed it.

A key file in the data directory, made once and owner-only, is what the command line,
``serve`` and ``mcp`` of one machine share (several processes racing to make it agree
on one); ``NAUTILUS_CURSOR_KEY`` is what replicas share, with the keys it replaces in
``NAUTILUS_CURSOR_PREVIOUS_KEYS``. An altered cursor, a forged one and one made before
cursors were signed are refused with a 422, never a 500; a cursor's page size is held
to the caller's top K where the caller may not override it, through a real ``serve``.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cli_process import run_nautilus
from fakes import sources_file
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from plain_environment import plain_environment
from structlog.testing import capture_logs

from nautilus_ranking.request.cursor_keys import (
    KEY_FILE,
    TAG_BYTES,
    CursorKeys,
    _from_file,
    cursor_keys,
    read_or_create_key_file,
)
from nautilus_ranking.request.pages import CURSOR_PREFIX, PageError, Paging, paging
from nautilus_ranking.settings.model import ConfigError, NautilusSettings
from tools.servers import NAUTILUS, Server, running, wait_ready

QUERY = "disk full on the database"
IDS = ["a", "b"]


def signed_cursor(settings: NautilusSettings, size: int = 3) -> str:
    first = paging(QUERY, settings, IDS, page=1)
    assert first is not None
    return Paging(2, size, first.key, "data", keys=first.keys).cursor()


def body_of(cursor: str) -> tuple[bytes, dict[str, Any]]:
    assert cursor.startswith(CURSOR_PREFIX)
    cursor = cursor.removeprefix(CURSOR_PREFIX)
    raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    return raw[:TAG_BYTES], json.loads(raw[TAG_BYTES:])


def encode(raw: bytes, prefix: str = CURSOR_PREFIX) -> str:
    return prefix + base64.urlsafe_b64encode(raw).decode().rstrip("=")


def test_the_key_file_is_made_once_owner_only_and_read_back(tmp_path: Path) -> None:
    settings = NautilusSettings(ranking_top_k=3, data_dir=tmp_path / "data")
    cursor = signed_cursor(settings)
    path = tmp_path / "data" / KEY_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    key = path.read_bytes()
    assert len(key.strip()) == 64  # 32 random bytes, hex
    _from_file.cache_clear()  # another process: reads the file, makes no new key
    assert paging(QUERY, settings, IDS, cursor=cursor) is not None
    assert path.read_bytes() == key
    assert [p.name for p in path.parent.iterdir()] == [KEY_FILE]  # no file of its own left


def test_processes_racing_to_make_the_key_agree_on_one(tmp_path: Path) -> None:
    path = tmp_path / "data" / KEY_FILE
    code = (
        "import sys, pathlib\n"
        "from nautilus_ranking.request.cursor_keys import read_or_create_key_file\n"
        "print(read_or_create_key_file(pathlib.Path(sys.argv[1])).decode())\n"
    )
    racers = [
        subprocess.Popen([sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE, text=True)
        for _ in range(6)
    ]
    keys = {racer.communicate(timeout=60)[0].strip() for racer in racers}
    assert all(racer.returncode == 0 for racer in racers)
    assert keys == {path.read_text().strip()}
    assert [p.name for p in path.parent.iterdir()] == [KEY_FILE]


def test_an_altered_or_forged_cursor_is_refused(tmp_path: Path) -> None:
    settings = NautilusSettings(ranking_top_k=3, data_dir=tmp_path / "data")
    cursor = signed_cursor(settings)
    tag, body = body_of(cursor)
    bigger = json.dumps({**body, "s": 10}, separators=(",", ":"), sort_keys=True).encode()
    forged = CursorKeys(b"a key the caller guessed, 32 chars long").sign(bigger) + bigger
    for altered in (encode(tag + bigger), encode(forged), encode(bytes(TAG_BYTES) + bigger)):
        with pytest.raises(PageError, match="not a cursor nautilus made") as refused:
            paging(QUERY, NautilusSettings(data_dir=tmp_path / "data"), IDS, cursor=altered)
        assert refused.value.field == "cursor" and not refused.value.stale


def test_a_cursor_made_before_cursors_were_signed_is_refused_as_such(tmp_path: Path) -> None:
    settings = NautilusSettings(ranking_top_k=3, data_dir=tmp_path / "data")
    _, body = body_of(signed_cursor(settings))
    # version 1 was the JSON alone, base64 with no prefix and no tag
    unsigned = encode(json.dumps({**body, "v": 1}, separators=(",", ":")).encode(), prefix="")
    with pytest.raises(PageError, match="earlier version of nautilus-ranking") as refused:
        paging(QUERY, settings, IDS, cursor=unsigned)
    assert refused.value.valid == "no cursor: ask for the first page again"


def test_replicas_share_the_key_setting_and_a_rotation_keeps_old_cursors(
    tmp_path: Path,
) -> None:
    old, new = "o" * 32, "n" * 32
    made = signed_cursor(NautilusSettings(ranking_top_k=3, cursor_key=old))
    elsewhere = NautilusSettings(ranking_top_k=3, cursor_key=old, data_dir=tmp_path / "other")
    assert paging(QUERY, elsewhere, IDS, cursor=made) is not None
    rotated = NautilusSettings(ranking_top_k=3, cursor_key=new, cursor_previous_keys=old)
    assert paging(QUERY, rotated, IDS, cursor=made) is not None
    tag, body = body_of(signed_cursor(rotated))
    raw = json.dumps(body, separators=(",", ":"), sort_keys=True).encode()
    assert tag == CursorKeys(new.encode()).sign(raw)
    with pytest.raises(PageError, match="not a cursor nautilus made"):
        paging(QUERY, NautilusSettings(ranking_top_k=3, cursor_key=new), IDS, cursor=made)
    assert not (tmp_path / "other").exists()  # a key set: no key file made


def test_a_short_key_is_refused_without_showing_it() -> None:
    settings = NautilusSettings(cursor_key="short-secret", cursor_previous_keys="p" * 32 + ",tiny")
    assert settings.cursor_key is None and settings.cursor_previous_keys == []
    shown = json.dumps([p.message for p in settings.problems])
    assert "NAUTILUS_CURSOR_KEY" in shown and "NAUTILUS_CURSOR_PREVIOUS_KEYS" in shown
    assert "short-secret" not in shown and "tiny" not in shown
    # a secret setting's refused value is masked whole, its length with it
    assert "NAUTILUS_CURSOR_KEY: '***': too short to sign cursors" in shown
    kept = NautilusSettings(cursor_key="s" * 32, cursor_previous_keys="p" * 32)
    assert kept.effective()["NAUTILUS_CURSOR_KEY"] == "***"
    assert kept.effective()["NAUTILUS_CURSOR_PREVIOUS_KEYS"] == ["***"]


def test_a_data_dir_that_cannot_hold_the_key_gives_a_key_of_this_process(
    tmp_path: Path,
) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    with capture_logs() as logs:
        keys = cursor_keys(NautilusSettings(data_dir=blocked / "data"))
    assert len(keys.current) == 32
    event = next(e for e in logs if e["event"] == "cursor_key_ephemeral")
    assert "NAUTILUS_CURSOR_KEY" in event["valid"]
    with pytest.raises(NotADirectoryError):
        read_or_create_key_file(blocked / "data" / KEY_FILE)


def _refusal(settings: NautilusSettings) -> str:
    _from_file.cache_clear()  # a fresh process: nothing read yet
    with pytest.raises(ConfigError) as refused:
        cursor_keys(settings)
    [problem] = refused.value.problems
    assert problem.variable == "NAUTILUS_DATA_DIR" and "NAUTILUS_CURSOR_KEY" in problem.valid
    return problem.reason


def test_a_key_file_open_to_others_is_refused_with_the_fix(tmp_path: Path) -> None:
    """At 0644 anyone who can read the file signs cursors; nautilus made it 0600."""
    settings = NautilusSettings(ranking_top_k=3, data_dir=tmp_path / "data")
    path = tmp_path / "data" / KEY_FILE
    read_or_create_key_file(path)
    for mode in (0o644, 0o604, 0o602):  # others may read it, or write another key
        path.chmod(mode)
        assert f"open to others (mode 0{mode:o})" in _refusal(settings)
        assert f"chmod 600 {path}" in _refusal(settings)
    path.chmod(0o600)
    _from_file.cache_clear()
    assert cursor_keys(settings).current == path.read_bytes().strip()


def test_a_key_file_that_is_a_fifo_a_device_or_large_is_refused_unread(tmp_path: Path) -> None:
    """A FIFO blocked the reader (on serve's loop: /healthz stopped answering) and
    /dev/zero read until MemoryError; neither is opened for more than a look."""
    data = tmp_path / "data"
    data.mkdir()
    settings = NautilusSettings(ranking_top_k=3, data_dir=data)
    os.mkfifo(data / KEY_FILE, 0o600)
    assert "is a named pipe" in _refusal(settings)
    (data / KEY_FILE).unlink()
    (data / KEY_FILE).symlink_to("/dev/zero")
    assert "is a character device" in _refusal(settings)
    (data / KEY_FILE).unlink()
    (data / KEY_FILE).write_bytes(b"k" * 8192)
    (data / KEY_FILE).chmod(0o600)
    assert "larger than 4096 bytes" in _refusal(settings)


def test_a_cursor_size_is_held_to_a_fixed_top_k(tmp_path: Path) -> None:
    settings = NautilusSettings(ranking_top_k=3, data_dir=tmp_path / "data")
    ten = signed_cursor(settings.model_copy(update={"ranking_top_k": 10}), size=10)
    with pytest.raises(PageError, match="this caller's page size is fixed"):
        paging(QUERY, settings, IDS, cursor=ten, size_fixed=True)
    # a caller who may choose its page size pages on by the cursor's
    unsized = paging(QUERY, settings.model_copy(update={"ranking_top_k": None}), IDS, cursor=ten)
    assert unsized is not None and unsized.size == 10


# -- through a real serve and the command line, sharing one data directory --------------

KEYS = "k-support profile=support\n"
FIXED = {
    "NAUTILUS_PROFILES__SUPPORT__SOURCE_BOOSTS": "runbooks:high",
    "NAUTILUS_PROFILES__SUPPORT__RANKING_TOP_K": "3",
    "NAUTILUS_SERVE_ALLOW_OVERRIDES": "false",
}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, dict[str, str]]]:
    tmp = tmp_path_factory.mktemp("cursor-keys")
    (tmp / "keys").write_text(KEYS)
    (tmp / "keys").chmod(0o600)  # a secret: owner-only
    env = {
        "NAUTILUS_CONFIG": str(sources_file(tmp, timeout_s=None)),
        "NAUTILUS_SERVE_API_KEYS_FILE": str(tmp / "keys"),
        **FIXED,
    }
    with running(tmp, env) as server:
        assert wait_ready(server).status_code == 200, server.logs()
        yield server, {**env, "NAUTILUS_DATA_DIR": str(tmp / "data")}


def ask(server: Server, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(
        server.url + "/v1/query", json=body, headers={"X-API-Key": "k-support"}, timeout=30
    )


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run_nautilus("query", QUERY, "--profile", "support", "--json", *args, env=env)


@pytest.mark.slow
def test_a_forged_page_size_is_refused_under_a_profile_fixed_at_top_k_3(
    served: tuple[Server, dict[str, str]],
) -> None:
    server, env = served
    first = ask(server, {"query": QUERY})
    assert first.status_code == 200, first.text
    cursor = first.json()["next_cursor"]
    tag, body = body_of(cursor)
    assert body["s"] == 3
    bigger = json.dumps({**body, "s": 10}, separators=(",", ":"), sort_keys=True).encode()
    key = (Path(env["NAUTILUS_DATA_DIR"]) / KEY_FILE).read_bytes().strip()
    for forged, reason in (
        (encode(tag + bigger), "not a cursor nautilus made"),  # the attack: s edited
        (encode(json.dumps({**body, "v": 1, "s": 10}).encode(), prefix=""), "earlier version"),
        # signed with the server's own key, its ranking key left as made for 3 rows
        (encode(CursorKeys(key).sign(bigger) + bigger), "another query or other settings"),
    ):
        refused = ask(server, {"query": QUERY, "cursor": forged})
        assert refused.status_code == 422, refused.text
        problem = refused.json()
        assert problem["field"] == "cursor" and reason in problem["detail"]
    following = ask(server, {"query": QUERY, "cursor": cursor})
    assert following.status_code == 200, following.text
    assert [e["rank"] for e in following.json()["ranking"]] == [4, 5, 6]


@pytest.mark.slow
def test_the_command_line_and_serve_honour_each_others_cursors(
    served: tuple[Server, dict[str, str]],
) -> None:
    server, env = served
    made = cli(env)
    assert made.returncode == 0, made.stderr
    over_http = ask(server, {"query": QUERY, "cursor": json.loads(made.stdout)["next_cursor"]})
    assert over_http.status_code == 200, over_http.text
    assert over_http.json()["page"]["first_rank"] == 4
    third = cli(env, "--cursor", over_http.json()["page"]["next_cursor"])
    assert third.returncode == 0, third.stderr
    page = json.loads(third.stdout)["page"]
    assert (page["number"], page["first_rank"]) == (3, 7)


@pytest.mark.slow
def test_mcp_honours_a_cursor_serve_made_through_the_key_file(
    served: tuple[Server, dict[str, str]], tmp_path: Path
) -> None:
    server, env = served
    cursor = ask(server, {"query": QUERY})
    assert cursor.status_code == 200, cursor.text
    base = plain_environment()
    # stdio has no caller key to grant a profile: without a keys file it may name any
    own = {k: v for k, v in env.items() if k != "NAUTILUS_SERVE_API_KEYS_FILE"}
    params = StdioServerParameters(command=NAUTILUS, args=["mcp"], env={**base, **own})

    async def follow() -> dict[str, Any]:
        with (tmp_path / "mcp.log").open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                arguments = {"query": QUERY, "profile": "support"}
                result = await client.call_tool(
                    "search", {**arguments, "cursor": cursor.json()["next_cursor"]}
                )
                assert not result.is_error, result.content
                out: dict[str, Any] = result.structured_content
                return out

    page = asyncio.run(follow())["page"]
    assert (page["number"], page["first_rank"]) == (2, 4)


def test_a_cursor_never_reads_as_a_command_line_flag_whatever_its_key(tmp_path: Path) -> None:
    # a cursor is pasted after --cursor: one starting with '-' would be read as a flag
    first = paging(QUERY, NautilusSettings(ranking_top_k=3, data_dir=tmp_path), IDS, page=1)
    assert first is not None
    keys = [CursorKeys(hashlib.sha256(str(i).encode()).digest()) for i in range(300)]
    cursors = [Paging(2, 3, first.key, "data", keys=k).cursor() for k in keys]
    assert [c for c in cursors if c.startswith("-")] == []
