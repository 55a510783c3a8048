"""A DSN's password never leaves nautilus, however it was written: unencoded ``/``, ``@``,
``#``, ``&`` in a URL, ``"…"`` or ``''…''`` quoting in key=value form. Properties over
generated passwords (every printable character) through the mask, the driver's own error
(the real psycopg/libpq), a broker's ``sources_errored`` and the sources-file check; the
CLI, the service (``/readyz``, ``POST /v1/query``, logs) and the MCP tools for the DSNs
the reports quoted."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from cli_process import NAUTILUS, run_nautilus
from fakes import write_jsonl
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from plain_environment import plain_environment
from psycopg.conninfo import conninfo_to_dict

from nautilus_ranking import Broker
from nautilus_ranking.sources.factory import SourceConfigError, build_sources
from nautilus_ranking.sources.postgres.dsn import (
    KEYWORDS,
    MISREAD,
    SECRET_KEYWORDS,
    mask_dsn,
    misread,
    scrub,
)
from tools.servers import running

KEY = "k-7d1e0c44a9"
#: Pieces of every generated password: none may appear in anything shown.
MARKERS = ("Qz1x", "Wv2y", "Jk3u")
PRINTABLE = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cc", "Cs"))
    | st.sampled_from(" \t/@:#?&='\"\\%"),
    max_size=6,
)
QUOTED_FORMS = {  # how an operator may have written it
    "url": "postgresql://u:{pw}@127.0.0.1:1/d?connect_timeout=1",
    "url_query": "postgresql://u@127.0.0.1:1/d?password={pw}&connect_timeout=1",
    "bare": "host=127.0.0.1 port=1 user=u password={pw} dbname=d connect_timeout=1",
    "double": 'host=127.0.0.1 port=1 user=u password="{pw}" dbname=d connect_timeout=1',
    "doubled": "host=127.0.0.1 port=1 user=u password=''{pw}'' dbname=d connect_timeout=1",
    "libpq": "host=127.0.0.1 port=1 user=u password='{quoted}' dbname=d connect_timeout=1",
}
#: The DSNs the reports quoted.
REPORTED = [
    "postgresql://u:S3cr3t/Tail9@127.0.0.1:1/d",
    "postgresql://u:S3cr3t@Tail9@127.0.0.1:1/d",
    'host=127.0.0.1 port=1 user=u password="S3cr3t Tail9" dbname=d',
    "host=127.0.0.1 port=1 user=u password=''S3cr3t Tail9'' dbname=d",
    # a word without '=' before it: libpq stops reading at the stray word
    "host=127.0.0.1 port=1 user=u sslmode password=S3cr3tTail9 dbname=d",
    # an empty value before it: libpq reads a database named 'password=S3cr3tTail9'
    "host=127.0.0.1 port=1 user=u dbname= password=S3cr3tTail9",
]
#: The reported DSNs that a server starts with (the others are refused at start-up).
SERVED = [*REPORTED[:2], REPORTED[5]]


def password(parts: list[str]) -> str:
    return "".join(p + m for p, m in zip(parts, MARKERS, strict=False)) + parts[-1]


def dsn_for(form: str, pw: str) -> str:
    quoted = pw.replace("\\", "\\\\").replace("'", "\\'")
    return QUOTED_FORMS[form].format(pw=pw, quoted=quoted)


def hidden(text: str) -> bool:
    return not any(marker in text for marker in MARKERS)


def another_option(form: str, pw: str) -> bool:
    """A password that itself spells the next option (``a dbname=b``) is that option."""
    words = "|".join(KEYWORDS)
    return bool(
        re.search(rf"[\s]({words})\s*=", pw)
        if not form.startswith("url")
        else re.search(rf"&({words})=", pw)
    )


PASSWORDS = st.lists(PRINTABLE, min_size=4, max_size=4).map(password)


@settings(max_examples=300, deadline=None)
@given(form=st.sampled_from(sorted(QUOTED_FORMS)), pw=PASSWORDS)
@example(form="url", pw="S3cr3t/tail" + "".join(MARKERS))
@example(form="url", pw="pa@ss" + "".join(MARKERS))
@example(form="doubled", pw="x " + "".join(MARKERS))
def test_the_mask_and_the_scrubbed_driver_error_hide_every_password(form: str, pw: str) -> None:
    assume(not another_option(form, pw))
    dsn = dsn_for(form, pw)
    masked = mask_dsn(dsn)
    assert hidden(masked), masked
    assert "***" in masked, masked
    if form == "url":  # the host and database stay readable
        assert masked == "postgresql://u:***@127.0.0.1:1/d?connect_timeout=1"
    try:
        psycopg.connect(dsn, connect_timeout=1).close()
    except (psycopg.Error, ValueError) as exc:  # the driver's words (IDNA: UnicodeError)
        message = scrub(str(exc), dsn)
        assert hidden(message), message
        assert message == MISREAD or not misread(dsn)
    else:  # pragma: no cover - nothing listens on port 1
        pytest.fail("connected to port 1")


#: Words of a keyword/value DSN: libpq's keywords and others.
WORDS = st.sampled_from(sorted(KEYWORDS - SECRET_KEYWORDS)) | st.from_regex(
    r"[a-z_]{1,8}", fullmatch=True
)
#: An option with a value, an empty one, or a stray word with no '='.
PARTS = st.one_of(
    st.tuples(WORDS, st.sampled_from(["v", "kb", "'a b'", r"x\ y", "3"])).map("=".join),
    WORDS.map(lambda w: w + "="),
    WORDS,
)


def libpq_quoted(pw: str) -> str:
    return "'" + pw.replace("\\", "\\\\").replace("'", "\\'") + "'"


def libpq_bare(pw: str) -> str:
    return "".join("\\" + c if c in " \t\n\v\f\r'\\" else c for c in pw) or "''"


@settings(max_examples=300, deadline=None)
@given(
    before=st.lists(PARTS, max_size=4),
    after=st.lists(PARTS, max_size=3),
    gap=st.sampled_from([" ", "  ", "\t", " \n "]),
    keyword=st.sampled_from(sorted(SECRET_KEYWORDS)),
    spaced=st.booleans(),
    quote=st.sampled_from([libpq_bare, libpq_quoted]),
    pw=PASSWORDS,
)
@example(
    before=["host=h", "sslmode"],
    after=[],
    gap=" ",
    keyword="password",
    spaced=False,
    quote=libpq_bare,
    pw="S" + "".join(MARKERS),
)
@example(
    before=["dbname="],
    after=[],
    gap=" ",
    keyword="password",
    spaced=False,
    quote=libpq_bare,
    pw="S" + "".join(MARKERS),
)
def test_stray_words_and_empty_values_never_show_a_password(
    before: list[str],
    after: list[str],
    gap: str,
    keyword: str,
    spaced: bool,
    quote: Any,
    pw: str,
) -> None:
    """Whatever libpq makes of the words around it, ``password=`` meant a password: the
    mask, and a driver's message about the DSN (what libpq's own parser says of it, and
    the values it read), hide it."""
    option = keyword + (" = " if spaced else "=") + quote(pw)
    dsn = gap.join([*before, option, *after])
    masked = mask_dsn(dsn)
    assert hidden(masked), masked
    try:
        said = ", ".join(f'{k} "{v}"' for k, v in conninfo_to_dict(dsn).items())
    except psycopg.ProgrammingError as exc:  # libpq's parser refused it
        said = str(exc)
    message = scrub(f"connection failed: {said}", dsn)
    assert hidden(message), message


def sources_file(folder: Path, dsn: str) -> Path:
    write_jsonl(folder / "kb.jsonl", [{"id": "a1", "title": "disk full"}])
    path = folder / "sources.yaml"
    path.write_text(
        f"sources:\n  - {{id: kb, type: postgres_fts, dsn: {json.dumps(dsn)}, "
        "table: kb, columns: [title], seed: kb.jsonl, timeout_s: 3}\n",
        encoding="utf-8",
    )
    return path


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(form=st.sampled_from(sorted(QUOTED_FORMS)), pw=PASSWORDS)
@example(form="url", pw="S3cr3t/tail" + "".join(MARKERS))
def test_error_records_and_the_sources_check_hide_every_password(
    tmp_path_factory: Any, form: str, pw: str
) -> None:
    assume(not another_option(form, pw))
    folder = tmp_path_factory.mktemp("dsn")
    path = sources_file(folder, dsn_for(form, pw))
    try:
        sources, limit = build_sources(path, folder / "data", "hashing")
    except SourceConfigError as exc:  # refused as a sources file: the message hides it
        assert hidden(str(exc)), str(exc)
        return
    broker = Broker(sources, limit=limit)
    try:
        response = broker.request("disk")
    finally:
        broker.close()
    assert [e.source_id for e in response.sources_errored] == ["kb"]
    shown = json.dumps([e.__dict__ for e in response.sources_errored], default=str)
    assert hidden(shown), shown


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_nautilus(*args, env={"NAUTILUS_LOG_FORMAT": "json", **env})


@pytest.mark.parametrize("dsn", REPORTED)
def test_the_cli_never_shows_a_misread_password(tmp_path: Path, dsn: str) -> None:
    env = {
        "NAUTILUS_CONFIG": str(sources_file(tmp_path, dsn)),
        "NAUTILUS_DATA_DIR": str(tmp_path / "data"),
    }
    shown = []
    for args in (
        ["config"],
        ["config", "--json"],
        ["config", "--strict"],
        ["query", "disk", "--json"],
        ["load"],
    ):
        result = cli(*args, env=env)
        shown += [result.stdout, result.stderr]
    config = json.loads(cli("config", "--json", env=env).stdout)["sources_file"]
    if config["ok"]:
        assert "***" in config["sources"][0]["dsn"]
        query = json.loads(cli("query", "disk", "--json", env=env).stdout)
        assert query["sources_errored"][0]["source_id"] == "kb"
    for text in shown:
        assert "Tail9" not in text and "S3cr3t" not in text, text


@pytest.mark.parametrize("dsn", SERVED)
def test_the_service_and_mcp_never_show_a_misread_password(tmp_path: Path, dsn: str) -> None:
    keys = tmp_path / "keys"
    keys.write_text(KEY + "\n")
    keys.chmod(0o600)  # a secret: owner-only
    env = {
        "NAUTILUS_CONFIG": str(sources_file(tmp_path, dsn)),
        "NAUTILUS_SERVE_API_KEYS_FILE": str(keys),
        "NAUTILUS_SERVE_PROBE_INTERVAL_S": "0.3",
    }
    with running(tmp_path, env) as server:
        headers = {"X-API-Key": KEY}
        answer = httpx.post(
            server.url + "/v1/query", json={"query": "disk"}, headers=headers, timeout=30
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["sources_errored"][0]["source_id"] == "kb"
        ready = httpx.get(server.url + "/readyz", headers=headers, timeout=30)
        assert ready.status_code == 503 and "kb" in ready.json()["failing"]
        config = httpx.get(server.url + "/v1/config", headers=headers, timeout=30)
        shown = [answer.text, ready.text, config.text]
    shown.append(server.logs())
    shown += mcp_outputs(tmp_path, env["NAUTILUS_CONFIG"])
    for text in shown:
        assert "Tail9" not in text and "S3cr3t" not in text, text


def mcp_outputs(tmp_path: Path, config: str) -> list[str]:
    """The MCP tools' answers (``search``, ``list_sources``) and the server's logs, from a
    real ``nautilus-ranking mcp`` over stdio."""
    pytest.importorskip("mcp")
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    base = plain_environment()
    env = {
        **base,
        "NAUTILUS_CONFIG": config,
        "NAUTILUS_DATA_DIR": str(tmp_path / "data"),
        "NAUTILUS_LOG_FORMAT": "json",
    }
    params = StdioServerParameters(command=NAUTILUS, args=["mcp"], env=env, cwd=tmp_path)
    errlog = tmp_path / "mcp-stderr.log"

    async def calls() -> list[str]:
        with errlog.open("w") as sink:
            async with Client(stdio_client(params, errlog=sink)) as client:
                found = await client.call_tool("search", {"query": "disk"})
                listed = await client.call_tool("list_sources", {})
        return [json.dumps(r.model_dump(mode="json"), default=str) for r in (found, listed)]

    shown = asyncio.run(calls())
    assert "kb" in shown[0] and "kb" in shown[1], shown
    return [*shown, errlog.read_text(encoding="utf-8", errors="replace")]


def test_serve_refuses_a_dsn_with_a_stray_word_without_showing_it(tmp_path: Path) -> None:
    """libpq cannot read ``sslmode password=S``: serve refuses to start, and its start-up
    message (before: the DSN whole) masks the password."""
    from tools.servers import free_port

    env = {
        "NAUTILUS_CONFIG": str(sources_file(tmp_path, REPORTED[4])),
        "NAUTILUS_DATA_DIR": str(tmp_path / "data"),
    }
    result = cli("serve", "--host", "127.0.0.1", "--port", str(free_port()), env=env)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "sslmode password=*** dbname=d" in result.stderr
    assert "Tail9" not in result.stdout + result.stderr
