"""The NAUTILUS_SERVE_* settings: defaults, good values, and warn-and-skip for bad ones."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from cli_process import run_nautilus
from plain_environment import plain_environment
from structlog.testing import capture_logs

from nautilus_ranking.settings.model import ConfigError, NautilusSettings

ROOT = Path(__file__).resolve().parents[2]


def test_defaults_are_a_loopback_single_worker_service() -> None:
    s = NautilusSettings()
    assert (s.serve_host, s.serve_port, s.serve_workers) == ("127.0.0.1", 8000, 1)
    assert s.serve_allow_overrides is True and s.serve_api_keys_file is None
    assert (s.serve_max_query_chars, s.serve_max_body_bytes, s.serve_max_concurrency) == (
        1000,
        16_384,
        64,
    )
    assert (s.serve_request_timeout_s, s.serve_probe_interval_s) == (10.0, 10.0)
    assert s.serve_body_timeout_s == 5.0
    assert s.serve_cors_origins == [] and s.problems == ()


def test_good_values_are_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {
        "HOST": "0.0.0.0",
        "PORT": "9000",
        "WORKERS": "4",
        "ALLOW_OVERRIDES": "off",
        "REQUEST_TIMEOUT_S": "2.5",
        "CORS_ORIGINS": "https://a.example.com, http://b:8080/",
    }.items():
        monkeypatch.setenv(f"NAUTILUS_SERVE_{name}", value)
    s = NautilusSettings()
    assert (s.serve_host, s.serve_port, s.serve_workers) == ("0.0.0.0", 9000, 4)
    assert s.serve_allow_overrides is False and s.serve_request_timeout_s == 2.5
    assert s.serve_cors_origins == ["https://a.example.com", "http://b:8080"]
    assert s.problems == ()


@pytest.mark.parametrize(
    ("name", "value", "field", "default", "valid"),
    [
        ("PORT", "99999", "serve_port", 8000, "an integer from 1 to 65535"),
        ("PORT", "http", "serve_port", 8000, "an integer from 1 to 65535"),
        ("WORKERS", "0", "serve_workers", 1, "an integer >= 1"),
        ("MAX_CONCURRENCY", "-5", "serve_max_concurrency", 64, "an integer >= 1"),
        ("REQUEST_TIMEOUT_S", "0", "serve_request_timeout_s", 10.0, "a number > 0, such as 2.5"),
        ("PROBE_INTERVAL_S", "soon", "serve_probe_interval_s", 10.0, "a number > 0, such as 2.5"),
        ("BODY_TIMEOUT_S", "-1", "serve_body_timeout_s", 5.0, "a number > 0, such as 2.5"),
        (
            "ALLOW_OVERRIDES",
            "nope",
            "serve_allow_overrides",
            True,
            "true/false, 1/0, yes/no, on/off",
        ),
        (
            "HOST",
            "not a host",
            "serve_host",
            "127.0.0.1",
            "an address such as 127.0.0.1 or 0.0.0.0",
        ),
        (
            "CORS_ORIGINS",
            "example.com",
            "serve_cors_origins",
            [],
            "'*' or comma-separated origins such as https://app.example.com",
        ),
    ],
)
def test_a_bad_value_is_warned_about_and_skipped(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, field: str, default: object, valid: str
) -> None:
    variable = f"NAUTILUS_SERVE_{name}"
    monkeypatch.setenv(variable, value)
    with capture_logs() as logs:
        s = NautilusSettings()
    assert getattr(s, field) == default
    assert [(e["event"], e["variable"], e["valid"]) for e in logs] == [
        ("config_value_skipped", variable, valid)
    ]
    monkeypatch.setenv("NAUTILUS_CONFIG_STRICT", "true")
    with pytest.raises(ConfigError, match=variable):
        NautilusSettings()


def test_every_serve_variable_is_documented() -> None:
    """Every NAUTILUS_SERVE_* name the code reads is in configuration.md and .env.example."""
    fields = {
        "NAUTILUS_" + f.upper() for f in NautilusSettings.model_fields if f.startswith("serve_")
    }
    code = "\n".join(p.read_text() for p in (ROOT / "nautilus_ranking").rglob("*.py"))
    named = set(re.findall(r"NAUTILUS_SERVE_[A-Z_]+[A-Z]", code)) | fields
    docs = (ROOT / "docs" / "configuration.md").read_text()
    example = (ROOT / ".env.example").read_text()
    assert named == fields  # no name in the code that is not a setting
    assert {n for n in named if n not in docs or n not in example} == set()


def _serve(
    env: dict[str, str], tmp_path: Path, command: tuple[str, ...] = ("serve",)
) -> subprocess.CompletedProcess[str]:
    base = plain_environment()
    return run_nautilus(
        *command,
        "--port",
        "1",
        env={**base, **env, "NAUTILUS_DATA_DIR": str(tmp_path)},
        cwd=tmp_path,
    )


def test_serve_refuses_to_start_on_a_bad_setting_in_strict_mode(tmp_path: Path) -> None:
    result = _serve({"NAUTILUS_CONFIG_STRICT": "true", "NAUTILUS_SERVE_WORKERS": "many"}, tmp_path)
    assert result.returncode == 1
    assert "NAUTILUS_SERVE_WORKERS: 'many': not an integer >= 1" in result.stderr
    assert "Traceback" not in result.stderr


def test_serve_refuses_an_unusable_api_keys_file(tmp_path: Path) -> None:
    empty = tmp_path / "keys"
    empty.write_text("# no key yet\n")
    empty.chmod(0o600)
    for path, reason in ((tmp_path / "missing", "cannot read it"), (empty, "holds no key")):
        result = _serve({"NAUTILUS_SERVE_API_KEYS_FILE": str(path)}, tmp_path)
        assert result.returncode == 1 and "NAUTILUS_SERVE_API_KEYS_FILE" in result.stderr
        assert reason in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("command", [("serve",), ("mcp", "--transport", "http")])
def test_a_secret_open_to_others_or_a_fifo_for_a_key_stops_the_server(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    """The keys file and cursor.key hold secrets: at 0644 anyone on the host reads every
    key or signs cursors; a FIFO at cursor.key blocked the loop (``/healthz`` too)."""
    keys = tmp_path / "keys"
    keys.write_text("k-only-this-one\n")
    keys.chmod(0o644)
    shared = _serve({"NAUTILUS_SERVE_API_KEYS_FILE": str(keys)}, tmp_path, command)
    assert shared.returncode == 1 and "NAUTILUS_SERVE_API_KEYS_FILE" in shared.stderr
    assert "open to others (mode 0644)" in shared.stderr
    assert f"chmod 600 {keys}" in shared.stderr and "k-only-this-one" not in shared.stderr
    keys.chmod(0o600)
    os.mkfifo(tmp_path / "cursor.key", 0o600)
    blocked = _serve({"NAUTILUS_SERVE_API_KEYS_FILE": str(keys)}, tmp_path, command)
    assert blocked.returncode == 1, blocked.stderr
    assert f"cursor key file {tmp_path / 'cursor.key'} is a named pipe" in blocked.stderr
    for result in (shared, blocked):
        assert "Traceback" not in result.stderr and "_ready" not in result.stderr
