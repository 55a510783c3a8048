"""Rewrite the docs' knob tables from the one declaration (``nautilus_ranking/settings/knobs.py``),
and their lists of the request fields a caller may override from the one ``OVERRIDES``
(``nautilus_ranking/request/plan.py``).

Each table sits between ``<!-- knobs:NAME -->`` and ``<!-- /knobs -->`` in a doc, each
override list between ``<!-- overrides -->`` and ``<!-- /overrides -->`` (inline, in a
sentence or a table cell); ``tests/settings/test_knobs.py`` fails while one differs from
what the declarations make.

    python -m tools.knob_tables          # rewrite them in place
"""

from __future__ import annotations

import re
from pathlib import Path

from nautilus_ranking.settings.knobs import OVERRIDES, markdown_table

ROOT = Path(__file__).resolve().parent.parent
#: doc → the tables it holds
TABLES = {
    ROOT / "docs" / "configuration.md": ("switches", "settings"),
    ROOT / "docs" / "nautilus-broker.md": ("broker",),
}
#: doc → how many override lists it holds
OVERRIDE_LISTS = {
    ROOT / "docs" / "configuration.md": 2,  # the profiles' OVERRIDES, ALLOW_OVERRIDES
    ROOT / "docs" / "mcp.md": 1,
    ROOT / "docs" / "deployment.md": 1,
}
#: A table's block: its lines up to the first end marker (never past it, even empty).
_BLOCK = re.compile(r"(<!-- knobs:(\w+) -->\n)((?:(?!<!-- /knobs -->).*\n)*)(<!-- /knobs -->)")
#: An override list: the text between its markers, on one line.
_OVERRIDES = re.compile(r"(<!-- overrides -->)[^\n]*?(<!-- /overrides -->)")


def override_list() -> str:
    """Every field in ``OVERRIDES``, as a sentence lists them: ``a``, ``b`` and ``c``."""
    names = [f"`{name}`" for name in OVERRIDES]
    return ", ".join(names[:-1]) + " and " + names[-1]


def rendered(text: str) -> str:
    """``text`` with every knob table and override list made anew."""
    text = _BLOCK.sub(
        lambda m: m.group(1) + markdown_table(m.group(2)) + "\n" + m.group(4),  # type: ignore[arg-type]
        text,
    )
    return _OVERRIDES.sub(lambda m: m.group(1) + override_list() + m.group(2), text)


def main() -> int:
    for path in {**TABLES, **OVERRIDE_LISTS}:
        text = path.read_text(encoding="utf-8")
        path.write_text(rendered(text), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
