"""The model runs offline: onnxruntime's telemetry is off, so a process that loads the
model writes nothing outside the data dir and looks no name up.

Real processes under a fresh ``HOME``: the telemetry is native code (a device id and an
event queue written at onnxruntime's import, an uploader that resolves its collector's
name a few seconds later), so what is checked is the file system and, with ``strace``,
the system calls; a Python hook would see neither. Each test has a control that asks
for the telemetry (``ORT_DISABLE_TELEMETRY=0``), which shows what the check catches.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from plain_environment import plain_environment

from tools.servers import NAUTILUS, Server, free_port

QUERY = "orders-db disk full"
#: What a name lookup looks like in ``strace -e trace=%network``: a DNS query (port 53),
#: glibc's name service cache, or the collector's name in a packet.
LOOKUP_MARKS = ("htons(53)", "/nscd/socket", "mobile\\6events")


#: Variables by which a program tells it runs under CI (onnxruntime reads ``CI``).
CI_VARIABLES = (
    "CI",
    "CONTINUOUS_INTEGRATION",
    "BUILD_NUMBER",
    "RUN_ID",
    "TF_BUILD",
    "GITHUB_ACTIONS",
)


def fresh_home(folder: Path) -> dict[str, str]:
    """A subprocess environment with a fresh, empty HOME and temp dir, the data dir in
    ``folder``, no byte-code written, the model as the embedder and the telemetry switch
    unset (a test in this process may have set it by loading the model)."""
    (folder / "home").mkdir()
    (folder / "tmp").mkdir()
    env = plain_environment()
    env.pop("ORT_DISABLE_TELEMETRY", None)
    # onnxruntime's telemetry stays off where it sees a CI, as `.ci/run` is (CI=true): a
    # user's machine is not one, and the control run must see what a user's would
    for variable in CI_VARIABLES:
        env.pop(variable, None)
    env.update(
        HOME=str(folder / "home"),
        XDG_CACHE_HOME=str(folder / "home" / ".cache"),
        TMPDIR=str(folder / "tmp"),
        PYTHONDONTWRITEBYTECODE="1",
        NAUTILUS_DATA_DIR=str(folder / "data"),
        NAUTILUS_EMBEDDER="onnx",
        # no embedding deadline: on a busy machine the answer could come by words before
        # the model (and so the runtime) has even loaded, and there would be nothing to see
        NAUTILUS_EMBEDDER_DEADLINE_MS="0",
    )
    return env


def written_outside_data(folder: Path) -> list[str]:
    """Every file under ``folder`` but those in its data dir and the test's own."""
    return sorted(
        str(path.relative_to(folder))
        for path in folder.rglob("*")
        if path.is_file()
        and path.parts[len(folder.parts)] not in ("data",)
        and not path.name.startswith(("server-", "trace-"))
    )


def query(folder: Path, env: dict[str, str]) -> None:
    done = subprocess.run(
        [NAUTILUS, "query", QUERY, "--top-k", "3"],
        capture_output=True,
        text=True,
        env=env,
        cwd=folder,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "embedder: onnx" in done.stdout


@pytest.mark.slow
def test_a_query_with_the_model_writes_nothing_outside_the_data_dir(tmp_path: Path) -> None:
    subject, control = tmp_path / "subject", tmp_path / "control"
    subject.mkdir()
    control.mkdir()
    query(subject, fresh_home(subject))
    assert written_outside_data(subject) == []
    assert (subject / "data").is_dir()  # the model's graph and vectors are kept there
    # asked for, onnxruntime's telemetry writes its device id under HOME at import
    query(control, {**fresh_home(control), "ORT_DISABLE_TELEMETRY": "0"})
    assert "home/.cache/Microsoft/DeveloperTools/.onnxruntime/deviceid" in (
        written_outside_data(control)
    )


def test_onnxruntime_imported_first_is_one_warning_with_the_fix(tmp_path: Path) -> None:
    """An application that imported onnxruntime before nautilus did started its telemetry
    then: too late to stop it, so it is said, once, with the fix."""
    script = (
        "import onnxruntime\n"
        "from nautilus_ranking.log import configure_logging\n"
        "from nautilus_ranking.embedders.offline_runtime import import_onnxruntime\n"
        "configure_logging('info', 'json')\n"
        "import_onnxruntime(); import_onnxruntime()\n"
    )
    env = fresh_home(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stderr.splitlines() if "onnxruntime_telemetry_on" in line]
    assert len(warned) == 1
    assert "ORT_DISABLE_TELEMETRY=1" in warned[0]


def strace_works() -> bool:
    """Whether ``strace`` is installed and may trace here (ptrace can be forbidden)."""
    if shutil.which("strace") is None:
        return False
    probe = subprocess.run(["strace", "-f", "-qq", "-e", "trace=none", "true"], capture_output=True)
    return probe.returncode == 0


def lookups(trace: Path) -> list[str]:
    text = trace.read_text(encoding="utf-8", errors="replace") if trace.exists() else ""
    return [line for line in text.splitlines() if any(mark in line for mark in LOOKUP_MARKS)]


def serve_pids(tracer: subprocess.Popen[str]) -> list[int]:
    """The processes strace started (``serve``): a signal to strace is not passed on."""
    children = Path(f"/proc/{tracer.pid}/task/{tracer.pid}/children")
    try:
        return [int(pid) for pid in children.read_text().split()]
    except OSError:  # strace has exited
        return []


@contextmanager
def traced_serve(folder: Path, env: dict[str, str]) -> Iterator[tuple[Server, Path]]:
    """``serve`` under ``strace -f -e trace=%network``, ready (``/readyz``: the model
    loaded); stopped with SIGTERM when left. The server and its trace file."""
    trace, log, port = folder / "trace-network.txt", folder / "server-log.txt", free_port()
    command = ["strace", "-f", "-qq", "-e", "trace=%network", "-o", str(trace), NAUTILUS]
    command += ["serve", "--host", "127.0.0.1", "--port", str(port)]
    with log.open("w", encoding="utf-8") as sink:
        tracer = subprocess.Popen(
            command, env=env, cwd=folder, stdout=sink, stderr=subprocess.STDOUT, text=True
        )
    server = Server(f"http://127.0.0.1:{port}", tracer, log)
    try:
        deadline = time.monotonic() + 120
        while not ready(server):
            assert tracer.poll() is None, server.logs()
            assert time.monotonic() < deadline, f"not ready after 120 s:\n{server.logs()}"
            time.sleep(0.1)
        yield server, trace
    finally:
        for pid in serve_pids(tracer):
            os.kill(pid, signal.SIGTERM)
        tracer.wait(60)  # strace exits once serve has


def ready(server: Server) -> bool:
    try:
        return httpx.get(server.url + "/readyz", timeout=5).status_code == 200
    except httpx.TransportError:
        return False


def ask(server: Server) -> None:
    answer = httpx.post(server.url + "/v1/query", json={"query": QUERY, "top_k": 3}, timeout=60)
    assert answer.status_code == 200, answer.text


@pytest.mark.slow
@pytest.mark.skipif(not strace_works(), reason="strace is not installed or may not trace here")
def test_serve_with_the_model_looks_no_name_up(tmp_path: Path) -> None:
    """The subject serves first; the control, started once the subject has answered,
    asks for the telemetry: by the control's first lookup the subject has run longer
    than the control, and made none."""
    subject, control = tmp_path / "subject", tmp_path / "control"
    subject.mkdir()
    control.mkdir()
    # ranking on: serve loads the model at start, whatever vectors are stored
    subject_env = {**fresh_home(subject), "NAUTILUS_RANKING_TOP_K": "3"}
    control_env = {**fresh_home(control), "NAUTILUS_RANKING_TOP_K": "3"}
    control_env.update(ORT_DISABLE_TELEMETRY="0", NAUTILUS_DATA_DIR=str(subject / "data"))
    with traced_serve(subject, subject_env) as (served, subject_trace):
        ask(served)
        with traced_serve(control, control_env) as (asked, control_trace):
            ask(asked)
            deadline = time.monotonic() + 60
            while not lookups(control_trace) and time.monotonic() < deadline:
                time.sleep(0.1)  # the uploader's first lookup: an event in the trace
            ask(served)
    if not lookups(control_trace):
        pytest.skip("onnxruntime looked no name up here even when asked: nothing to compare")
    assert lookups(subject_trace) == []
    assert written_outside_data(subject) == []
