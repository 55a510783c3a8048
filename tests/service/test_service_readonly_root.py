"""``nautilus-ranking serve`` in a container with ``readOnlyRootFilesystem: true``.

The deployment manifest makes the root file system read-only and mounts one volume
at the data directory. The test does what a container runtime does: in a private
mount namespace every mount but the data directory (and /proc, /sys, /dev) is
remounted read-only — /tmp included — then the real service is started and
queried there. It needs root (``unshare --mount``); elsewhere it is skipped.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from namespaces import UNSHARE, private_mounts

from tools.servers import NAUTILUS, Server, free_port

pytestmark = pytest.mark.skipif(
    not private_mounts(), reason="needs root and unshare(1) for a private mount namespace"
)

# Remount every mount read-only except the data dir and the kernel's own file systems,
# as a container runtime does for readOnlyRootFilesystem, then run the command.
_READ_ONLY_ROOT = r"""
set -e
data="$1"; shift
mount --make-rprivate /
mount --bind "$data" "$data"
for point in $(awk '{print $2}' /proc/self/mounts | sort -u); do
  case "$point" in
    /proc|/proc/*|/sys|/sys/*|/dev|/dev/*|"$data") continue ;;
  esac
  mount -o remount,bind,ro "$point" 2>/dev/null || true
done
if touch /tmp/.nautilus-rw-check 2>/dev/null; then echo "/tmp is writable" >&2; exit 97; fi
if ! touch "$data/.nautilus-rw-check"; then echo "$data is not writable" >&2; exit 98; fi
rm -f "$data/.nautilus-rw-check"
exec "$@"
"""


def _start(tmp: Path, data: Path, workers: int) -> Server:
    port = free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.upper().startswith("NAUTILUS_") and k not in ("TMPDIR", "TEMP", "TMP")
    }
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    env.update(
        {
            "NAUTILUS_DATA_DIR": str(data),
            "NAUTILUS_LOG_FORMAT": "json",
            "NAUTILUS_CONFIG_STRICT": "true",
            "NAUTILUS_RANKING_TOP_K": "5",
        }
    )
    log = tmp / "server.log"
    assert UNSHARE is not None
    command = [
        UNSHARE,
        "--mount",
        "sh",
        "-c",
        _READ_ONLY_ROOT,
        "sh",
        str(data),
        NAUTILUS,
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        str(workers),
    ]
    with log.open("w", encoding="utf-8") as sink:
        process = subprocess.Popen(
            command, env=env, cwd=tmp, stdout=sink, stderr=subprocess.STDOUT, text=True
        )
    server = Server(f"http://127.0.0.1:{port}", process, log)
    deadline = time.monotonic() + 60
    while True:
        if process.poll() is not None:
            raise AssertionError(
                f"serve exited {process.returncode} with a read-only root:\n{server.logs()}"
            )
        try:
            if httpx.get(server.url + "/healthz", timeout=1).status_code == 200:
                return server
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            server.stop()
            raise AssertionError(f"serve not up after 60 s:\n{server.logs()}")
        time.sleep(0.1)


@pytest.mark.parametrize("workers", [1, 2])
def test_serve_answers_with_a_read_only_root_and_only_the_data_dir_writable(
    tmp_path: Path, workers: int
) -> None:
    data = (tmp_path / "data").resolve()
    data.mkdir()
    server = _start(tmp_path, data, workers)
    try:
        deadline = time.monotonic() + 60
        while httpx.get(server.url + "/readyz", timeout=5).status_code != 200:
            assert time.monotonic() < deadline, server.logs()
            time.sleep(0.2)
        answer = httpx.post(
            server.url + "/v1/query", json={"query": "orders-db disk full"}, timeout=30
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["ranking"], answer.text
        scrape = httpx.get(server.url + "/metrics", timeout=10).text
        assert 'nautilus_source_topk_rows_total{source="runbooks"}' in scrape
        metrics_dirs = list((data / "metrics").glob("nautilus-metrics-*"))
        assert len(metrics_dirs) == 1, "the metrics directory is under the data dir"
    finally:
        code = server.stop()
    assert code == 0, server.logs()
    assert not list((data / "metrics").glob("nautilus-metrics-*")), "removed at exit"
    assert "Read-only file system" not in server.logs()


def test_serve_with_nothing_writable_names_the_settings_to_fix(tmp_path: Path) -> None:
    """Data dir on the read-only root too: one clear error naming what to set, exit 1."""
    writable = (tmp_path / "scratch").resolve()
    writable.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.upper().startswith("NAUTILUS_") and k not in ("TMPDIR", "TEMP", "TMP")
    }
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    env["NAUTILUS_DATA_DIR"] = str(tmp_path / "readonly-data")
    assert UNSHARE is not None
    done = subprocess.run(
        [
            UNSHARE,
            "--mount",
            "sh",
            "-c",
            _READ_ONLY_ROOT,
            "sh",
            str(writable),
            NAUTILUS,
            "serve",
            "--port",
            str(free_port()),
        ],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    assert "PROMETHEUS_MULTIPROC_DIR" in done.stderr and "NAUTILUS_DATA_DIR" in done.stderr
    assert "Traceback" not in done.stderr
