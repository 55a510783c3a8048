"""What several commands' flags share: their types, checked as the settings are."""

from __future__ import annotations

import argparse

from nautilus_ranking.settings.parsing import parse_int

#: ``--config``'s help, the same for every command that reads a sources file.
CONFIG_HELP = "sources file (default: NAUTILUS_CONFIG, else the demo)"


def count(text: str) -> int:
    """A count flag (``--top-k``, ``--workers``): an integer >= 1, as the settings read one
    (argparse names the flag in its error)."""
    value, problem = parse_int("--top-k", text)  # the rules of NAUTILUS_RANKING_TOP_K
    if problem is not None or value is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer >= 1")
    return value


def port(text: str) -> int:
    """``--port``: 1-65535."""
    if not text.strip().isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (1-65535)")
    return int(text)


def boost_entry(text: str) -> str:
    """``--boost``: one ``id:level`` entry, checked like NAUTILUS_SOURCE_BOOSTS."""
    from nautilus_ranking.settings.boost_entries import collect_source_boosts

    boosts, problems = collect_source_boosts(text)
    if problems:
        raise argparse.ArgumentTypeError(
            f"{problems[0].value!r}: {problems[0].reason} (valid levels: {problems[0].valid})"
        )
    if not boosts:
        raise argparse.ArgumentTypeError("empty entry (expected ID or ID:LEVEL)")
    return text
