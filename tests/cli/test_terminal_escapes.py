"""Engine content and error messages are someone else's text: ``sources probe`` and
``query`` show their control characters as escapes, so printing them cannot clear the
screen, set the window title, move the cursor back over a line or reorder it."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from cli_process import run_nautilus

from nautilus_ranking.cli.output import printable

#: Clear the screen, set the window title, return to the line's start and print a fake
#: verdict, a C1 CSI, DEL, and a right-to-left override.
HOSTILE = "\x1b[2J\x1b]0;owned\x07\rALL SOURCES OK\n\x9b31m\x7f\u202egnp.exe"
RAW = ("\x1b", "\x07", "\r", "\x9b", "\x7f", "\u202e")


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("\x1b[2J", "\\x1b[2J"),
        ("a\x07b\x00c\x7f", "a\\x07b\\x00c\\x7f"),
        ("\x9b31m\x85", "\\x9b31m\\x85"),
        ("line\rover", "line\\x0dover"),
        ("tab\there", "tab\\x09here"),
        ("\u202egnp.exe\u2066x\u2069\u200f", "\\u202egnp.exe\\u2066x\\u2069\\u200f"),
        ("café 日本 ✓ — “quoted”", "café 日本 ✓ — “quoted”"),
        ("one\ntwo", "one\\x0atwo"),
    ],
)
def test_control_characters_are_shown_as_escapes(text: str, shown: str) -> None:
    assert printable(text) == shown


def test_lines_keep_their_newlines_and_nothing_else() -> None:
    assert printable("one\ntwo\r\n\x1b", lines=True) == "one\ntwo\\x0d\n\\x1b"


class _Hostile(BaseHTTPRequestHandler):
    """``/ok/_search``: one hit whose title and body are :data:`HOSTILE`; ``/bad/…``: a
    401 whose message is."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        hit = {"_id": "h1", "_score": 1.0, "_source": {"title": HOSTILE, "body": HOSTILE}}
        ok = self.path.startswith("/ok")
        body = json.dumps({"hits": {"hits": [hit]}} if ok else {"message": HOSTILE}).encode()
        self.send_response(200 if ok else 401)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def hostile_engine() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hostile)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _entry(source_id: str, url: str) -> dict[str, object]:
    return {
        "id": source_id,
        "type": "elasticsearch",
        "url": url,
        "index": source_id,
        "fields": ["title", "body"],
    }


@pytest.mark.parametrize(
    "command",
    [
        ["sources", "probe", "owned"],
        ["query", "owned"],
        ["query", "owned", "--explain", "--top-k", "5"],
        ["query", "owned\x1b[2J", "--top-k", "5"],
    ],
    ids=["probe", "query", "explain", "hostile-query"],
)
def test_probe_and_query_print_no_control_character_of_an_engine(
    tmp_path: Path, command: list[str]
) -> None:
    with hostile_engine() as url:
        sources = {"sources": [_entry("ok", url), _entry("bad", url)]}
        (tmp_path / "nautilus.yaml").write_text(yaml.safe_dump(sources), "utf-8")
        env = {"NAUTILUS_DATA_DIR": str(tmp_path / "data")}
        out = run_nautilus(*command, "--config", "nautilus.yaml", env=env, cwd=tmp_path)
    assert "Traceback" not in out.stderr
    assert "\\x1b[2J" in out.stdout  # the engine's text is shown, escaped
    assert "401" in out.stdout  # and its error
    for raw in RAW:
        assert raw not in out.stdout, (raw, out.stdout)
    assert not any(line.startswith("ALL SOURCES OK") for line in out.stdout.splitlines())
