"""docs/design.md's Layout lists the package as it is: every module, every folder."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _layout() -> str:
    design = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    match = re.search(r"^## Layout\n(.*?)^## ", design, re.S | re.M)
    assert match is not None, "docs/design.md has no Layout section"
    return match.group(1)


def test_every_module_and_folder_of_the_package_is_in_the_layout() -> None:
    layout = _layout()
    package = ROOT / "nautilus_ranking"
    missing = []
    for path in sorted(package.rglob("*.py")):
        if "models" in path.relative_to(package).parts or path.name == "__init__.py":
            continue
        folder = path.parent.relative_to(package)
        # a module is named on its folder's line (or lines) or on a line of its own
        if path.name not in layout or (folder.parts and f"{folder.parts[-1]}/" not in layout):
            missing.append(str(path.relative_to(package)))
    assert missing == []
    folders = {p.name for p in package.iterdir() if p.is_dir() and not p.name.startswith("_")}
    assert sorted(f for f in folders if f"{f}/" not in layout) == []


def test_the_layout_names_no_module_that_is_gone() -> None:
    names = set(re.findall(r"(?<![/\w])([a-z_]+\.py)\b", _layout()))  # not tests/….py
    existing = {p.name for p in (ROOT / "nautilus_ranking").rglob("*.py")}
    assert sorted(names - existing) == []
