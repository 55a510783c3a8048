"""What the benchmarks inside the Nautilus broker share: the demo's collections as
``static`` sources, a broker's ``nautilus.yaml``, and the run of a benchmark's ``--inside``
half in the broker's venv (tools/broker_venv.py), whose last line of output is its JSON.

That venv has this project installed as a wheel and the broker beside it; the ``--inside``
half runs there as a module with this repository at the *end* of its path, so
``benchmarks`` imports from here while ``nautilus_ranking`` stays the installed wheel.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
AGENT = {"id": "agent-alpha", "clearance": "confidential", "allowed_purposes": ["support"]}
DEMO = ("tickets", "runbooks", "postmortems", "services")


def demo_rows() -> dict[str, list[dict[str, Any]]]:
    """The demo's four collections (78 rows), by name, in the demo's order."""
    import importlib.resources

    demo = importlib.resources.files("nautilus_ranking.demo")
    rows = {}
    for name in DEMO:
        lines = demo.joinpath(f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
        rows[name] = [json.loads(line) for line in lines if line.strip()]
    return rows


def static_source(name: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A ``static`` source of ``rows`` that agent-alpha may read for support."""
    return {
        "id": name,
        "type": "static",
        "classification": "unclassified",
        "data_types": ["ops"],
        "allowed_purposes": ["support"],
        "rows": rows,
    }


def demo_sources() -> list[dict[str, Any]]:
    """The demo's four collections as ``static`` sources."""
    return [static_source(name, rows) for name, rows in demo_rows().items()]


def write_config(folder: Path, sources: list[dict[str, Any]], **extra: Any) -> Path:
    """``folder/nautilus.yaml``: ``sources``, agent-alpha, attestation and the audit log on,
    and the top-level keys in ``extra`` (an ``api`` with its keys)."""
    import yaml

    config = folder / "nautilus.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "sources": sources,
                "agents": {"agent-alpha": AGENT},
                "attestation": {"enabled": True},
                "audit": {"path": "./audit.jsonl"},
                **extra,
            }
        ),
        encoding="utf-8",
    )
    return config


def inside_command(python: Path, module: str, *args: object) -> list[Any]:
    """``python -m module --inside …`` for the broker's venv (``python``), this repository
    last on its path."""
    boot = (
        f"import runpy, sys; sys.path.append({str(ROOT)!r}); "
        f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)"
    )
    return [python, "-c", boot, *args]


def last_json(stdout: str) -> Any:
    """What an ``--inside`` run found: the last line it printed."""
    return json.loads(stdout.strip().splitlines()[-1])


def run_inside(python: Path, module: str, folder: str, *args: object) -> Any:
    """Run ``module``'s ``--inside`` half in the broker's venv, in ``folder``; what it found,
    or None (its error output's tail printed) when it failed."""
    import subprocess

    done = subprocess.run(
        inside_command(python, module, "--inside", folder, *args),
        cwd=folder,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        print(done.stderr[-4000:], file=sys.stderr)
        return None
    return last_json(done.stdout)
