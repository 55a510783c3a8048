"""What a command loads before it does anything: ``import nautilus_ranking.cli`` and the parser
(``--version``, ``--help``) load neither numpy nor pydantic nor any optional extra, and a
query over SQLite sources loads neither the service, the MCP SDK, PostgreSQL's modules
nor OpenTelemetry; nor does answering an MCP handshake. Each check runs in a fresh
interpreter and reads its ``sys.modules``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nautilus_ranking
from nautilus_ranking.sources.factory import BUILT_IN_TYPES
from nautilus_ranking.sources.schema import SOURCE_TYPES

#: Never loaded by ``import nautilus_ranking.cli``: the extras and the web stack.
EXTRAS = (
    "psycopg",
    "psycopg_pool",
    "fastapi",
    "starlette",
    "uvicorn",
    "mcp",
    "mcp_types",
    "onnxruntime",
    "opentelemetry",  # tracing is on only where an SDK is set up (nautilus_ranking/tracing/)
)
#: Never loaded by ``--version`` / ``--help`` either: the heavy core.
HEAVY = (
    "numpy",
    "pydantic",
    "pydantic_settings",
    "structlog",
    "yaml",
    "rich",
    "nautilus_ranking.broker",
    "nautilus_ranking.config",
    "nautilus_ranking.settings.model",
    "nautilus_ranking.sources.postgres",
)


def loaded_after(code: str, cwd: Path) -> set[str]:
    """The top-level packages and nautilus modules in ``sys.modules`` after ``code``."""
    probe = (
        f"import sys, json\n{code}\n"
        "names = {n for n in sys.modules if n.startswith('nautilus_ranking.')}\n"
        "names |= {n.split('.')[0] for n in sys.modules}\n"
        "sys.__stdout__.write('\\n' + json.dumps(sorted(names)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=cwd
    )
    assert out.returncode == 0, out.stderr
    return set(json.loads(out.stdout.splitlines()[-1]))


def _prefixed(loaded: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(n for n in loaded if any(n == m or n.startswith(m + ".") for m in names))


def test_importing_the_command_loads_no_extra_and_no_heavy_module(tmp_path: Path) -> None:
    loaded = loaded_after("import nautilus_ranking.cli", tmp_path)
    assert "nautilus_ranking.cli" in loaded
    assert _prefixed(loaded, EXTRAS) == []
    assert _prefixed(loaded, HEAVY) == []


def help_loads(argv: list[str], cwd: Path) -> set[str]:
    return loaded_after(
        "from nautilus_ranking.cli import main\n"
        f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass",
        cwd,
    )


def test_version_and_help_load_no_heavy_module(tmp_path: Path) -> None:
    for argv in (
        ["--version"],
        ["--help"],
        ["eval", "--help"],
        ["serve", "--help"],
        ["mcp", "--help"],
    ):
        assert _prefixed(help_loads(argv, tmp_path), EXTRAS + HEAVY) == [], argv
    # The query's flags are the request model's (pydantic): no extra, no PostgreSQL.
    loaded = help_loads(["query", "--help"], tmp_path)
    assert "nautilus_ranking.request.model" in loaded
    assert _prefixed(loaded, (*EXTRAS, "nautilus_ranking.sources.postgres", "rich")) == []


def test_a_query_over_sqlite_sources_loads_no_service_mcp_or_postgres(tmp_path: Path) -> None:
    loaded = loaded_after(
        "import contextlib, io\nfrom nautilus_ranking.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert main(['query', 'orders-db disk full', '--top-k', '3']) == 0",
        tmp_path,
    )
    assert {
        "numpy",
        "nautilus_ranking.broker",
        "nautilus_ranking.sources.sqlite.fts",
    } <= loaded  # it ran
    assert _prefixed(loaded, EXTRAS) == []
    assert (
        _prefixed(
            loaded,
            (
                "nautilus_ranking.service",
                "nautilus_ranking.mcp",
                "nautilus_ranking.sources.postgres",
                "nautilus_ranking.sources.http",
                "jmespath",
                "nautilus_ranking.evaluation.evaluate",
                "rich",
            ),
        )
        == []
    )


def test_every_built_in_type_is_registered_by_the_module_declared_for_it() -> None:
    for name, module in BUILT_IN_TYPES.items():
        spec = SOURCE_TYPES[name]  # imports the module on first look-up
        assert spec.__module__ == module
    assert list(SOURCE_TYPES)[: len(BUILT_IN_TYPES)] == list(BUILT_IN_TYPES)


def test_the_package_names_its_public_api_lazily_and_completely() -> None:
    for name in nautilus_ranking.__all__:
        assert getattr(nautilus_ranking, name) is not None, name
    assert set(dir(nautilus_ranking)) >= set(nautilus_ranking.__all__)
    try:
        nautilus_ranking.NoSuchName  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchName" in str(exc)
    else:
        raise AssertionError("an unknown name must raise AttributeError")


def test_logging_set_up_waits_for_the_first_event_at_its_level(tmp_path: Path) -> None:
    """Under configure_logging in a fresh process, an event below the level loads no
    structlog; the first one at the level does, rendered as asked; a structlog the
    application configured meanwhile wins."""
    code = (
        "import io, sys\nfrom nautilus_ranking.log import configure_logging, get_logger\n"
        "out = io.StringIO()\nconfigure_logging('warning', 'json', out)\n"
        "log = get_logger('nautilus_ranking.test')\nlog.info('hidden', n=1)\n"
        "assert 'structlog' not in sys.modules\n"
        "log.warning('shown', n=2)\nassert 'structlog' in sys.modules\n"
        "print(out.getvalue().strip())\n"
        "configure_logging('warning', 'json', out)\n"  # structlog loaded: applied now
        "import structlog\nfrom structlog.testing import capture_logs\n"
        "with capture_logs() as seen:\n    log.warning('captured')\n"
        "assert [e['event'] for e in seen] == ['captured'], seen\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    event = json.loads(out.stdout.strip().splitlines()[-1])
    assert (event["event"], event["n"], event["level"]) == ("shown", 2, "warning")
    later = (
        "import io, sys\nfrom nautilus_ranking.log import configure_logging, get_logger\n"
        "out = io.StringIO()\nconfigure_logging('warning', 'json', out)\n"
        "import structlog\nstructlog.configure(processors=["
        "structlog.processors.KeyValueRenderer()])\n"
        "get_logger('nautilus_ranking.test').warning('theirs', n=3)\n"
        "print(out.getvalue().strip())\n"
    )
    theirs = subprocess.run(
        [sys.executable, "-c", later], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert theirs.returncode == 0, theirs.stderr
    assert theirs.stdout.strip() == "n=3 event='theirs'"  # their renderer, not JSON


def test_answering_an_mcp_handshake_loads_no_opentelemetry(tmp_path: Path) -> None:
    """The stdio server answers ``initialize`` before the MCP SDK (which imports the
    OpenTelemetry API itself) is loaded: nothing of nautilus' loads OpenTelemetry."""
    loaded = loaded_after(
        "from nautilus_ranking.mcp.stdio import early_answer\n"
        "answer = early_answer({'jsonrpc': '2.0', 'id': 1, 'method': 'initialize', 'params': "
        "{'protocolVersion': '2025-06-18', 'capabilities': {}, "
        "'clientInfo': {'name': 't', 'version': '1'}}})\n"
        "assert answer['protocolVersion'] == '2025-06-18', answer",
        tmp_path,
    )
    assert "nautilus_ranking.mcp.stdio" in loaded
    assert _prefixed(loaded, ("opentelemetry", "mcp")) == []
