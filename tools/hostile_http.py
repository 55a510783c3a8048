"""A hostile HTTP server on loopback, for the tests of nautilus' HTTP clients: it answers
each request as the first part of its path says, over a raw socket (no framework between
the test and the bytes).

    with hostile_server() as url:
        HitSource(url=f"{url}/trickle").hits("q")   # a byte every TRICKLE_S, for ever

``/trickle`` — headers, then one body byte every :data:`TRICKLE_S` seconds;
``/slow-headers`` — the status line and headers one byte at a time, as slowly;
``/huge`` — a 200 declaring no length, then zeros until the client goes (64 MiB at most);
``/huge-declared`` — a ``Content-Length`` of 64 MiB, then zeros;
``/fifty-mb`` — a 200 declaring no length, then 50 MB of zeros;
``/gzip-bomb`` — a 200 whose gzip body (64 KiB) inflates to 64 MiB;
``/retry/<status>/<seconds>/<n>`` — ``status`` with ``Retry-After: seconds`` (none when
``-``) to the path's first ``n`` requests, then a 200 with :data:`ONE_HIT`;
``/then-fail/<n>`` — two hits to the path's first ``n`` requests, then a 500;
``/redirect`` — a 302 to a cloud metadata address;
``/body/<name>`` — a 200 (or the status in :data:`BODIES`) with ``BODIES[name]`` as body;
``/bomb/<coding>`` — a 200 whose body (``Content-Encoding: gzip, gzip``, ``deflate``,
``zstd`` or ``br``) inflates past :data:`BOMB_BYTES` (1 GiB), a few kB on the wire;
``/bad-gzip`` — a 200 saying ``Content-Encoding: gzip`` over bytes that are not gzip;
``/redirect-to?u=URL`` — a 302 to ``URL``; ``/loop`` — a 302 to itself, for ever;
``/echo-401/<pad>`` — a 401 whose error quotes every credential the request carried
(each header's value, its bare token, a basic pair decoded, its password), after
``pad`` characters (so that a cut at a message's length falls inside one);
``/then-trickle/<n>`` — two hits to the path's first ``n`` requests, then ``/trickle``.
Every connection's bytes sent are counted in ``Hostile.sent``, every request's path in
``Hostile.paths`` and its head (request line and headers) in ``Hostile.heads``.
:func:`hostile_entry` is a sources-file entry of an ``http`` source that asks one of them.
"""

from __future__ import annotations

import base64
import functools
import gzip
import json
import socket
import socketserver
import struct
import threading
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

TRICKLE_S = 0.3
HUGE_BYTES = 64 << 20
#: What a compression bomb inflates to (a little over 1 GiB).
BOMB_BYTES = (1 << 30) + (1 << 20)
#: Request headers whose values ``/echo-401`` quotes back.
ECHOED = (b"authorization", b"x-api-key", b"x-typesense-api-key")
FIFTY_MB = 50_000_000
#: An answer in Elasticsearch's shape with one hit.
ONE_HIT = json.dumps(
    {"hits": {"hits": [{"_id": "h1", "_score": 1.0, "_source": {"title": "one hit"}}]}}
).encode()
_ENTRY = {"source_id": "a", "rank": 1, "score": 0.5}
#: Bad answers a service (or something posing as one) may give: name -> (status, body).
BODIES: dict[str, tuple[int, bytes]] = {
    "not-json": (200, b"<html>gateway error</html>"),
    "not-utf8": (200, b'{"ranking": "\xff\xfe"}'),
    "empty": (200, b""),
    "deep": (200, b"[" * 100_000 + b"]" * 100_000),
    "huge-int": (200, b'{"ranking": ' + b"9" * 5000 + b"}"),
    "a-list": (200, b"[]"),
    "no-ranking": (200, b"{}"),
    "ranking-not-list": (200, b'{"ranking": 5}'),
    "entry-not-object": (200, b'{"ranking": [5], "data": {}}'),
    "no-source-id": (200, json.dumps({"ranking": [{"rank": 1}], "data": {}}).encode()),
    "unhashable-source": (
        200,
        json.dumps({"ranking": [{**_ENTRY, "source_id": ["a"]}], "data": {}}).encode(),
    ),
    "no-data": (200, json.dumps({"ranking": [_ENTRY]}).encode()),
    "data-a-list": (200, json.dumps({"ranking": [_ENTRY], "data": []}).encode()),
    "row-missing": (200, json.dumps({"ranking": [_ENTRY], "data": {"a": []}}).encode()),
    "row-not-object": (200, json.dumps({"ranking": [_ENTRY], "data": {"a": [5]}}).encode()),
    "rank-not-int": (
        200,
        json.dumps({"ranking": [{**_ENTRY, "rank": "first"}], "data": {"a": [{"id": 1}]}}).encode(),
    ),
    "score-not-number": (
        200,
        json.dumps(
            {"ranking": [{**_ENTRY, "score": {"x": 1}}], "data": {"a": [{"id": 1}]}}
        ).encode(),
    ),
    "error-a-list": (500, b"[1, 2]"),
    "html-500": (500, b"<html><body><h1>500 Internal Server Error</h1></body></html>"),
    "one-bad-hit": (
        200,
        json.dumps(
            {
                "hits": {
                    "hits": [
                        {"_id": "a", "_score": 2.0},
                        {"_id": None, "_score": 1.5},
                        {"_id": "b", "_score": 1.0},
                    ]
                }
            }
        ).encode(),
    ),
    "wrong-shape": (200, b'{"hits": {"hits": {"total": 3}}}'),
    "deep-100": (200, b'{"hits": {"hits": ' + b"[" * 100 + b"]" * 100 + b"}}"),
    # a million empty hits in 3 MB: each one unmappable
    "empty-hits": (200, b'{"hits": {"hits": [' + b",".join([b"{}"] * 1_000_000) + b"]}}"),
    "nan-ids": (
        200,
        b'{"hits": {"hits": [{"_id": NaN, "_score": 3.0}, {"_id": "a", "_score": 2.0}, '
        b'{"_id": Infinity, "_score": 1.5}, {"_id": -Infinity, "_score": 1.2}, '
        b'{"_id": "b", "_score": 1.0}]}}',
    ),
    # a score of 401 digits (no float holds it), beside good hits
    "huge-score": (
        200,
        b'{"hits": {"hits": [{"_id": "a", "_score": 2.0}, {"_id": "big", "_score": 1'
        + b"0" * 400
        + b'}, {"_id": "b", "_score": 1.0}]}}',
    ),
    # a hit whose id is an object quoting the path of the first: a bad hit among good ones
    "object-id": (
        200,
        json.dumps(
            {
                "hits": {
                    "hits": [
                        {"_id": "a", "_score": 2.0},
                        {"_id": {"nested": [1, 2]}, "_score": 1.5},
                        {"_id": "b", "_score": "high"},
                        {"_id": "c", "_score": 1.0},
                    ]
                }
            }
        ).encode(),
    ),
}


def _deflate_zeros(size: int) -> bytes:
    """A raw deflate stream of ``size`` zero bytes, built without compressing them all:
    after a full flush the compressor starts afresh, so each MiB compresses to the same
    bytes, repeated."""
    block = b"\0" * (1 << 20)
    first = zlib.compressobj(9, zlib.DEFLATED, -15)
    piece = first.compress(block) + first.flush(zlib.Z_FULL_FLUSH)
    last = zlib.compressobj(9, zlib.DEFLATED, -15)
    tail_size = size - (size >> 20 << 20)
    tail = last.compress(b"\0" * tail_size) + last.flush() if tail_size else last.flush()
    return piece * (size >> 20) + tail


def _crc_zeros(size: int) -> int:
    crc, block = 0, b"\0" * (1 << 20)
    for _ in range(size >> 20):
        crc = zlib.crc32(block, crc)
    return zlib.crc32(b"\0" * (size - (size >> 20 << 20)), crc)


@functools.cache
def bomb(coding: str) -> bytes:
    """A body of ``coding`` (``gzip, gzip``, ``deflate``, ``zstd``, ``br``) that inflates to
    :data:`BOMB_BYTES` zero bytes (``br``: a few bytes no decoder is asked to read)."""
    size = BOMB_BYTES
    if coding == "deflate":  # zlib's wrapping of a deflate stream (RFC 1950)
        adler = (size % 65521) << 16 | 1  # Adler-32 of zeros: a = 1, b = size mod 65521
        return b"\x78\xda" + _deflate_zeros(size) + struct.pack(">I", adler)
    if coding in ("gzip", "gzip, gzip"):
        inner = (
            b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
            + _deflate_zeros(size)
            + struct.pack("<II", _crc_zeros(size), size & 0xFFFFFFFF)
        )
        return inner if coding == "gzip" else gzip.compress(inner, 9)
    if coding == "zstd":  # one frame of 128 KiB RLE blocks: 4 bytes each
        block = 128 << 10
        frame = bytearray(b"\x28\xb5\x2f\xfd\x00\x38")  # magic; no size; 128 KiB window
        count = size // block
        for i in range(count):
            last = 1 if i == count - 1 else 0
            frame += (block << 3 | 1 << 1 | last).to_bytes(3, "little") + b"\0"
        return bytes(frame)
    if coding == "br":
        return b"\x0b\xff\xff\xff"
    raise ValueError(f"no bomb of {coding!r}")


def _echoed(head: bytes) -> str:
    """Every credential a request's head carried, as an engine's error might quote it."""
    quoted = []
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() not in ECHOED:
            continue
        text = value.strip().decode("latin-1")
        scheme, _, bare = text.partition(" ")
        quoted += [text, bare or scheme]
        if scheme.lower() == "basic":
            pair = base64.b64decode(bare).decode("latin-1")
            quoted += [pair, pair.partition(":")[2]]
    return " | ".join(quoted)


@functools.cache
def gzip_bomb() -> bytes:
    """64 MiB of zeros, gzipped (about 64 KiB)."""
    return gzip.compress(b"0" * HUGE_BYTES, compresslevel=9)


@dataclass
class Hostile:
    url: str
    sent: list[int] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    heads: list[bytes] = field(default_factory=list)


def hostile_entry(url: str, path: str, *, timeout_s: float, **options: Any) -> dict[str, Any]:
    """A sources-file entry of an ``http`` source, ``bad``, that asks the server at ``url``
    for ``path`` (an Elasticsearch-shaped body and mapping) within ``timeout_s``; ``options``
    add keys or replace them."""
    return {
        "id": "bad",
        "type": "http",
        "url": f"{url}/{path}",
        "body": {"q": "{{query}}", "size": "{{size}}"},
        "response": {"hits": "hits.hits", "id": "_id", "title": "_source.title", "score": "_score"},
        "timeout_s": timeout_s,
        **options,
    }


@contextmanager
def hostile_server() -> Iterator[Hostile]:
    """The server on a free loopback port, stopped (connections closed) when left."""
    state = Hostile("")
    stop = threading.Event()

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            conn: socket.socket = self.request
            conn.settimeout(30)
            sent = 0
            try:
                head = b""
                while b"\r\n\r\n" not in head:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    head += chunk
                path = head.split(b" ", 2)[1].decode()
                state.paths.append(path)
                state.heads.append(head.split(b"\r\n\r\n")[0])
                mode = [unquote(p) for p in path.split("?")[0].strip("/").split("/")]
                seen = state.paths.count(path)
                sent = _answer(conn, mode, stop, seen, head, path)
            except OSError:
                pass
            finally:
                state.sent.append(sent)

    class Server(socketserver.ThreadingTCPServer):
        daemon_threads = True
        allow_reuse_address = True

    server = Server(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        stop.set()
        server.shutdown()
        server.server_close()


def _answer(
    conn: socket.socket,
    mode: list[str],
    stop: threading.Event,
    seen: int = 1,
    head: bytes = b"",
    path: str = "",
) -> int:
    """Answer as ``mode`` says (``seen``: how many requests this path has had; ``head``
    and ``path``: the request's); the bytes sent."""
    sent = 0

    def send(data: bytes) -> None:
        nonlocal sent
        conn.sendall(data)
        sent += len(data)

    if mode[0] == "then-trickle":
        if seen <= int(mode[1]):
            hits = [{"_id": f"p{seen}-{i}", "_score": 1.0 / (i + 1)} for i in range(2)]
            body = json.dumps({"hits": {"hits": hits}}).encode()
            send(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                + body
            )
        else:
            mode = ["trickle"]
    if mode[0] == "trickle":
        send(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n")
        while not stop.wait(TRICKLE_S):
            send(b" ")
    elif mode[0] == "slow-headers":
        for byte in b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Pad: " + b"x" * 500:
            if stop.wait(TRICKLE_S):
                break
            send(bytes([byte]))
    elif mode[0] in ("huge", "huge-declared"):
        length = f"Content-Length: {HUGE_BYTES}\r\n" if mode[0] == "huge-declared" else ""
        send(
            f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{length}"
            "Connection: close\r\n\r\n".encode()
        )
        block = b"0" * (1 << 20)
        for _ in range(HUGE_BYTES >> 20):
            if stop.is_set():
                break
            send(block)
    elif mode[0] == "fifty-mb":
        send(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n")
        block = b"0" * 1_000_000
        for _ in range(FIFTY_MB // len(block)):
            if stop.is_set():
                break
            send(block)
    elif mode[0] == "gzip-bomb":
        body = gzip_bomb()
        send(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
            + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            + body
        )
    elif mode[0] == "retry":
        status, seconds, times = int(mode[1]), mode[2], int(mode[3])
        if seen <= times:
            after = "" if seconds == "-" else f"Retry-After: {seconds}\r\n"
            send(
                f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n{after}"
                "Content-Length: 2\r\nConnection: close\r\n\r\n{}".encode()
            )
        else:
            send(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(ONE_HIT)}\r\nConnection: close\r\n\r\n".encode()
                + ONE_HIT
            )
    elif mode[0] == "then-fail":
        if seen <= int(mode[1]):
            hits = [{"_id": f"p{seen}-{i}", "_score": 1.0 / (i + 1)} for i in range(2)]
            status, body = 200, json.dumps({"hits": {"hits": hits}}).encode()
        else:
            status, body = BODIES["html-500"]
        send(
            f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            + body
        )
    elif mode[0] == "redirect":
        send(
            b"HTTP/1.1 302 Found\r\nLocation: http://169.254.169.254/latest/meta-data\r\n"
            b"Content-Length: 0\r\nConnection: close\r\n\r\n"
        )
    elif mode[0] in ("bomb", "bad-gzip"):
        coding = mode[1].replace("-", ", ") if mode[0] == "bomb" else "gzip"
        body = bomb(coding) if mode[0] == "bomb" else b"this is not gzip at all"
        send(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            + f"Content-Encoding: {coding}\r\nContent-Length: {len(body)}\r\n".encode()
            + b"Connection: close\r\n\r\n"
            + body
        )
    elif mode[0] in ("redirect-to", "loop"):
        query = parse_qs(urlsplit(path).query)
        location = query["u"][0] if mode[0] == "redirect-to" else "/loop"
        send(
            f"HTTP/1.1 302 Found\r\nLocation: {location}\r\n"
            "Content-Length: 0\r\nConnection: close\r\n\r\n".encode()
        )
    elif mode[0] == "echo-401":
        reason = "x" * int(mode[1]) + " unable to authenticate with " + _echoed(head)
        body = json.dumps({"error": {"type": "security_exception", "reason": reason}}).encode()
        send(
            b"HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            + body
        )
    elif mode[0] == "body":
        status, body = BODIES[mode[1]]
        send(
            f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            + body
        )
    time.sleep(0.05)
    return sent
