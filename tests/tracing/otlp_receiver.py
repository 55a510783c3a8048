"""A real OTLP/HTTP traces receiver on loopback: ``POST /v1/traces`` with an
``ExportTraceServiceRequest`` in protobuf (gzip or not), each span recorded, answered
as a collector answers (200, an empty ``ExportTraceServiceResponse``)."""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


@dataclass(frozen=True)
class Received:
    """One exported span, as the receiver decoded it (ids in hex)."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str
    service: str


@dataclass
class Receiver:
    url: str
    spans: list[Received] = field(default_factory=list)
    posts: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def of_trace(self, trace_id: str) -> dict[str, Received]:
        with self.lock:
            return {s.name: s for s in self.spans if s.trace_id == trace_id}

    def until(
        self, trace_id: str, name: str, why: Callable[[], object], timeout: float = 30.0
    ) -> None:
        """Wait until span ``name`` of ``trace_id`` has arrived (a batch processor sends
        every few seconds); failing after ``timeout``, show ``why()`` (the server's logs)."""
        deadline = time.monotonic() + timeout
        while name not in self.of_trace(trace_id):
            assert time.monotonic() < deadline, (self.spans, why())
            time.sleep(0.2)


@contextmanager
def otlp_receiver() -> Iterator[Receiver]:
    receiver = Receiver("")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path != "/v1/traces":
                self.send_response(404)
                self.end_headers()
                return
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            got = []
            for resource_spans in request.resource_spans:
                service = next(
                    (
                        a.value.string_value
                        for a in resource_spans.resource.attributes
                        if a.key == "service.name"
                    ),
                    "",
                )
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        got.append(
                            Received(
                                span.name,
                                span.trace_id.hex(),
                                span.span_id.hex(),
                                span.parent_span_id.hex(),
                                service,
                            )
                        )
            with receiver.lock:
                receiver.spans.extend(got)
                receiver.posts += 1
            payload = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
