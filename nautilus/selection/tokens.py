"""Counting the tokens of the texts a caller receives.

With the ``tokens`` extra (``pip install 'nautilus-ranking[tokens]'``) a text's count
is exact: the number of tokens of ``o200k_base``, the BPE vocabulary of OpenAI's
GPT-4o, GPT-4.1, GPT-5 and o-series models, counted by ``toktok`` (Rust; the
vocabulary is compiled into the package, so nothing is downloaded at run time, and
its counts match tiktoken's token for token — checked on the shared corpora's rows
and 3,000 random Unicode strings, docs/tuning.md).

Without the extra a text's count is :func:`estimate_tokens`, an estimate built to
count *more* than ``o200k_base`` on the texts rows hold, so a budget counted with it
hands over less rather than more: one token per run of up to 4 ASCII letters, per run
of up to 3 digits (o200k_base never joins more), per ASCII punctuation or other
non-letter, non-digit, non-space character, per run of 2+ whitespace characters and
per line break, plus one token per UTF-8 byte beyond the first of every non-ASCII
character. Measured against ``o200k_base`` (benchmarks/token_budget.py): never under
on the shared corpora's rows, the demo's rows, JSON with numbers, hex ids, Python
source and CJK/Cyrillic/emoji text; it does count *less* on random letter strings
(base64, opaque keys), where BPE finds no merges — install the extra where rows hold
those.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import cache
from importlib import import_module
from typing import Any

#: The exact tokenizer: the BPE vocabulary of today's OpenAI models (GPT-4o and later).
ENCODING = "o200k_base"
#: What :func:`tokenizer_name` says when the ``tokens`` extra is missing.
ESTIMATE = "estimate"
#: The extra that brings the exact tokenizer.
EXTRA = "tokens"

_PIECE = re.compile(r"[A-Za-z]{1,4}|[0-9]{1,3}|[^\sA-Za-z0-9]|\s{2,}|\n")


def estimate_tokens(text: str) -> int:
    """The documented over-estimate of ``text``'s ``o200k_base`` tokens (module docstring)."""
    if text.isascii():
        return len(_PIECE.findall(text))
    return len(_PIECE.findall(text)) + len(text.encode("utf-8", "surrogatepass")) - len(text)


@cache
def _exact() -> Callable[[list[str]], list[int]] | None:
    """The exact counter (loaded once per process), or None without the extra."""
    try:
        toktok: Any = import_module("toktok")
    except ImportError:
        return None
    batch_count = toktok.batch_count
    batch_count([""], ENCODING, threads=1)  # loads the vocabulary now, once (~0.8 s)

    def count(texts: list[str]) -> list[int]:
        # One thread: for a request's few rows a pool costs more than it saves.
        counts: list[int] = batch_count(texts, ENCODING, threads=1)
        return counts
    return count


def exact_available() -> bool:
    """Whether the ``tokens`` extra is installed (counts are then exact)."""
    return _exact() is not None


def tokenizer_name() -> str:
    """``o200k_base`` with the ``tokens`` extra, else ``estimate``: what a count means."""
    return ENCODING if exact_available() else ESTIMATE


def count_tokens(texts: Sequence[str], exact: bool | None = None) -> list[int]:
    """One count per text, in order: exact with the extra, else the estimate.

    ``exact=True`` requires the extra (an :class:`ImportError` naming it otherwise);
    ``exact=False`` always estimates; None (the default) takes the best available.
    """
    counter = _exact() if exact is not False else None
    if exact and counter is None:
        raise ImportError(f"exact token counts need the {EXTRA!r} extra: "
                          f"pip install 'nautilus-ranking[{EXTRA}]'")
    if counter is not None:
        return counter(list(texts))
    return [estimate_tokens(t) for t in texts]
