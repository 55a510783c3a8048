"""Rewrite the docs' knob tables from the one declaration (``nautilus_ranking/settings/knobs.py``).

Each table sits between ``<!-- knobs:NAME -->`` and ``<!-- /knobs -->`` in a doc;
``tests/settings/test_knobs.py`` fails while one differs from what the declaration makes.

    python -m tools.knob_tables          # rewrite them in place
"""

from __future__ import annotations

import re
from pathlib import Path

from nautilus_ranking.settings.knobs import markdown_table

ROOT = Path(__file__).resolve().parent.parent
#: doc → the tables it holds
TABLES = {
    ROOT / "docs" / "configuration.md": ("switches", "settings"),
    ROOT / "docs" / "nautilus-broker.md": ("broker",),
}
#: A table's block: its lines up to the first end marker (never past it, even empty).
_BLOCK = re.compile(r"(<!-- knobs:(\w+) -->\n)((?:(?!<!-- /knobs -->).*\n)*)(<!-- /knobs -->)")


def rendered(text: str) -> str:
    """``text`` with every knob table made anew."""
    return _BLOCK.sub(
        lambda m: m.group(1) + markdown_table(m.group(2)) + "\n" + m.group(4),  # type: ignore[arg-type]
        text,
    )


def main() -> int:
    for path in TABLES:
        text = path.read_text(encoding="utf-8")
        path.write_text(rendered(text), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
