"""Beside and inside the Nautilus broker, for real: a Python 3.13 venv with
``nautilus-rkm[postgres,pgvector,otel]==0.3.0`` and this project's wheel
(tools/broker_venv.py, cached by source), and the checks in tests/upstream/inside/ run
there under pytest, against this suite's PostgreSQL.

It never skips in silence: without a Python 3.13 or the package index it fails under
CI (``CI=true``, what ``.ci/run`` sets) and elsewhere skips with the reason, naming what
is missing.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tools.broker_venv import BrokerVenv, BrokerVenvUnavailable, broker_venv, wheel_top_level

INSIDE = Path(__file__).parent / "inside"


@pytest.fixture(scope="module")
def venv() -> BrokerVenv:
    try:
        return broker_venv(extras=("postgres",))  # `nautilus-ranking load` runs there
    except BrokerVenvUnavailable as exc:
        message = f"the Nautilus broker's venv cannot be built here: {exc}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


def test_the_wheel_installs_our_name_only(venv: BrokerVenv) -> None:
    assert wheel_top_level(venv.wheel) == {"nautilus_ranking"}


def test_beside_and_inside_the_broker(venv: BrokerVenv, pg_dsn: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("NAUTILUS_")}
    env["NAUTILUS_EMBEDDER"] = "hashing"  # as the suite (tests/conftest.py)
    env["UPSTREAM_PG_DSN"] = pg_dsn
    env.pop("PYTHONPATH", None)  # the installed wheel, never this source tree
    done = subprocess.run(
        [venv.python, "-m", "pytest", "-c", INSIDE / "pytest.ini", INSIDE, "-q"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    report = done.stdout[-12000:] + done.stderr[-3000:]
    assert done.returncode == 0, report
    assert " passed" in done.stdout and "skipped" not in done.stdout, report
