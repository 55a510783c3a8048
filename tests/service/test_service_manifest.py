"""`nautilus-ranking config --strict --manifest/--env-file`: the files in deploy/ pass, broken
copies fail naming the bad value. The gate itself runs as a real subprocess; the
finer cases of reading manifests call the same `main` in-process (faster)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import structlog
from cli_process import run_nautilus

from nautilus_ranking import cli

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s" / "deployment.yaml"
COMPOSE = ROOT / "deploy" / "compose.yaml"
HGIH = (
    "NAUTILUS_SOURCE_BOOSTS: 'graph:hgih': unknown level 'hgih' for 'graph' "
    "(valid: -high, -medium, -low, low, medium, high)"
)


def config(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_nautilus("config", *args, env=env, timeout=60)


def inproc(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        status = cli.main(["config", *args])
    finally:
        structlog.reset_defaults()  # main() pointed logging at capsys' stream
    out, err = capsys.readouterr()
    return status, out, err


def broken(tmp_path: Path, source: Path, old: str, new: str) -> Path:
    text = source.read_text()
    assert old in text
    copy = tmp_path / source.name
    copy.write_text(text.replace(old, new))
    return copy


@pytest.mark.parametrize("manifest", [K8S, COMPOSE], ids=["k8s", "compose"])
def test_the_deploy_manifests_pass_the_strict_gate(manifest: Path) -> None:
    result = config("--strict", "--manifest", str(manifest))
    assert result.returncode == 0, result.stderr
    assert "graph:high" in result.stdout and "skipped: none" in result.stdout


def test_a_broken_copy_fails_naming_the_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = config(
        "--strict", "--manifest", str(broken(tmp_path, K8S, "graph:high", "graph:hgih"))
    )
    assert result.returncode == 1
    assert HGIH in result.stderr and "Traceback" not in result.stderr
    status, _, err = inproc(
        capsys, "--strict", "--manifest", str(broken(tmp_path, COMPOSE, "graph:high", "graph:hgih"))
    )
    assert status == 1 and HGIH in err


def test_the_manifest_replaces_the_shells_environment_and_dotenv(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (tmp_path / ".env").write_text("NAUTILUS_RANKING_TOP_K=ten\n")  # the cwd's .env
    monkeypatch.setenv("NAUTILUS_SOURCE_BOOSTS", "graph:hgih")
    status, out, err = inproc(capsys, "--strict", "--json", "--manifest", str(K8S))
    assert status == 0, err
    assert '"NAUTILUS_RANKING_TOP_K": 10' in out
    assert os.environ["NAUTILUS_SOURCE_BOOSTS"] == "graph:hgih"  # restored after


def test_a_bad_serve_setting_in_the_configmap_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = broken(
        tmp_path,
        K8S,
        'NAUTILUS_SERVE_REQUEST_TIMEOUT_S: "5"',
        'NAUTILUS_SERVE_REQUEST_TIMEOUT_S: "5s"',
    )
    status, _, err = inproc(capsys, "--strict", "--manifest", str(copy))
    assert status == 1 and "NAUTILUS_SERVE_REQUEST_TIMEOUT_S: '5s'" in err


def test_env_beats_envfrom_and_an_unknown_boosted_id_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = broken(
        tmp_path,
        K8S,
        '{name: NAUTILUS_SERVE_WORKERS, value: "1"}',
        '{name: NAUTILUS_SOURCE_BOOSTS, value: "grpah:high"}',
    )
    status, _, err = inproc(capsys, "--strict", "--manifest", str(copy))
    assert status == 1 and "no source has id 'grpah'" in err


def test_what_the_file_cannot_show_fails_strict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = tmp_path / "deploy.yaml"
    manifest.write_text("""
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: broker}
spec:
  template:
    spec:
      containers:
        - name: app
          envFrom:
            - configMapRef: {name: elsewhere}
          env:
            - {name: NAUTILUS_RANKING_TOP_K, value: "5"}
            - name: NAUTILUS_SOURCE_BOOSTS
              valueFrom: {secretKeyRef: {name: s, key: boosts}}
""")
    status, _, err = inproc(capsys, "--strict", "--manifest", str(manifest))
    assert status == 1, err
    assert "StatefulSet/broker container app" in err
    assert "envFrom: 'elsewhere': ConfigMap not in this file" in err
    assert "NAUTILUS_SOURCE_BOOSTS: '(valueFrom)': a Secret or field reference" in err
    assert inproc(capsys, "--manifest", str(manifest))[0] == 0  # without --strict: shown


def test_compose_list_environment_env_file_and_interpolation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "prod.env").write_text("NAUTILUS_RANKING_TOP_K=7\n")
    compose = tmp_path / "compose.yaml"
    compose.write_text("""
services:
  api:
    env_file: prod.env
    environment:
      - NAUTILUS_RANKING_IDF=yes
      - NAUTILUS_SOURCE_BOOSTS=${BOOSTS}
""")
    status, out, err = inproc(capsys, "--strict", "--json", "--manifest", str(compose))
    assert status == 1
    assert '"NAUTILUS_RANKING_TOP_K": 7' in out and '"NAUTILUS_RANKING_IDF": true' in out
    assert "interpolated at deploy time" in err


def test_env_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "good.env"
    good.write_text(
        "# prod\nexport NAUTILUS_RANKING_TOP_K=5\nNAUTILUS_SOURCE_BOOSTS='graph:high'\n"
    )
    assert inproc(capsys, "--strict", "--env-file", str(good))[0] == 0
    bad = tmp_path / "bad.env"
    bad.write_text("NAUTILUS_SOURCE_BOOSTS=graph:hgih\n")
    result = config("--strict", "--env-file", str(bad))
    assert result.returncode == 1 and HGIH in result.stderr


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read it"),
        ("a: [unclosed", "not valid YAML"),
        ("kind: Deployment\nspec: {}\n", "no container or compose service sets a NAUTILUS_*"),
    ],
)
def test_an_unusable_manifest_is_one_clear_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, message: str
) -> None:
    path = tmp_path / "m.yaml"
    if content is not None:
        path.write_text(content)
    status, _, err = inproc(capsys, "--manifest", str(path))
    assert status == 1 and message in err and "Traceback" not in err
    status, _, err = inproc(capsys, "--env-file", str(tmp_path / "none.env"))
    assert status == 1 and "--env-file" in err


def test_a_container_path_in_nautilus_config_suggests_config(tmp_path: Path) -> None:
    manifest = tmp_path / "deployment.yaml"
    manifest.write_text(
        K8S.read_text().replace(
            '            - {name: NAUTILUS_CONFIG_STRICT, value: "true"}',
            '            - {name: NAUTILUS_CONFIG_STRICT, value: "true"}\n'
            "            - {name: NAUTILUS_CONFIG, value: /etc/nautilus/nautilus.yaml}",
        )
    )
    assert "/etc/nautilus/nautilus.yaml" in manifest.read_text()
    result = config("--strict", "--manifest", str(manifest))
    assert result.returncode == 1
    assert "cannot read sources config /etc/nautilus/nautilus.yaml" in result.stderr
    assert "a path inside the container: pass --config with your copy of that file" in (
        result.stderr
    )
    # on a non-terminal (a pipe, here) each problem is said once, not also as a log line
    assert result.stderr.count("/etc/nautilus/nautilus.yaml") == 2  # the path, then the hint
    assert '"event"' not in result.stderr
    demo = ROOT / "nautilus_ranking" / "demo" / "nautilus.yaml"
    given = config("--strict", "--manifest", str(manifest), "--config", str(demo))
    assert given.returncode == 0, given.stderr
