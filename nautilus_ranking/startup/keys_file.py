"""The API keys file read as ``serve`` and ``mcp`` read it at start-up: a regular file,
bounded, each key once."""

from __future__ import annotations

from pathlib import Path

from nautilus_ranking.errors import Problem, cut
from nautilus_ranking.settings.model import ConfigError

#: The largest API keys file read (bytes): a file of keys, not data.
MAX_KEYS_FILE_BYTES = 1 << 20


def load_api_keys(path: str | None) -> tuple[bytes, ...]:
    """Keys from the file, one a line (blank lines and ``#`` comments ignored).

    A set but unreadable or empty file is an error: an operator who asked for
    authentication never gets an open service by mistake; so is a file others on the
    host may read (it holds every key: owner-only, or refused with the fix) and a key
    listed twice (two lines, two grants: neither is surely the one meant).
    """
    if path is None:
        return ()

    def problem(reason: str) -> ConfigError:
        return ConfigError(
            (
                Problem(
                    "NAUTILUS_SERVE_API_KEYS_FILE",
                    cut(path),
                    reason,
                    "a readable, owner-only file (chmod 600), one key a line",
                ),
            )
        )

    from nautilus_ranking.sources.seeds import FileRefusedError, OpenToOthersError, read_text_file

    try:  # a regular file only, bounded, owner-only; a BOM (a Windows editor's) is no key
        text = read_text_file(
            Path(path).expanduser(),
            "API keys file",
            MAX_KEYS_FILE_BYTES,
            "a regular file, one key a line",
            secret=True,
        )
    except OpenToOthersError as exc:
        raise problem(str(exc)) from None
    except FileRefusedError as exc:
        raise problem(f"cannot read it ({exc})") from None
    from nautilus_ranking.startup.key_grants import split_line

    keys = tuple(split_line(line)[0].encode() for line in key_lines(text))
    if not keys:
        raise problem("holds no key")
    twice = _listed_twice(text)
    if twice:  # which line's grant would win is a guess: refuse rather than pick one
        raise problem(f"a key is listed twice (lines {twice[0]} and {twice[1]})")
    return keys


def _listed_twice(text: str) -> tuple[int, int] | None:
    """The line numbers of the first key listed twice (the key itself is never shown)."""
    from nautilus_ranking.startup.key_grants import split_line

    first: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip() and not line.strip().startswith("#"):
            key = split_line(line.strip())[0]
            if key in first:
                return first[key], number
            first[key] = number
    return None


def key_lines(text: str) -> list[str]:
    """The key lines of a keys file's text (blank lines and ``#`` comments left out)."""
    return [
        line.strip()
        for line in text.splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]


def read_key_lines(path: str) -> list[str]:
    """The key lines of a keys file already loaded by :func:`load_api_keys`."""
    from nautilus_ranking.sources.seeds import read_text_file

    text = read_text_file(
        Path(path).expanduser(), "API keys file", MAX_KEYS_FILE_BYTES, "a regular file", True
    )
    return key_lines(text)
