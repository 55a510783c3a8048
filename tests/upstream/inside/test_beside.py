"""Beside the broker: in one venv, the broker works with this project installed after
it, and this project works beside the broker."""

from __future__ import annotations

import importlib.metadata as md
import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import AGENT, CONTEXT, static_source, write_config

BIN = Path(sys.executable).parent
SITE = Path(md.distribution("nautilus-rkm").locate_file(""))
BROKER_VARIABLES = {
    "NAUTILUS_API_KEY",
    "NAUTILUS_METADATA_KEY",
    "NAUTILUS_REVIEWER",
    "NAUTILUS_TEMPLATES_FILE",
    "NAUTILUS_BUILD_REV",
}


def run(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NAUTILUS_")}
    env["NAUTILUS_EMBEDDER"] = "hashing"  # as the suite (tests/conftest.py)
    return subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, cwd=cwd, env=env, timeout=300
    )


def test_both_are_installed_from_wheels_into_this_venv() -> None:
    import nautilus

    import nautilus_ranking

    assert Path(nautilus.__file__).is_relative_to(SITE)
    assert Path(nautilus_ranking.__file__).is_relative_to(SITE)  # not the source tree
    assert md.version("nautilus-rkm") == "0.3.0"
    direct = md.distribution("nautilus-ranking").read_text("direct_url.json") or ""
    assert '"editable": true' not in direct


def test_our_files_are_ours_and_every_broker_file_is_intact() -> None:
    ours = md.files("nautilus-ranking") or []
    tops = {str(f).split("/", 1)[0] for f in ours if not str(f).startswith("..")}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"nautilus_ranking"}
    broker = [f for f in md.files("nautilus-rkm") or [] if str(f).startswith("nautilus/")]
    assert broker and all(Path(f.locate()).is_file() for f in broker)


def test_the_broker_imports_inits_and_answers(tmp_path: Path) -> None:
    from nautilus import Broker

    assert run(BIN / "nautilus", "version").returncode == 0
    init = run(BIN / "nautilus", "init", cwd=tmp_path)
    assert init.returncode == 0, init.stderr
    broker = Broker.from_config(tmp_path / "nautilus.yaml")
    try:
        response = broker.request(AGENT, "show me the orders", dict(CONTEXT))
    finally:
        broker.close()
    assert [row["order_id"] for row in response.data["orders"]] == [1001, 1002]


def test_our_import_and_command_work_beside_it(tmp_path: Path) -> None:
    import nautilus_ranking
    from nautilus_ranking import Broker as OurBroker

    assert nautilus_ranking.__version__
    assert OurBroker.__module__ == "nautilus_ranking.broker"
    version = run(BIN / "nautilus-ranking", "--version")
    assert version.returncode == 0 and nautilus_ranking.__version__ in version.stdout
    query = run(BIN / "nautilus-ranking", "query", "orders-db disk full", "--top-k", "3")
    assert query.returncode == 0, query.stderr
    assert "INC-1043" in query.stdout
    module = run(sys.executable, "-m", "nautilus_ranking", "--version", cwd=tmp_path)
    assert module.returncode == 0


def test_the_broker_reads_only_its_own_variables_none_of_ours() -> None:
    from nautilus_ranking import NautilusSettings

    ours = {"NAUTILUS_" + name.upper() for name in NautilusSettings.model_fields}
    named = set()
    for path in (SITE / "nautilus").rglob("*.py"):
        named.update(re.findall(r"NAUTILUS_[A-Z0-9_]*[A-Z0-9]", path.read_text("utf-8")))
    assert named >= BROKER_VARIABLES  # the list we keep apart from is the broker's
    assert not ours & named
    assert not ours & BROKER_VARIABLES


def test_the_broker_and_an_operator_variables_are_no_typo_of_ours(tmp_path: Path) -> None:
    from nautilus import Broker

    from nautilus_ranking import NautilusSettings

    env = {name: "x" for name in BROKER_VARIABLES} | {
        "NAUTILUS_TEAM": "platform",  # an operator's own, expanded by the broker's YAML
        "NAUTILUS_CONFIG_STRICT": "true",
        "NAUTILUS_RANKING_TOP_K": "3",
    }
    os.environ.update(env)
    try:
        source = static_source("runbooks", [{"id": "RB-01", "title": "disk full"}])
        source["description"] = "${NAUTILUS_TEAM} runbooks"
        broker = Broker.from_config(write_config(tmp_path, [source]))
        try:
            assert broker.sources[0].description == "platform runbooks"
            settings = NautilusSettings()  # strict: any problem would raise
            assert settings.problems == () and settings.ranking_top_k == 3
        finally:
            broker.close()
        os.environ["NAUTILUS_RANKING_TOPK"] = "3"
        flagged = [p.name for p in NautilusSettings(config_strict=False).problems]
        assert flagged == ["NAUTILUS_RANKING_TOPK"]
    finally:
        for name in [*env, "NAUTILUS_RANKING_TOPK"]:
            os.environ.pop(name, None)
