"""The words of a batch's byte text, grouped in numpy, and the tokens of words seen before.

The batch tokenizer (:meth:`nautilus.text.TokenBatch.from_texts`) joins many texts
into one byte string in which every byte outside a word is a space. Cutting it with
``bytes.split`` and numbering the words with a dict costs ~130 ns a word, a Python
object each; here the words are found and equal ones grouped with a handful of numpy
calls, and only each *distinct* word is looked up, by an integer, in a cache of the
tokens of words seen before (a server sees the same words request after request).

A word of up to 16 bytes is exactly two integers: its first and its next 8 bytes, the
bytes past its end cleared (no word holds a NUL: the byte translation made NUL a
space). Grouping and the cache go by a 64-bit hash of the two and then check the two
integers themselves, so a hash collision (which a hostile row could aim for) costs
time, never a wrong token. Longer words, rare in text, go by their bytes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from itertools import repeat
from operator import itemgetter

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]
Tokens = tuple[str, ...]

#: ``_KEEP_FIRST[k]``: the mask of the first ``k`` bytes of a little-endian 8-byte integer.
_KEEP_FIRST = np.array([(1 << 8 * k) - 1 for k in range(9)], dtype=np.uint64)
#: Words up to this many bytes are keyed by two integers; longer ones by their bytes.
SHORT_WORD = 16
#: Odd 64-bit constants of the word hash (a multiply-xorshift mix, as in splitmix64).
_MIX = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F),
        np.uint64(0xBF58476D1CE4E5B9))


@dataclass(frozen=True)
class WordGroups:
    """The words of one byte text: ``group[i]`` is word ``i``'s group, equal words share
    one, groups numbered in order of first appearance. Per group: its first word's span
    in ``text`` and, for a short word, its two integer keys and their hash."""

    text: bytes
    group: IntArray
    start: IntArray
    end: IntArray
    first: U64
    second: U64
    hashed: U64
    is_long: npt.NDArray[np.bool_]

    def word(self, g: int) -> bytes:
        return self.text[int(self.start[g]):int(self.end[g])]


def group_words(data: bytes) -> WordGroups:
    """The words of ``data`` (its runs of bytes other than space), equal ones grouped."""
    text = b" " + data + b" " * SHORT_WORD
    is_word = np.frombuffer(text, dtype=np.uint8) != 0x20
    edges = np.flatnonzero(is_word[1:] != is_word[:-1]) + 1
    starts, ends = edges[0::2], edges[1::2]
    lengths = ends - starts
    # Every offset's next 8 bytes as one integer (an unaligned view: nothing is copied).
    eight = np.ndarray((len(text) - 7,), dtype="<u8", buffer=text, strides=(1,))
    long_words = np.flatnonzero(lengths > SHORT_WORD)
    short = np.flatnonzero(lengths <= SHORT_WORD) if len(long_words) else None
    at, size = (starts, lengths) if short is None else (starts[short], lengths[short])
    first = eight[at] & _KEEP_FIRST[np.minimum(size, 8)]
    second = eight[at + 8] & _KEEP_FIRST[np.clip(size - 8, 0, 8)]
    hashed = _hash(first, second)
    group, leaders = _group_equal(first, second, hashed)  # leaders: each group's first word
    first, second, hashed = first[leaders], second[leaders], hashed[leaders]
    is_long = np.zeros(len(leaders), dtype=bool)
    if short is not None:
        group, leaders = _with_long_words(text, starts, ends, short, group, short[leaders],
                                          long_words)
        n_long = len(leaders) - len(first)
        first, second, hashed = (np.concatenate((keys, np.zeros(n_long, dtype=np.uint64)))
                                 for keys in (first, second, hashed))
        is_long = np.concatenate((is_long, np.ones(n_long, dtype=bool)))
    order = np.argsort(leaders)  # groups renumbered in order of first appearance
    renumber = np.empty(len(order), dtype=np.int64)
    renumber[order] = np.arange(len(order), dtype=np.int64)
    leaders = leaders[order]
    return WordGroups(text, renumber[group], starts[leaders], ends[leaders], first[order],
                      second[order], hashed[order], is_long[order])


def _hash(first: U64, second: U64) -> U64:
    mixed = (first * _MIX[0]) ^ (second * _MIX[1])
    mixed ^= mixed >> np.uint64(29)
    mixed *= _MIX[2]
    return mixed


def _group_equal(first: U64, second: U64, hashed: U64) -> tuple[IntArray, IntArray]:
    """The group of each (first, second) pair (equal pairs share one) and each group's
    first position: one ``np.sort`` of (hash, position) packed into an int64, then every
    pair checked against its group's first; on a collision, ``np.unique`` on the pairs."""
    n = len(first)
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    shift = max(n - 1, 1).bit_length()
    top = (hashed >> np.uint64(shift + 1)).astype(np.int64)  # 63 - shift bits
    packed = np.sort((top << shift) | np.arange(n, dtype=np.int64))
    position = packed & ((1 << shift) - 1)
    starts = np.empty(n, dtype=bool)
    starts[0] = True
    np.not_equal(packed[1:] >> shift, packed[:-1] >> shift, out=starts[1:])
    group = np.empty(n, dtype=np.int64)
    group[position] = np.cumsum(starts) - 1
    leaders = position[starts]  # sorted by (hash, position): a group's first is its least
    leader = leaders[group]
    if (first[leader] == first).all() and (second[leader] == second).all():
        return group, leaders
    _, first_at, exact = np.unique(np.stack((first, second), axis=1), axis=0,
                                   return_index=True, return_inverse=True)
    return exact.reshape(-1).astype(np.int64), first_at.astype(np.int64)


def _with_long_words(text: bytes, starts: IntArray, ends: IntArray, short: IntArray,
                     short_group: IntArray, short_leaders: IntArray, long_words: IntArray,
                     ) -> tuple[IntArray, IntArray]:
    """Groups of all words: the short words' groups, then the long words' grouped by bytes."""
    group = np.empty(len(starts), dtype=np.int64)
    group[short] = short_group
    n_short = len(short_leaders)
    by_bytes: dict[bytes, int] = {}
    long_group = np.array([by_bytes.setdefault(text[s:e], n_short + len(by_bytes)) for s, e
                           in zip(starts[long_words].tolist(), ends[long_words].tolist(),
                                  strict=True)], dtype=np.int64)
    group[long_words] = long_group
    _, first_of = np.unique(long_group, return_index=True)
    return group, np.concatenate((short_leaders, long_words[first_of]))


class WordTokenCache:
    """The tokens of the short words seen before, by hash; each entry keeps the word's
    two integer keys, so a lookup is checked exactly. Emptied when it would grow past
    ``limit`` entries. Safe to share between threads: entries are only appended (under
    a lock, arrays before index), a lookup reads the arrays after the index."""

    def __init__(self, word_tokens: Callable[[bytes], Tokens], limit: int = 1 << 18) -> None:
        self._word_tokens = word_tokens
        self._limit = limit
        self._lock = threading.Lock()
        self._index: dict[int, int] = {}
        # (first keys, second keys, tokens) of the entries, replaced as one (tokens only grow)
        self._entries: tuple[U64, U64, list[Tokens]] = (
            np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.uint64), [])

    def tokens_of(self, groups: WordGroups) -> list[Tokens]:
        """Each group's tokens."""
        n = len(groups.first)
        if n == 0:
            return []
        hashes: list[int] = groups.hashed.tolist()
        get = itemgetter(*hashes)
        try:
            found = get(self._index)
            entries = np.array([found] if n == 1 else found, dtype=np.int64)
        except KeyError:
            self._add(groups)
            entries = np.fromiter(map(self._index.get, hashes, repeat(-1, n)), dtype=np.int64,
                                  count=n)
        first, second, tokens = self._entries
        entries[groups.is_long | (entries >= len(first))] = -1
        known = entries >= 0
        known[known] = ((first[entries[known]] == groups.first[known])
                        & (second[entries[known]] == groups.second[known]))
        if known.all():
            return list(itemgetter(*entries.tolist())(tokens)) if n > 1 else [tokens[entries[0]]]
        out: list[Tokens] = [tokens[e] if ok else () for e, ok in
                             zip(entries.tolist(), known.tolist(), strict=True)]
        for g in np.flatnonzero(~known).tolist():  # long words and hash collisions
            out[g] = self._word_tokens(groups.word(g))
        return out

    def _add(self, groups: WordGroups) -> None:
        """Add the groups' short words that are not in the cache."""
        with self._lock:
            if len(self._index) > self._limit:
                self._index = {}
                self._entries = (np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.uint64), [])
            index = self._index
            new: dict[int, int] = {}
            for g, h in enumerate(groups.hashed.tolist()):
                if h not in index and h not in new and not groups.is_long[g]:
                    new[h] = g
            if not new:
                return
            picked = np.fromiter(new.values(), dtype=np.int64, count=len(new))
            first, second, tokens = self._entries
            base = len(first)
            del tokens[base:]  # (a lookup never reads past the keys' length)
            tokens.extend(self._word_tokens(groups.word(g)) for g in picked.tolist())
            self._entries = (np.concatenate((first, groups.first[picked])),
                             np.concatenate((second, groups.second[picked])), tokens)
            index.update(zip(new, range(base, base + len(new)), strict=True))
