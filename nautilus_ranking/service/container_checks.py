"""A Kubernetes container checked for what would make the service crash-loop or starve.

With ``readOnlyRootFilesystem: true``, ``NAUTILUS_DATA_DIR`` (where the databases and,
without a writable /tmp, the metrics are written) and any ``PROMETHEUS_MULTIPROC_DIR``
must be on a writable ``volumeMount``; and no more workers than the CPU request has
cores (each worker ranks on one core). ``manifest.py`` reads the manifest and calls this
for every container whose environment is ours.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any

from nautilus_ranking.errors import Problem, cut


def container_problems(
    container: Mapping[str, Any],
    env: Mapping[str, str],
) -> list[Problem]:
    """What makes this container crash-loop (a read-only root with nowhere to write)
    or oversubscribe its CPU (more workers than requested cores)."""
    problems = []
    security = container.get("securityContext") or {}
    if isinstance(security, dict) and security.get("readOnlyRootFilesystem") is True:
        mounts = [m for m in container.get("volumeMounts") or [] if isinstance(m, dict)]
        writable = [
            str(m.get("mountPath"))
            for m in mounts
            if m.get("mountPath") and m.get("readOnly") is not True
        ]
        valid = (
            "a directory on a writable volumeMount (" + ", ".join(writable) + ")"
            if writable
            else "mount a writable volume (an emptyDir) and point it there"
        )
        dirs = {"NAUTILUS_DATA_DIR": env.get("NAUTILUS_DATA_DIR")}
        metrics = next(
            (
                e.get("value")
                for e in container.get("env") or []
                if isinstance(e, dict) and e.get("name") == "PROMETHEUS_MULTIPROC_DIR"
            ),
            None,
        )
        if metrics is not None:
            dirs["PROMETHEUS_MULTIPROC_DIR"] = str(metrics)
        for name, directory in dirs.items():
            if not directory:
                problems.append(
                    Problem(
                        name,
                        "(unset)",
                        "readOnlyRootFilesystem is true and the default "
                        "(~/.cache/nautilus) is on the read-only root",
                        valid,
                    )
                )
            elif not any(PurePosixPath(directory).is_relative_to(w) for w in writable):
                problems.append(
                    Problem(
                        name,
                        cut(directory),
                        "readOnlyRootFilesystem is true and no writable "
                        "volumeMount holds it (the service writes its databases and metrics "
                        "there)",
                        valid,
                    )
                )
    problem = _workers_problem(container, env)
    if problem is not None:
        problems.append(problem)
    return problems


def _workers_problem(
    container: Mapping[str, Any],
    env: Mapping[str, str],
) -> Problem | None:
    """More worker processes than the container's CPU request has cores."""
    args = [str(a) for a in (container.get("command") or []) + (container.get("args") or [])]
    raw = env.get("NAUTILUS_SERVE_WORKERS")
    for i, arg in enumerate(args):
        if arg == "--workers" and i + 1 < len(args):
            raw = args[i + 1]
        elif arg.startswith("--workers="):
            raw = arg.partition("=")[2]
    resources = container.get("resources") or {}
    cpu = (resources.get("requests") or {}).get("cpu") if isinstance(resources, dict) else None
    cores = _cpu_cores(cpu)
    if raw is None or not str(raw).strip().isdigit() or cores is None:
        return None
    allowed = max(1, math.ceil(cores))
    if int(raw) <= allowed:
        return None
    return Problem(
        "NAUTILUS_SERVE_WORKERS",
        str(raw).strip(),
        f"more workers than the CPU request ({cpu}) has cores; each worker ranks on one core",
        f"at most {allowed} (one worker per requested core), or a larger resources.requests.cpu",
    )


def _cpu_cores(cpu: object) -> float | None:
    """A Kubernetes CPU quantity (``500m``, ``2``, ``1.5``) in cores, or None."""
    text = str(cpu).strip() if cpu is not None else ""
    try:
        return float(text[:-1]) / 1000 if text.endswith("m") else float(text)
    except ValueError:
        return None
