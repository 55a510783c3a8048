"""limit_blas_threads pins numpy's BLAS for the process that calls it (run in a
subprocess: the test process's own thread pools stay as they are)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from nautilus_ranking.fanout.blas import limit_blas_threads

CHECK = """
import json, sys
from threadpoolctl import threadpool_info
{setup}
from nautilus_ranking.fanout.blas import limit_blas_threads
applied = limit_blas_threads(1)
blas = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
print(json.dumps({{"applied": applied, "blas": blas}}))
"""


def run(setup: str = "") -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", CHECK.format(setup=setup)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_blas_is_limited_to_one_thread() -> None:
    result = run()
    assert result["applied"] is True
    assert result["blas"] and set(result["blas"]) == {1}  # type: ignore[arg-type]


def test_without_threadpoolctl_nothing_changes() -> None:
    result = run("sys.modules['threadpoolctl'] = None")
    assert result["applied"] is False


@pytest.mark.parametrize("bad", [0, -1, True, 1.5])
def test_bad_thread_count_is_a_clear_error(bad: object) -> None:
    with pytest.raises(ValueError, match="threads must be an integer >= 1"):
        limit_blas_threads(bad)  # type: ignore[arg-type]
