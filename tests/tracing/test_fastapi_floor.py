"""The oldest FastAPI the ``serve`` extra allows has no telemetry of its own: no server
span continues the caller's ``traceparent``. The request span continues it all the same
(``tracing/carry.py``, ``continued``). A real ``serve`` runs with that FastAPI (and a
Starlette it accepts) first on its path, installed from the package index into a folder
of the test's own, and exports to a real OTLP/HTTP receiver on loopback."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from otlp_receiver import otlp_receiver

from nautilus_ranking.tracing import PREFIX as P
from tools.servers import running

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CALLER_TRACE = f"{0xF100:032x}"
CALLER_SPAN = "c7ad6b7169203331"


def floor() -> str:
    """The ``serve`` extra's lowest FastAPI, as pyproject.toml declares it."""
    found = re.search(r'"fastapi>=([\d.]+)"', (ROOT / "pyproject.toml").read_text("utf-8"))
    assert found, "pyproject.toml declares no fastapi floor"
    return found.group(1)


def test_the_oldest_fastapi_allowed_continues_the_callers_trace(tmp_path: Path) -> None:
    packages = tmp_path / "packages"

    def install(*requirements: str) -> None:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-deps",
                "--target",
                str(packages),
                *requirements,
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0:
            pytest.skip(f"the package index did not give {requirements}: {done.stderr[-300:]}")

    install(f"fastapi=={floor()}")
    [metadata] = packages.glob("fastapi-*.dist-info/METADATA")
    [starlette] = re.findall(r"^Requires-Dist: (starlette\S*)", metadata.read_text(), re.M)
    install(starlette)  # the Starlette that FastAPI accepts; the rest is the venv's
    imported = subprocess.run(
        [sys.executable, "-c", "import fastapi; print(fastapi.__version__)"],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(packages), "PATH": ""},
        timeout=60,
    )
    assert imported.stdout.strip() in {floor(), floor() + ".0"}, imported.stderr
    with otlp_receiver() as receiver:
        env = {
            "OTEL_SERVICE_NAME": "nautilus-floor",
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,  # a collector, on loopback
            "OTEL_BSP_SCHEDULE_DELAY": "50",
            "PYTHONPATH": str(packages),
            "NAUTILUS_RANKING_TOP_K": "3",
        }
        with running(tmp_path, env) as server:
            answer = httpx.post(
                server.url + "/v1/query",
                json={"query": "orders-db disk full"},
                headers={"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"},
                timeout=60,
            )
            assert answer.status_code == 200, answer.text
            receiver.until(CALLER_TRACE, f"{P}request", server.logs)
        spans = receiver.of_trace(CALLER_TRACE)
    # no server span of FastAPI's: the request span is right under the caller's
    request = spans[f"{P}request"]
    assert request.parent_id == CALLER_SPAN
    assert request.service == "nautilus-floor"
