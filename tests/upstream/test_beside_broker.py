"""Beside the Nautilus broker, without the broker: our variables apart from its own, the
typo check that leaves the broker's and an operator's variables alone, the strict gate
on a manifest for the broker, metric names (the real broker: test_nautilus_broker.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from cli_process import run_nautilus
from test_import_graph import import_graph

from nautilus_ranking import NautilusSettings
from nautilus_ranking.service import metrics
from nautilus_ranking.settings.unknown_variables import BROKER_VARIABLES, closest_setting
from nautilus_ranking.upstream.broker_config import broker_sources

OURS = {"NAUTILUS_" + name.upper() for name in NautilusSettings.model_fields}
#: The broker's metrics as its OpenTelemetry Prometheus exporter names them (dots to
#: underscores, the unit "s" as _seconds, counters' .total as _total), and the ones it
#: registers on prometheus_client itself (nautilus-rkm 0.3.0's observability/metrics.py
#: and core/metrics.py).
BROKER_METRICS = {
    "nautilus_requests_total",
    "nautilus_routing_decisions_total",
    "nautilus_scope_denials_total",
    "nautilus_attestation_total",
    "nautilus_adapter_errors_total",
    "nautilus_session_exposure_flags_total",
    "nautilus_request_duration_seconds",
    "nautilus_adapter_latency_seconds",
    "nautilus_fathom_evaluation_duration_seconds",
    "nautilus_rkm_queue_depth",
    "nautilus_rkm_queue_oldest_age_seconds",
    "nautilus_ruleset_info",
}


def test_no_variable_of_ours_is_one_of_the_brokers() -> None:
    assert not OURS & BROKER_VARIABLES


@pytest.mark.parametrize(
    "name",
    [*sorted(BROKER_VARIABLES), "NAUTILUS_ORDERS_DSN", "NAUTILUS_PG_DSN", "NAUTILUS_TEAM"],
)
def test_the_brokers_and_an_operators_variables_are_no_typo(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert closest_setting(name, OURS) is None
    monkeypatch.setenv(name, "x")
    monkeypatch.setenv("NAUTILUS_CONFIG_STRICT", "true")
    assert NautilusSettings().problems == ()  # strict: a problem would have raised


@pytest.mark.parametrize(
    ("typo", "meant"),
    [
        ("NAUTILUS_RANKING_TOPK", "NAUTILUS_RANKING_TOP_K"),
        ("NAUTILUS_SOURCE_BOOST", "NAUTILUS_SOURCE_BOOSTS"),
        ("NAUTILUS_EMBEDER", "NAUTILUS_EMBEDDER"),
        ("NAUTILUS_TOP_K", "NAUTILUS_RANKING_TOP_K"),
        ("NAUTILUS_DEDUP_KEY", "NAUTILUS_RANKING_DEDUP_KEY"),
    ],
)
def test_a_name_close_to_ours_is_still_a_typo(typo: str, meant: str) -> None:
    assert closest_setting(typo, OURS) == meant


BROKER_MANIFEST = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: nautilus-broker}
spec:
  template:
    spec:
      containers:
        - name: broker
          image: example.org/nautilus-broker:0.3.0
          args: [python, -m, nautilus_ranking.upstream, serve, --config, /etc/nautilus.yaml]
          env:
            - {name: NAUTILUS_API_KEY, valueFrom: {secretKeyRef: {name: n, key: api}}}
            - {name: NAUTILUS_METADATA_KEY, valueFrom: {secretKeyRef: {name: n, key: meta}}}
            - {name: NAUTILUS_REVIEWER, value: ops-oncall}
            - {name: NAUTILUS_TEMPLATES_FILE, value: /etc/templates.yaml}
            - {name: NAUTILUS_BUILD_REV, value: abc123}
            - {name: NAUTILUS_ORDERS_DSN, valueFrom: {secretKeyRef: {name: db, key: dsn}}}
            - {name: NAUTILUS_RANKING_TOP_K, value: "8"}
            - {name: NAUTILUS_SOURCE_BOOSTS, value: "orders:medium"}
            - {name: NAUTILUS_EMBEDDER, value: hashing}
"""
BROKER_CONFIG = """\
sources:
  - id: orders
    type: postgres
    classification: confidential
    data_types: [orders]
    connection: ${NAUTILUS_ORDERS_DSN}
    table: public.orders
"""


def gate(folder: Path, manifest: str) -> subprocess.CompletedProcess[str]:
    (folder / "deploy.yaml").write_text(manifest, encoding="utf-8")
    (folder / "nautilus.yaml").write_text(BROKER_CONFIG, encoding="utf-8")
    return run_nautilus(
        "config",
        "--strict",
        "--manifest",
        "deploy.yaml",
        "--config",
        "nautilus.yaml",
        cwd=folder,
        timeout=60,
    )


def test_the_strict_gate_passes_a_manifest_for_the_broker(tmp_path: Path) -> None:
    passed = gate(tmp_path, BROKER_MANIFEST)
    assert passed.returncode == 0, passed.stderr
    assert "orders  postgres" in passed.stdout and "skipped: none" in passed.stdout
    typo = gate(tmp_path, BROKER_MANIFEST.replace("RANKING_TOP_K", "RANKING_TOPK"))
    assert typo.returncode == 1
    assert "did you mean NAUTILUS_RANKING_TOP_K?" in typo.stderr
    unknown = gate(tmp_path, BROKER_MANIFEST.replace("orders:medium", "ordres:medium"))
    assert unknown.returncode == 1 and "no source has id 'ordres'" in unknown.stderr


def test_a_broker_config_is_told_from_our_sources_file(tmp_path: Path) -> None:
    broker = tmp_path / "nautilus.yaml"
    broker.write_text(BROKER_CONFIG, encoding="utf-8")
    assert broker_sources(broker) == [{"id": "orders", "type": "postgres"}]
    ours = tmp_path / "ours.yaml"
    ours.write_text("sources:\n  - {id: t, type: sqlite_table, seed: t.csv}\n", encoding="utf-8")
    assert broker_sources(ours) is None
    assert broker_sources(tmp_path / "missing.yaml") is None


def test_our_metrics_never_load_in_the_brokers_process() -> None:
    """One name is the same (nautilus_request_duration_seconds): ours is registered only
    by ``nautilus-ranking serve``/``mcp``, which the attachment never imports, so the
    two never meet in one registry."""
    ours = {
        m.describe()[0].name + ("_total" if m._type == "counter" else "")
        for m in (
            metrics.REQUEST_DURATION,
            metrics.SOURCE_DURATION,
            metrics.SOURCE_ERRORS,
            metrics.TOPK_ROWS,
            metrics.REJECTED,
            metrics.CONFIG_PROBLEMS,
            metrics.IN_FLIGHT,
        )
    }
    assert ours & BROKER_METRICS == {"nautilus_request_duration_seconds"}
    graph = import_graph()
    reached, todo = set(), [m for m in graph if m.startswith("nautilus_ranking.upstream")]
    while todo:
        module = todo.pop()
        if module not in reached:
            reached.add(module)
            todo.extend(graph.get(module, ()))
    assert not {
        m for m in reached if m.startswith(("nautilus_ranking.service", "nautilus_ranking.mcp"))
    }
