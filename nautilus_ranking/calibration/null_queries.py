"""The off-topic queries ``calibrate`` runs: the shipped set and the operator's own.

``null_queries.txt`` holds several hundred everyday questions from many domains,
written for this package and licensed with it. An operator adds their own file (one
query a line, ``#`` comments), and may leave the shipped ones out when their sources
do cover some of those domains.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from nautilus_ranking.errors import NautilusError

SHIPPED = "null_queries.txt"
#: The largest null-queries file read (bytes): a few thousand short lines.
MAX_FILE_BYTES = 8 << 20


class NullQueriesError(NautilusError):
    """A null-queries file that cannot be read."""


def parse_lines(text: str) -> list[str]:
    """One query a line; blank lines and ``#`` comments skipped, repeats kept once."""
    lines = (line.strip() for line in text.splitlines())
    return list(dict.fromkeys(q for q in lines if q and not q.startswith("#")))


def shipped_null_queries() -> list[str]:
    """The off-topic queries shipped in the package."""
    text = resources.files("nautilus_ranking.calibration").joinpath(SHIPPED).read_text("utf-8")
    return parse_lines(text)


def read_null_queries(path: Path) -> list[str]:
    """An operator's file of off-topic queries (an error naming the file and the fix)."""
    try:
        if not path.is_file():
            raise NullQueriesError(f"--null-queries {path}: no such file")
        if path.stat().st_size > MAX_FILE_BYTES:
            raise NullQueriesError(
                f"--null-queries {path}: over {MAX_FILE_BYTES >> 20} MiB; one query a line"
            )
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise NullQueriesError(f"--null-queries {path}: cannot read it as UTF-8 ({exc})") from exc
    queries = parse_lines(text)
    if not queries:
        raise NullQueriesError(
            f"--null-queries {path}: no query in it (one query a line; '#' starts a comment)"
        )
    return queries
