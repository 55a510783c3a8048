"""SQL text built from configuration and seeds: identifiers quoted, LIKE patterns escaped
(the SQLite and the PostgreSQL sources share it)."""

from __future__ import annotations

from nautilus_ranking.sources.seeds import SeedError

#: SQLite's default limit on host parameters is 999 (older builds) — keep well under.
MAX_KEYWORDS = 32
#: Characters of one query word matched with LIKE (SQLite refuses patterns over 50,000
#: bytes); a longer word matches on its first characters.
MAX_WORD_CHARS = 256


def like_pattern(word: str) -> str:
    word = word[:MAX_WORD_CHARS]
    escaped = word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def quote_identifier(name: str) -> str:
    """A SQL identifier from configuration, quoted; rejects anything but plain names."""
    if not name or not name.replace("_", "").isalnum():
        raise ValueError(f"invalid column or table name {name!r}")
    return f'"{name}"'


def escape_identifier(name: str) -> str:
    """Any field name of a seed as a quoted SQL identifier (quotes doubled)."""
    if "\x00" in name:
        raise SeedError(f"field name {name!r} contains a NUL character")
    return '"' + name.replace('"', '""') + '"'
