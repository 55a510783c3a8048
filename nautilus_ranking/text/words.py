"""The words of a batch's byte text, grouped in numpy, and the tokens of words seen before.

The batch tokenizer (:meth:`nautilus_ranking.text.tokens.TokenBatch.from_texts`) joins many texts
into one byte string in which every byte outside a word is a space. Cutting it with
``bytes.split`` and numbering the words with a dict costs ~130 ns a word, a Python
object each; here the words are found and equal ones grouped with a handful of numpy
calls, and only each *distinct* word is looked up, by an integer, in a cache of the
tokens of words seen before (a server sees the same words request after request).

A word of up to 16 bytes is exactly two integers: its first and its next 8 bytes, the
bytes past its end cleared (no word holds a NUL: the byte translation made NUL a
space). Grouping and the cache go by a 64-bit hash of the two and then check the two
integers themselves, so a hash collision costs time, never a wrong token; and the hash
is keyed afresh in each process, so a row cannot aim for one. Longer words, rare in
text, go by their bytes.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass
from itertools import repeat
from operator import itemgetter
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]
Tokens = tuple[str, ...]

#: Words up to this many bytes are keyed by two integers; longer ones by their bytes.
SHORT_WORD = 16
#: Masks of a word's first and next 8 bytes (read little-endian), by its length.
_KEEP_FIRST = np.array([(1 << 8 * min(k, 8)) - 1 for k in range(SHORT_WORD + 1)], dtype=np.uint64)
_KEEP_SECOND = np.array(
    [(1 << 8 * max(k - 8, 0)) - 1 for k in range(SHORT_WORD + 1)], dtype=np.uint64
)
#: Odd 64-bit multipliers of the word hash (a multiply-xorshift mix, as in splitmix64).
#: The first two are the key, drawn afresh in each process (as Python keys its str hash):
#: a row cannot be written to collide with common words, which would send them down
#: the exact but slower path batch after batch. Only timing depends on them: groups are
#: numbered in order of first appearance and every lookup is checked against the words.
_MIX = (
    np.uint64(secrets.randbits(64) | 1),
    np.uint64(secrets.randbits(64) | 1),
    np.uint64(0xBF58476D1CE4E5B9),
)


@dataclass(frozen=True)
class WordGroups:
    """Equal words of a byte text grouped: ``group[i]`` is item ``i``'s group (a word's,
    or, after :func:`merge`, a chunk's group's), groups numbered in order of first
    appearance. Per group: its first word's span in ``text`` and its two integer keys
    and their hash (of its first 16 bytes, for a long word)."""

    text: bytes
    group: IntArray
    start: IntArray
    end: IntArray
    first: U64
    second: U64
    hashed: U64
    is_long: npt.NDArray[np.bool_]

    def word(self, g: int) -> bytes:
        return self.text[int(self.start[g]) : int(self.end[g])]


def group_words(data: bytes) -> WordGroups:
    """The words of ``data`` (its runs of bytes other than space), equal ones grouped."""
    text = b" " + data + b" " * SHORT_WORD
    is_word = np.frombuffer(text, dtype=np.uint8) != 0x20
    edges = np.flatnonzero(is_word[1:] != is_word[:-1]) + 1
    starts, ends = edges[0::2], edges[1::2]
    lengths = ends - starts
    # Every offset's next 8 bytes as one integer (an unaligned view: nothing is copied).
    eight = np.ndarray((len(text) - 7,), dtype="<u8", buffer=text, strides=(1,))
    capped = np.minimum(lengths, SHORT_WORD)
    first = eight[starts] & _KEEP_FIRST[capped]
    second = eight[starts + 8] & _KEEP_SECOND[capped]
    return _grouped(text, starts, ends, first, second, _hash(first, second), lengths > SHORT_WORD)


def merge(parts: list[WordGroups]) -> WordGroups:
    """The groups of several texts' words (chunks of one batch) grouped again: the
    result's ``group`` numbers the parts' groups, one after another."""
    if len(parts) == 1:
        only = parts[0]
        return WordGroups(
            only.text,
            np.arange(len(only.first), dtype=np.int64),
            only.start,
            only.end,
            only.first,
            only.second,
            only.hashed,
            only.is_long,
        )
    offsets = np.cumsum([0] + [len(part.text) for part in parts[:-1]])
    return _grouped(
        b"".join(part.text for part in parts),
        np.concatenate([p.start + o for p, o in zip(parts, offsets, strict=True)]),
        np.concatenate([p.end + o for p, o in zip(parts, offsets, strict=True)]),
        *(
            np.concatenate([getattr(p, name) for p in parts])
            for name in ("first", "second", "hashed", "is_long")
        ),
    )


def _grouped(
    text: bytes,
    starts: IntArray,
    ends: IntArray,
    first: U64,
    second: U64,
    hashed: U64,
    is_long: npt.NDArray[np.bool_],
) -> WordGroups:
    """Items (spans of ``text``) grouped: short ones by their keys, long ones by bytes."""
    if not is_long.any():
        group, leaders = _group_equal(first, second, hashed)
    else:
        short, long_items = np.flatnonzero(~is_long), np.flatnonzero(is_long)
        short_group, short_leaders = _group_equal(first[short], second[short], hashed[short])
        group = np.empty(len(starts), dtype=np.int64)
        group[short] = short_group
        by_bytes: dict[bytes, int] = {}
        n_short = len(short_leaders)
        long_group = np.array(
            [
                by_bytes.setdefault(text[s:e], n_short + len(by_bytes))
                for s, e in zip(starts[long_items].tolist(), ends[long_items].tolist(), strict=True)
            ],
            dtype=np.int64,
        )
        group[long_items] = long_group
        _, first_of = np.unique(long_group, return_index=True)
        leaders = np.concatenate((short[short_leaders], long_items[first_of]))
    order = np.argsort(leaders)  # groups renumbered in order of first appearance
    renumber = np.empty(len(order), dtype=np.int64)
    renumber[order] = np.arange(len(order), dtype=np.int64)
    leaders = leaders[order]
    return WordGroups(
        text,
        renumber[group],
        starts[leaders],
        ends[leaders],
        first[leaders],
        second[leaders],
        hashed[leaders],
        is_long[leaders],
    )


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
    _, first_at, exact = np.unique(
        np.stack((first, second), axis=1), axis=0, return_index=True, return_inverse=True
    )
    return exact.reshape(-1).astype(np.int64), first_at.astype(np.int64)


class GroupTokens(NamedTuple):
    """The tokens of a batch's word groups: each group's first (``""`` for none) and,
    only when some group has several (CJK pairs), every group's tokens."""

    firsts: list[str]
    every: list[Tokens] | None


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
        self._entries = _Entries.empty()

    def tokens_of(self, groups: WordGroups) -> GroupTokens:
        """The groups' tokens."""
        n = len(groups.first)
        if n == 0:
            return GroupTokens([], None)
        short = np.flatnonzero(~groups.is_long)  # long words are never cached
        hashes: list[int] = groups.hashed[short].tolist()
        entries = np.full(n, -1, dtype=np.int64)
        if hashes:
            try:
                found = itemgetter(*hashes)(self._index)
                entries[short] = [found] if len(hashes) == 1 else found
            except KeyError:
                self._add(groups, short, hashes)
                entries[short] = np.fromiter(
                    map(self._index.get, hashes, repeat(-1)), dtype=np.int64, count=len(hashes)
                )
        cached = self._entries  # one snapshot for the check and the pick
        known = cached.check(entries, groups)
        if known.all():
            return cached.pick(entries)
        tokens: list[Tokens] = [()] * n
        if known.any():
            known_tokens = cached.pick(entries[known], every=True).every or []
            for g, t in zip(np.flatnonzero(known).tolist(), known_tokens, strict=True):
                tokens[g] = t
        for g in np.flatnonzero(~known).tolist():  # long words and hash collisions
            tokens[g] = self._word_tokens(groups.word(g))
        firsts = [t[0] if t else "" for t in tokens]
        return GroupTokens(firsts, tokens if max(map(len, tokens)) > 1 else None)

    def _add(self, groups: WordGroups, short: IntArray, hashes: list[int]) -> None:
        """Add the short words (groups ``short``, with these hashes) not yet cached."""
        with self._lock:
            if len(self._index) > self._limit:
                self._index = {}
                self._entries = _Entries.empty()
            index = self._index
            new: dict[int, int] = {}
            for g, h in zip(short.tolist(), hashes, strict=True):
                if h not in index and h not in new:
                    new[h] = g
            if not new:
                return
            picked = np.fromiter(new.values(), dtype=np.int64, count=len(new))
            base = len(self._entries.first)
            self._entries = self._entries.extended(
                groups.first[picked],
                groups.second[picked],
                [self._word_tokens(groups.word(g)) for g in picked.tolist()],
            )
            index.update(zip(new, range(base, base + len(new)), strict=True))


@dataclass(frozen=True)
class _Entries:
    """The cache's entries, replaced as one: the words' two integer keys, how many tokens
    each has, its first token (``""`` for none) and all its tokens. The arrays are new
    with each add; the two lists are shared by the snapshots and only grow past the
    keys (an emptied cache gets new ones), so an older snapshot stays consistent."""

    first: U64
    second: U64
    n_tokens: IntArray
    firsts: list[str]
    tokens: list[Tokens]

    @staticmethod
    def empty() -> _Entries:
        keys = np.zeros(0, dtype=np.uint64)
        return _Entries(keys, keys, np.zeros(0, dtype=np.int64), [], [])

    def extended(self, first: U64, second: U64, tokens: list[Tokens]) -> _Entries:
        base = len(self.first)
        del self.tokens[base:], self.firsts[base:]  # what an interrupted add left behind
        self.tokens.extend(tokens)
        self.firsts.extend(t[0] if t else "" for t in tokens)
        n_tokens = np.fromiter(map(len, tokens), dtype=np.int64, count=len(tokens))
        return _Entries(
            np.concatenate((self.first, first)),
            np.concatenate((self.second, second)),
            np.concatenate((self.n_tokens, n_tokens)),
            self.firsts,
            self.tokens,
        )

    def check(self, entries: IntArray, groups: WordGroups) -> npt.NDArray[np.bool_]:
        """Which looked-up entries (``-1``: none) hold the groups' own words; entries
        the index gave after another thread emptied the cache fail the check too."""
        entries[entries >= len(self.first)] = -1
        known = entries >= 0
        known[known] = (self.first[entries[known]] == groups.first[known]) & (
            self.second[entries[known]] == groups.second[known]
        )
        return known

    def pick(self, entries: IntArray, every: bool = False) -> GroupTokens:
        """The entries' first tokens, and all their tokens if one has several (or
        ``every``)."""
        at = entries.tolist()
        get = itemgetter(*at)
        firsts = list(get(self.firsts)) if len(at) > 1 else [self.firsts[at[0]]]
        if not every and int(self.n_tokens[entries].max()) <= 1:
            return GroupTokens(firsts, None)
        return GroupTokens(firsts, list(get(self.tokens)) if len(at) > 1 else [self.tokens[at[0]]])
