"""A benchmark's section of a markdown page (docs/benchmarks.md): written between its own
``<!-- NAME:begin -->`` and ``<!-- NAME:end -->`` markers, the rest of the page kept."""

from __future__ import annotations

from pathlib import Path


def markers(name: str) -> tuple[str, str]:
    """The begin and end markers of the section ``name``."""
    return f"<!-- {name}:begin -->", f"<!-- {name}:end -->"


def write_section(path: Path, section: str, name: str, before: str | None = None) -> None:
    """Replace the section ``name`` of ``path`` with ``section`` (which carries its
    markers); a page without it gets it before the section ``before`` if there is one,
    else at the end."""
    begin, end = markers(name)
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    follow = markers(before)[0] if before is not None else None
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = head + section.rstrip("\n") + rest.split(end, 1)[1]
    elif follow is not None and follow in text:
        head, rest = text.split(follow, 1)
        text = head + section + follow + rest
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text, encoding="utf-8")
