"""Real ``nautilus-ranking serve`` processes on a free loopback port, for the service tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
NAUTILUS = str(Path(sys.executable).with_name("nautilus-ranking"))
SLOW_SERVE = str(ROOT / "tools" / "slow_serve.py")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Server:
    url: str
    process: subprocess.Popen[str]
    log: Path

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM (what Kubernetes sends), then wait: the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait(5)

    def logs(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")


@contextmanager
def running(
    tmp: Path,
    env: Mapping[str, str] | None = None,
    workers: int = 1,
    launcher: list[str] | None = None,
    subcommand: Sequence[str] = ("serve",),
    program: str = NAUTILUS,
) -> Iterator[Server]:
    """A server with only ``env``'s NAUTILUS_* settings (plus a private data dir and
    the caller's ``NAUTILUS_EMBEDDER``, which the test suite pins), ready (``/healthz``
    answers) when entered, stopped when left. ``subcommand`` may be
    ``("mcp", "--transport", "http")``; ``program`` another checkout's command."""
    port = free_port()
    base = {k: v for k, v in os.environ.items() if not k.upper().startswith("NAUTILUS_")}
    base.pop("PROMETHEUS_MULTIPROC_DIR", None)
    if "NAUTILUS_EMBEDDER" in os.environ:
        base["NAUTILUS_EMBEDDER"] = os.environ["NAUTILUS_EMBEDDER"]
    full_env = {
        **base,
        "NAUTILUS_DATA_DIR": str(tmp / "data"),
        "NAUTILUS_LOG_FORMAT": "json",
        **(env or {}),
    }
    args = [*subcommand, "--host", "127.0.0.1", "--port", str(port)]
    if tuple(subcommand) == ("serve",):
        args += ["--workers", str(workers)]
    command = (
        [sys.executable, SLOW_SERVE, *launcher, "--", *args]
        if launcher is not None
        else [program, *args]
    )
    log = tmp / f"server-{port}.log"
    with log.open("w", encoding="utf-8") as sink:
        process = subprocess.Popen(
            command, env=full_env, cwd=tmp, stdout=sink, stderr=subprocess.STDOUT, text=True
        )
    server = Server(f"http://127.0.0.1:{port}", process, log)
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"server exited {process.returncode}:\n{server.logs()}")
            try:
                if httpx.get(server.url + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"server not up after 60 s:\n{server.logs()}")
            time.sleep(0.1)
        yield server
    finally:
        server.stop()


def wait_ready(server: Server, timeout: float = 30.0) -> httpx.Response:
    """Poll ``/readyz`` until it answers 200 (the first probe builds the databases)."""
    deadline = time.monotonic() + timeout
    while True:
        response = httpx.get(server.url + "/readyz", timeout=5)
        if response.status_code == 200 or time.monotonic() > deadline:
            return response
        time.sleep(0.1)


def wait_failing(
    server: Server,
    headers: Mapping[str, str],
    failing: Sequence[str],
    reason: str,
    timeout: float = 60.0,
) -> dict[str, str]:
    """Poll ``/readyz`` (as the caller of ``headers`` sees it) until exactly ``failing``
    are not answering, each for ``reason``: the event itself, not a guess at how many
    probe intervals it takes on a busy machine. Before the first probe, while a model
    loads, or while a source's last success is still fresh, ``/readyz`` says otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        response = httpx.get(server.url + "/readyz", headers=dict(headers), timeout=5)
        found = response.json().get("failing", {}) if response.status_code == 503 else {}
        if list(found) == list(failing) and all(reason in why for why in found.values()):
            return dict(found)
        if time.monotonic() > deadline:
            raise AssertionError(f"/readyz never named only {list(failing)}: {response.text}")
        time.sleep(0.1)
