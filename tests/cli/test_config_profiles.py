"""``nautilus-ranking config`` and ranking profiles, as the real command: each profile's
effective knobs and where each came from, and the strict gate — over a manifest, and
against the Nautilus broker's ``nautilus.yaml`` (its agents and sources): the worked
example of docs/configuration.md#profiles."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from cli_process import run_nautilus

BROKER_CONFIG = """\
sources:
  - {id: helpcenter, type: static, classification: unclassified, data_types: [docs], rows: []}
  - {id: runbooks, type: static, classification: unclassified, data_types: [docs], rows: []}
  - {id: wiki, type: static, classification: unclassified, data_types: [docs], rows: []}
  - {id: tickets, type: static, classification: unclassified, data_types: [docs], rows: []}
agents:
  support-bot: {id: support-bot, clearance: unclassified}
  oncall-bot: {id: oncall-bot, clearance: unclassified}
  auditor: {id: auditor, clearance: unclassified}
"""
#: The worked example's manifest (docs/configuration.md#profiles).
MANIFEST = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: broker}
spec:
  template:
    spec:
      containers:
        - name: broker
          image: broker:1
          env:
            - {name: NAUTILUS_RANKING_TOP_K, value: "10"}
            - {name: NAUTILUS_PROFILES__SUPPORT__AGENTS, value: support-bot}
            - {name: NAUTILUS_PROFILES__SUPPORT__SOURCE_BOOSTS, value: "helpcenter:high"}
            - {name: NAUTILUS_PROFILES__ONCALL__AGENTS, value: oncall-bot}
            - {name: NAUTILUS_PROFILES__ONCALL__SOURCE_BOOSTS, value: "runbooks:high,wiki:-medium"}
            - {name: NAUTILUS_PROFILES__AUDIT__AGENTS, value: auditor}
            - {name: NAUTILUS_PROFILES__AUDIT__RANKING_TOP_K, value: "50"}
"""


def config(folder: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    env = {"NAUTILUS_DATA_DIR": str(folder / "data"), **env}
    return run_nautilus("config", *args, cwd=folder, env=env, timeout=60)


def gate(folder: Path, manifest: str) -> subprocess.CompletedProcess[str]:
    (folder / "deploy.yaml").write_text(manifest, encoding="utf-8")
    (folder / "nautilus.yaml").write_text(BROKER_CONFIG, encoding="utf-8")
    return config(folder, "--strict", "--config", "nautilus.yaml", "--manifest", "deploy.yaml")


def test_the_worked_example_passes_and_a_typo_of_an_agent_or_source_fails(
    tmp_path: Path,
) -> None:
    passed = gate(tmp_path, MANIFEST)
    assert passed.returncode == 0, passed.stderr
    assert "support: ranking on; agents: support-bot; overrides: none" in passed.stdout
    agent = gate(tmp_path, MANIFEST.replace("value: oncall-bot", "value: oncal-bot"))
    assert agent.returncode == 1
    assert "NAUTILUS_PROFILES__ONCALL__AGENTS: 'oncal-bot': the broker's config has no agent" in (
        agent.stderr
    )
    source = gate(tmp_path, MANIFEST.replace("runbooks:high", "runbook:high"))
    assert source.returncode == 1
    assert "NAUTILUS_PROFILES__ONCALL__SOURCE_BOOSTS: 'runbook': no source has id" in source.stderr
    typo = gate(tmp_path, MANIFEST.replace("PROFILES__AUDIT__RANKING", "PROFILE__AUDIT__RANKING"))
    assert typo.returncode == 1 and "not a profile variable" in typo.stderr
    embedder = gate(tmp_path, MANIFEST.replace("AUDIT__RANKING_TOP_K", "AUDIT__EMBEDDER"))
    assert embedder.returncode == 1 and "does not vary per profile" in embedder.stderr


def test_config_shows_each_profile_s_knobs_and_where_each_came_from(tmp_path: Path) -> None:
    (tmp_path / "profiles.yaml").write_text(
        "support:\n  source_boosts: {runbooks: high}\n  ranking_top_k: 4\n"
    )
    shown = config(
        tmp_path,
        "--json",
        NAUTILUS_PROFILES_FILE=str(tmp_path / "profiles.yaml"),
        NAUTILUS_PROFILES__SUPPORT__RANKING_TOP_K="7",
        NAUTILUS_RANKING_IDF="true",
    )
    assert shown.returncode == 0, shown.stderr
    support = json.loads(shown.stdout)["profiles"]["support"]
    knobs = support["knobs"]
    assert knobs["NAUTILUS_RANKING_TOP_K"] == {
        "value": 7,
        "from": "NAUTILUS_PROFILES__SUPPORT__RANKING_TOP_K",
    }
    assert knobs["NAUTILUS_SOURCE_BOOSTS"] == {
        "value": {"runbooks": "high"},
        "from": f"{tmp_path / 'profiles.yaml'}: support.source_boosts",
    }
    assert knobs["NAUTILUS_RANKING_IDF"] == {"value": True, "from": "global"}
    assert "NAUTILUS_EMBEDDER" not in knobs  # one per process: not a profile's
    assert support["ranking_enabled"] is True
    plain = config(tmp_path, "--json")
    assert "profiles" not in json.loads(plain.stdout)  # none configured: as before


def test_a_keys_file_grant_naming_no_profile_fails_the_gate(tmp_path: Path) -> None:
    (tmp_path / "keys").write_text("k1 profile=suport\nk2\n")
    (tmp_path / "keys").chmod(0o600)  # a secret: owner-only
    failed = config(
        tmp_path,
        "--strict",
        NAUTILUS_SERVE_API_KEYS_FILE=str(tmp_path / "keys"),
        NAUTILUS_PROFILES__SUPPORT__RANKING_TOP_K="3",
    )
    assert failed.returncode == 1
    assert "'profile=suport': no profile of that name is configured" in failed.stderr
