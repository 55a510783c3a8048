"""A confidence fit inside the broker is checked against what the broker serves (the
``nautilus.yaml`` it was built from, the embedder, the scoring setup): a matching fit
ranks, a mismatched one refuses ``attach_ranking`` and ``python -m
nautilus_ranking.upstream serve``, naming the fit, what it was made for and what is
configured."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from conftest import AGENT, CONTEXT, RUNBOOKS, TICKETS, static_source, write_config

from nautilus_ranking import NautilusSettings
from nautilus_ranking.confidence_fit_check import made_for
from nautilus_ranking.selection.local_fit import FIT_FORMAT
from nautilus_ranking.settings.model import ConfigError
from nautilus_ranking.upstream import attach_ranking

QUESTION = "ops: orders-db disk full"


def fit_file(folder: Path, made: dict[str, Any]) -> Path:
    """A fit file for ``made`` (the shipped fit's numbers: what is checked is what it
    was made for)."""
    shipped = json.loads(
        resources.files("nautilus_ranking.selection").joinpath("confidence_fit.json").read_text()
    )
    document = {
        "format": FIT_FORMAT,
        "top_k": shipped["top_k"],
        "setups": shipped["setups"],
        "made_for": made,
        "provenance": {"version": "test", "date": "2026-12-08T00:00:00+00:00"},
        "threshold": {},
    }
    path = folder / "fit.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def settings_with(fit: Path) -> NautilusSettings:
    return NautilusSettings(ranking_top_k=3, ranking_confidence_fit=str(fit))


def test_a_fit_made_for_the_brokers_file_ranks_there(tmp_path: Path) -> None:
    from nautilus import Broker

    config = write_config(tmp_path, [static_source("runbooks", RUNBOOKS)])
    fit = fit_file(tmp_path, made_for(NautilusSettings(), config))
    broker = Broker.from_config(config)
    try:
        attached = attach_ranking(broker, settings_with(fit), config_path=config)
        response = broker.request(AGENT, QUESTION, dict(CONTEXT))
    finally:
        broker.close()
    ranking = attached.ranking(response.request_id)
    assert ranking is not None and ranking.confidence is not None
    assert ranking.confidence["fit"] == "local"


def test_a_fit_made_for_other_sources_refuses_the_attachment(tmp_path: Path) -> None:
    from nautilus import Broker

    config = write_config(tmp_path, [static_source("runbooks", RUNBOOKS)])
    other = tmp_path / "other.yaml"
    other.write_text("sources: []\n", encoding="utf-8")
    fit = fit_file(tmp_path, made_for(NautilusSettings(), other))
    broker = Broker.from_config(config)
    try:
        with pytest.raises(ConfigError) as refused:
            attach_ranking(broker, settings_with(fit), config_path=config)
        with pytest.raises(ConfigError) as unchecked:  # no file to check it against
            attach_ranking(broker, settings_with(fit))
    finally:
        broker.close()
    message = str(refused.value)
    assert "NAUTILUS_RANKING_CONFIDENCE_FIT" in message and str(fit) in message
    assert f"made for sources file {other}" in message
    assert f"configured: sources file {config}" in message and "differ in the sources" in message
    assert "config_path" in str(unchecked.value)


def test_a_fit_made_for_another_embedder_refuses_serve(tmp_path: Path) -> None:
    config = write_config(
        tmp_path, [static_source("runbooks", RUNBOOKS), static_source("tickets", TICKETS)]
    )
    made = {**made_for(NautilusSettings(), config), "embedder": "onnx", "setup": "onnx/-/idf-off"}
    fit = fit_file(tmp_path, made)
    env = {k: v for k, v in os.environ.items() if not k.startswith("NAUTILUS_")}
    env |= {
        "NAUTILUS_EMBEDDER": "hashing",
        "NAUTILUS_RANKING_TOP_K": "3",
        "NAUTILUS_RANKING_CONFIDENCE_FIT": str(fit),
        "NAUTILUS_DATA_DIR": str(tmp_path / "data"),
    }
    done = subprocess.run(
        [sys.executable, "-m", "nautilus_ranking.upstream", "serve", "--config", str(config)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr[-3000:]
    assert str(fit) in done.stderr and "embedder onnx" in done.stderr
    assert "embedder hashing" in done.stderr and "differ in the embedder" in done.stderr
    assert "Traceback" not in done.stderr


OFF_TOPIC = [
    "best pizza dough recipe",
    "how tall is mount everest",
    "learn to play the violin",
    "history of the roman empire",
    "train schedule to paris",
    "knitting a wool scarf",
    "rules of cricket",
    "why is the sky blue",
    "planting tomatoes in spring",
    "famous impressionist painters",
]


def test_calibrate_through_the_broker_makes_the_fit_it_accepts(tmp_path: Path) -> None:
    from nautilus import Broker

    config = write_config(
        tmp_path, [static_source("runbooks", RUNBOOKS), static_source("tickets", TICKETS)]
    )
    nulls = tmp_path / "off-topic.txt"
    nulls.write_text("\n".join(OFF_TOPIC) + "\n", encoding="utf-8")
    fit = tmp_path / "fit.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("NAUTILUS_")}
    env |= {
        "NAUTILUS_EMBEDDER": "hashing",
        "NAUTILUS_RANKING_TOP_K": "3",
        "NAUTILUS_DATA_DIR": str(tmp_path / "data"),
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "nautilus_ranking.calibration.through_broker",
            "--config",
            str(config),
            "--out",
            str(fit),
            "--agent",
            AGENT,
            "--context",
            json.dumps(CONTEXT),
            "--intent-prefix",
            "ops: ",
            "--no-shipped-null-queries",
            "--null-queries",
            str(nulls),
            "--no-progress",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    written = json.loads(fit.read_text())
    assert written["made_for"]["sources_file"] == str(config)
    assert written["provenance"]["null_queries"] == len(OFF_TOPIC)  # each one ranked
    broker = Broker.from_config(config)
    try:
        attached = attach_ranking(broker, settings_with(fit), config_path=config)
        response = broker.request(AGENT, QUESTION, dict(CONTEXT))
    finally:
        broker.close()
    ranking = attached.ranking(response.request_id)
    assert ranking is not None and ranking.confidence is not None
    assert ranking.confidence["fit"] == "local"
    # the broker's file changed since: the fit is no longer made for what it serves
    config.write_text(config.read_text() + "# a source added\n", encoding="utf-8")
    broker = Broker.from_config(config)
    try:
        with pytest.raises(ConfigError, match="differ in the sources"):
            attach_ranking(broker, settings_with(fit), config_path=config)
    finally:
        broker.close()
