"""What a dead builder leaves on disk is cleaned up, and a build that runs out of space
backs off instead of being retried (and logged) on every request. Real processes: a
builder killed with SIGKILL mid-build, and a data folder on a small tmpfs (a mount
namespace of the test's own, ``unshare``)."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from cli_process import NAUTILUS, run_nautilus
from plain_environment import plain_environment


def write_seed(path: Path, rows: int) -> Path:
    with path.open("w", encoding="utf-8") as out:
        for i in range(rows):
            out.write(
                json.dumps(
                    {
                        "id": f"d{i}",
                        "title": f"disk full on host {i}",
                        "body": f"replication slot {i} " * 8,
                    }
                )
                + "\n"
            )
    return path


def sources_file(folder: Path, seed: Path) -> Path:
    path = folder / "sources.yaml"
    path.write_text(
        f"sources:\n  - {{id: notes, type: sqlite_fts, path: notes.db, "
        f"seed: {seed}, columns: [title, body]}}\n",
        encoding="utf-8",
    )
    return path


def env_for(data: Path) -> dict[str, str]:
    base = plain_environment()
    return {
        **base,
        "NAUTILUS_DATA_DIR": str(data),
        "NAUTILUS_LOG_FORMAT": "json",
        "NAUTILUS_LOG_LEVEL": "info",
    }  # the CLI logs warnings only by default


def leftovers(data: Path) -> list[str]:
    return sorted(p.name for p in data.iterdir() if ".partial" in p.name)


def test_a_builder_killed_mid_build_leaves_nothing_behind(tmp_path: Path) -> None:
    data = tmp_path / "data"
    config = sources_file(tmp_path, write_seed(tmp_path / "notes.jsonl", 60_000))
    env = env_for(data)
    first = run_nautilus("sources", "rebuild", "--config", str(config), env=env, timeout=300)
    assert first.returncode == 0, first.stderr
    # A forced rebuild, killed once its partial file exists: the database stays fresh,
    # so the next run has nothing to build, yet it removes what the dead builder left.
    builder = subprocess.Popen(
        [NAUTILUS, "sources", "rebuild", "--config", str(config)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while not leftovers(data) and builder.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    builder.send_signal(signal.SIGKILL)
    builder.wait(30)
    assert leftovers(data), "the builder finished before it could be killed"
    query = run_nautilus(
        "query", "disk full", "--config", str(config), "--json", env=env, timeout=300
    )
    assert query.returncode == 0, query.stderr
    assert json.loads(query.stdout)["data"]["notes"]
    events = [
        json.loads(line)["event"] for line in query.stderr.splitlines() if line.startswith("{")
    ]
    assert "source_rebuilding" not in events and "source_partial_removed" in events
    assert leftovers(data) == []


SCRIPT = textwrap.dedent("""
    import json, os, sys
    from pathlib import Path
    from nautilus_ranking import Broker, configure_logging
    from nautilus_ranking.sources.factory import build_sources
    configure_logging("info", "json")
    data = Path(os.environ["NAUTILUS_DATA_DIR"])
    sources, limit = build_sources(Path(sys.argv[1]), data, "hashing")
    broker = Broker(sources, limit=limit)
    for _ in range(3):
        response = broker.request("disk full")
        print(json.dumps([[e.error_type, e.message] for e in response.sources_errored]))
    print(json.dumps(sorted(os.listdir(data))))
""")


def unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "true"], capture_output=True, timeout=30
    )
    return probe.returncode == 0


@pytest.mark.skipif(not unshare_works(), reason="needs unshare (user + mount namespaces)")
def test_a_build_out_of_space_backs_off_and_says_so_once(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    config = sources_file(tmp_path, write_seed(tmp_path / "notes.jsonl", 20_000))
    script = tmp_path / "three_requests.py"
    script.write_text(SCRIPT, encoding="utf-8")
    shell = f"mount -t tmpfs -o size=256k tmpfs {data} && exec {sys.executable} {script} {config}"
    run = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", shell],
        env=env_for(data),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    *answers, listing = [json.loads(line) for line in run.stdout.splitlines()]
    assert [[kind for kind, _ in errors] for errors in answers] == [["NoSpaceError"]] * 3
    assert "no space left" in answers[0][0][1] and "not tried again for 30 s" in answers[0][0][1]
    assert all("not tried again for another" in errors[0][1] for errors in answers[1:])
    events = [json.loads(line)["event"] for line in run.stderr.splitlines() if line.startswith("{")]
    assert events.count("source_rebuilding") == 1  # one doomed build, not one a request
    assert events.count("source_build_no_space") == 1
    assert [name for name in listing if ".partial" in name] == []
