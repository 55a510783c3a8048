"""A small JSON search engine on loopback, for the tests and benchmarks of the HTTP
sources: it keeps connections alive (HTTP/1.1), counts them, records every request it
gets, and answers in Elasticsearch's shape.

    with json_engine(docs) as engine:
        ...  # POST {engine.url}/docs/_search {"query": {"multi_match": {"query": q}},
             #                                 "size": n, "from": k}
        engine.connections, engine.requests

``POST /<index>/_search`` scores each document by the query's words it contains (ties
by id) and answers ``{"hits": {"hits": [{"_id", "_score", "_source"}]}}`` from ``from``
for ``size`` hits; ``GET /search?q=&size=&offset=`` answers the same hits as
``{"results": [...]}``. ``delay_s`` holds every answer that long (an engine's own
time); ``tls`` (a certificate and its key, PEM files) serves HTTPS.
"""

from __future__ import annotations

import json
import re
import socketserver
import ssl
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

_WORD = re.compile(r"\w+")


@dataclass
class Engine:
    url: str
    docs: Sequence[dict[str, Any]]
    delay_s: float = 0.0
    connections: int = 0
    requests: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def search(self, query: str) -> list[dict[str, Any]]:
        words = set(_WORD.findall(query.lower()))
        scored = []
        for doc in self.docs:
            text = " ".join(str(v) for v in doc.values() if isinstance(v, str)).lower()
            score = len(words & set(_WORD.findall(text)))
            if score:
                scored.append((-score, str(doc["id"]), doc))
        scored.sort(key=lambda t: (t[0], t[1]))
        return [
            {"_id": str(doc["id"]), "_score": float(-neg), "_source": doc} for neg, _, doc in scored
        ]


@contextmanager
def json_engine(
    docs: Sequence[dict[str, Any]], delay_s: float = 0.0, tls: tuple[Path, Path] | None = None
) -> Iterator[Engine]:
    """The engine on a free loopback port, stopped when left."""
    engine = Engine("", docs, delay_s)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            with engine.lock:
                engine.connections += 1

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(self, status: int, value: Any) -> None:
            if engine.delay_s:
                time.sleep(engine.delay_s)
            body = json.dumps(value).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw)
            except ValueError:
                self._send(400, {"error": {"type": "parse_exception", "reason": "not JSON"}})
                return
            with engine.lock:
                engine.requests.append(
                    {
                        "method": "POST",
                        "path": self.path,
                        "body": body,
                        "raw": raw,
                        "headers": dict(self.headers),
                    }
                )
            if not self.path.endswith("/_search") or not isinstance(body, dict):
                self._send(404, {"error": {"type": "not_found", "reason": self.path}})
                return
            try:
                query = body["query"]["multi_match"]["query"]
                size, start = int(body.get("size", 10)), int(body.get("from", 0))
            except (KeyError, TypeError, ValueError) as exc:
                self._send(400, {"error": {"type": "parsing_exception", "reason": str(exc)}})
                return
            hits = engine.search(str(query))[start : start + size]
            self._send(200, {"took": 1, "hits": {"hits": hits}})

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            params = parse_qs(parts.query, keep_blank_values=True)
            with engine.lock:
                engine.requests.append(
                    {
                        "method": "GET",
                        "path": parts.path,
                        "params": params,
                        "headers": dict(self.headers),
                    }
                )
            if parts.path == "/health":
                self._send(200, {"ok": True})
                return
            query = params.get("q", [""])[0]
            size = int(params.get("size", ["10"])[0])
            start = int(params.get("offset", ["0"])[0])
            self._send(200, {"results": engine.search(query)[start : start + size]})

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        allow_reuse_address = True

    server: socketserver.TCPServer = Server(("127.0.0.1", 0), Handler)
    scheme = "http"
    if tls is not None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(str(tls[0]), str(tls[1]))
        server.socket = context.wrap_socket(server.socket, server_side=True)
        scheme = "https"
    engine.url = f"{scheme}://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield engine
    finally:
        server.shutdown()
        server.server_close()
