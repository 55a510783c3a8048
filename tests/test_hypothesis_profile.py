"""The README's test commands give the same result on every run: property tests are
derandomized unless exploring is asked for (tests/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
PROBE = (
    "import sys; sys.path.insert(0, sys.argv[1]); import conftest; "
    "from hypothesis import settings; print(settings.default.derandomize)"
)


def _derandomized(**env: str) -> bool:
    base = {k: v for k, v in os.environ.items() if k not in ("CI", "HYPOTHESIS_PROFILE")}
    base = {k: v for k, v in base.items() if not k.startswith("NAUTILUS_")}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(TESTS)],
        env={**base, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip() == "True"


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, True),  # a newcomer's plain `make test`: no CI variable
        ({"CI": "true"}, True),
        ({"HYPOTHESIS_PROFILE": "explore"}, False),
        ({"NAUTILUS_FUZZ_EXAMPLES": "5000"}, False),
    ],
)
def test_property_tests_explore_only_when_asked(env: dict[str, str], expected: bool) -> None:
    assert _derandomized(**env) is expected
