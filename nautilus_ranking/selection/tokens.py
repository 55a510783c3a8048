"""Counting the tokens of the texts a caller receives.

With the ``tokens`` extra (``pip install 'nautilus-ranking[tokens]'``) a text's count
is exact: the number of tokens of ``o200k_base``, the BPE vocabulary of OpenAI's
GPT-4o, GPT-4.1, GPT-5 and o-series models, counted by ``toktok`` (Rust; the
vocabulary is compiled into the package, so nothing is downloaded at run time, and
its counts match tiktoken's token for token — checked on the shared corpora's rows
and 3,000 random Unicode strings, docs/tuning-selection.md).

Without the extra a text's count is :func:`estimate_counts`, an estimate built to
count *more* than ``o200k_base`` on the texts rows hold, so a budget counted with it
hands over less rather than more. Over the text's UTF-8 bytes: a word (a run of ASCII
letters) of ``n`` letters costs ``(n + 3) / 4`` (at least ``⌈n / 4⌉``), a number (a
run of digits) ``(n + 2) / 3`` (o200k_base never joins more than 3 digits), the two
sums each rounded down; plus one per other byte (ASCII punctuation and symbols, and
every byte of a non-ASCII character), per line break, per run of 2+ whitespace
characters and per whitespace character before a digit.
Measured against ``o200k_base`` (benchmarks/speed/token_budget.py): never under on the
shared corpora's rows (median 1.6× over), the demo's rows, JSON with numbers, hex ids,
Python source and CJK/Cyrillic/emoji text; it does count *less* on random letter
strings (base64, opaque keys), where BPE finds no merges — install the extra where
rows hold those.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache
from importlib import import_module
from typing import Any

import numpy as np
import numpy.typing as npt

#: The exact tokenizer: the BPE vocabulary of today's OpenAI models (GPT-4o and later).
ENCODING = "o200k_base"
#: What :func:`tokenizer_name` says when the ``tokens`` extra is missing.
ESTIMATE = "estimate"
#: The extra that brings the exact tokenizer.
EXTRA = "tokens"

# Byte classes of the estimate; a NUL byte separates the texts of a batch.
_SEP, _LETTER, _DIGIT, _OTHER, _SPACE, _NEWLINE = range(6)


def _classes() -> npt.NDArray[np.int8]:
    classes = np.full(256, _OTHER, dtype=np.int8)
    for byte in range(128):
        char = chr(byte)
        if char.isalpha():
            classes[byte] = _LETTER
        elif char.isdigit():
            classes[byte] = _DIGIT
        elif char == "\n":
            classes[byte] = _NEWLINE
        elif char in " \t\r\x0b\x0c":
            classes[byte] = _SPACE
    classes[0] = _SEP
    return classes


_CLASS = _classes()
_IS_LETTER = (_CLASS == _LETTER).astype(np.int32)
_IS_DIGIT = (_CLASS == _DIGIT).astype(np.int32)
_COSTS_ONE = ((_CLASS == _OTHER) | (_CLASS == _NEWLINE)).astype(np.int32)
_IS_SPACE = ((_CLASS == _SPACE) | (_CLASS == _NEWLINE)).astype(np.int32)


def estimate_counts(texts: Sequence[str]) -> list[int]:
    """The documented over-estimate (module docstring) of each text's ``o200k_base``
    tokens, for a whole batch in a few numpy passes over its bytes."""
    if not texts:
        return []
    encoded = [t.encode("utf-8", "surrogatepass") for t in texts]
    data = np.frombuffer(b"\x00".join(encoded), dtype=np.uint8)
    lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    if not len(data):
        return [0] * len(texts)
    starts = np.zeros(len(encoded), dtype=np.int64)
    np.cumsum(lengths[:-1] + 1, out=starts[1:])
    letter = np.take(_IS_LETTER, data)
    words = letter * 4  # a word's first letter 4 (1 + 3), the rest 1
    words[1:] -= 3 * (letter[1:] & letter[:-1])
    digit = np.take(_IS_DIGIT, data)
    numbers = digit * 3  # a number's first digit 3 (1 + 2), the rest 1
    numbers[1:] -= 2 * (digit[1:] & digit[:-1])
    space = np.take(_IS_SPACE, data)
    flat = np.take(_COSTS_ONE, data)
    flat[1:] += space[1:] & space[:-1]  # a whitespace run's second character
    flat[2:] -= space[2:] & space[1:-1] & space[:-2]
    flat[:-1] += space[:-1] & digit[1:]  # a space before a number is a token of its own
    sums = [np.add.reduceat(part, starts) for part in (words, numbers, flat)]
    counts = sums[0] // 4 + sums[1] // 3 + sums[2]
    counts[lengths == 0] = 0  # reduceat reads the next text there
    out: list[int] = counts.tolist()
    return out


def estimate_tokens(text: str) -> int:
    """:func:`estimate_counts` of one text."""
    return estimate_counts([text])[0]


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
        try:
            counts: list[int] = batch_count(texts, ENCODING, threads=1)
        except UnicodeEncodeError:  # a lone surrogate: counted as its replacement characters
            counts = batch_count([_encodable(t) for t in texts], ENCODING, threads=1)
        return counts

    return count


def _encodable(text: str) -> str:
    """``text`` with each lone surrogate's bytes as U+FFFD (never fewer tokens)."""
    return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


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
        raise ImportError(
            f"exact token counts need the {EXTRA!r} extra: pip install 'nautilus-ranking[{EXTRA}]'"
        )
    if counter is not None:
        return counter(list(texts))
    return estimate_counts(texts)
