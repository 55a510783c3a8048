"""A long text as passages: windows a sentence model reads whole, on sentence bounds.

A sentence model reads a text's first 128 word pieces (``embedders/onnx.py``,
``MAX_TOKENS``); what comes after does not exist for it. A text is *past the window*
when it holds more than :data:`WINDOW_WORDS` words (``\\w+`` runs): every such run is at
least one word piece, so such a text is cut by the model for certain, and a text that
is not is scored as it always was.

A text past the window is read as windows of at most :data:`WINDOW_UNITS` units (words
and punctuation marks; a unit is 1.1 word pieces at the median on the shared
collections, so a window is about 105 pieces, within the model's 128), packed from whole
paragraphs and sentences; a sentence longer than a window is cut between words. Each
window after the first starts with the last sentences of the one before it, up to
:data:`OVERLAP_UNITS` units, so an answer across a sentence bound is whole in one of
them. Windows are character offsets into the text (``[start, end)``): pure, no model.
A row's windows are the same for every query: ``synthesis/passage_rows.py`` keeps them
per row, with what else of its passages does not depend on the query.
"""

from __future__ import annotations

import re

#: More words than this and the model cuts the text (128 pieces, less [CLS] and [SEP]).
WINDOW_WORDS = 126
#: More words than this and a text is read as passages: past two windows' worth. A text
#: past the window only a little is mostly read by its head; scoring its tail as a
#: passage of its own cost 0.015 nDCG@10 on Cranfield partitioned (every cell was at or
#: above first-128 at this bound; docs/tuning-embedders.md, "Long rows").
PASSAGE_WORDS = 2 * WINDOW_WORDS
#: A window's size in units (words and punctuation marks).
WINDOW_UNITS = 96
#: The most units a window repeats of the one before it.
OVERLAP_UNITS = 24

_WORD = re.compile(r"\w+")
_UNIT = re.compile(r"\w+|[^\w\s]")
#: A sentence ends at . ! or ? followed by space, or at a line break; a paragraph at a
#: blank line (both are a bound).
_BOUND = re.compile(r"(?<=[.!?])\s+|\n\s*")


def past_window(text: str, words: int = WINDOW_WORDS) -> bool:
    """Whether ``text`` holds more than ``words`` words (by default: whether a sentence
    model cuts it for certain). Counted in C, over a prefix first (a prefix holds no
    more words than the text), so a long text's count stops soon past ``words``: an
    ASCII text by its bytes (:func:`ascii_words`), any other by ``findall``. A Python
    loop over the words cost a short row's ranking half as much again, ``findall`` over
    every short row 7%, and counting a long row's every word a new query on 100 seen
    long rows a tenth of its ranking."""
    if len(text) <= 2 * words:
        return False
    ascii = text.isascii()
    prefix = 8 * words
    while True:
        if ascii:
            count = ascii_words(text[:prefix].encode("ascii"), words)
        else:
            count = len(_WORD.findall(text, 0, prefix))
        if count > words:
            return True
        if prefix >= len(text):
            return False
        prefix *= 4


#: ASCII word bytes (``\\w``: letters, digits, the underscore), and a table turning
#: every other byte into a space.
_WORD_BYTES = bytes(c for c in range(128) if chr(c).isalnum() or chr(c) == "_")
_SEPARATORS_TO_SPACE = bytes(c if c in _WORD_BYTES else 32 for c in range(256))


def ascii_words(text: bytes, words: int) -> int:
    """The words (``\\w+`` runs) of an ASCII ``text``; any count of at most ``words``
    when it surely holds no more (words are separated: at most one more than the bytes
    that are not word bytes, a count without a Python object a word)."""
    separators = len(text.translate(None, _WORD_BYTES))
    if separators + 1 <= words:
        return separators + 1
    return len(text.translate(_SEPARATORS_TO_SPACE).split())


def sentences(text: str) -> list[tuple[int, int, int]]:
    """The text's sentences as (start, end, units), empty ones left out; a sentence
    over :data:`WINDOW_UNITS` units is cut into pieces of that many, between units."""
    out: list[tuple[int, int, int]] = []
    start = 0
    for bound in [*_BOUND.finditer(text), None]:
        end = bound.start() if bound is not None else len(text)
        units = [m.span() for m in _UNIT.finditer(text, start, end)]
        for first in range(0, len(units), WINDOW_UNITS):
            part = units[first : first + WINDOW_UNITS]
            out.append((part[0][0], part[-1][1], len(part)))
        if bound is not None:
            start = bound.end()
    return out


def windows(text: str) -> list[tuple[int, int]]:
    """``text``'s passages as ``[start, end)`` character offsets, in order, covering
    every sentence (see the module docstring); one window for a short text."""
    parts = sentences(text)
    if not parts:
        return [(0, len(text))]
    out: list[tuple[int, int]] = []
    first = 0
    while first < len(parts):
        last, units = first, parts[first][2]
        while last + 1 < len(parts) and units + parts[last + 1][2] <= WINDOW_UNITS:
            last += 1
            units += parts[last][2]
        out.append((parts[first][0], parts[last][1]))
        if last + 1 >= len(parts):
            break
        # the next window repeats this one's last sentences, up to OVERLAP_UNITS
        nxt, kept = last + 1, 0
        while nxt - 1 > first and kept + parts[nxt - 1][2] <= OVERLAP_UNITS:
            nxt -= 1
            kept += parts[nxt][2]
        first = nxt
    return out
