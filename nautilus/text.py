"""Tokens, token batches and the batch-local IDF factor.

One tokenizer serves the hashing embedder, the IDF factor and the SQL sources,
so "a word" means the same thing everywhere: lower-cased runs of letters and
digits, English stop words dropped, plural/verb ``s`` endings folded
(``incidents`` → ``incident``, ``queries`` → ``query``), then the Snowball
English stemmer (PyStemmer: ``replication`` and ``replicated`` → ``replic``).
The stemmer raised content-only nDCG@10 by 0.01-0.03 on every shared
collection (docs/tuning.md). Sources that stem themselves (FTS5's porter) get
the unstemmed words (:func:`plain_tokens`).
"""

from __future__ import annotations

import math
import os
import re
import unicodedata
from collections import defaultdict
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import chain

import numpy as np
import numpy.typing as npt
import Stemmer

from nautilus.arrays import cached_values

_TOKEN = re.compile(r"[^\W_]+")
#: bytes.translate table: ASCII bytes other than letters and digits become spaces
#: (the separator \x02 between joined texts is kept).
_ASCII_SPLIT = bytes(
    b if (chr(b).isalnum() or b >= 0x80 or b == 0x02) else 0x20 for b in range(256))
_CHUNK = 4096

STOPWORDS = frozenset("""
a about above after again against all also am an and any are as at be because been
before being below between both but by can could did do does doing down during each
few for from further had has have having he her here hers herself him himself his how
i if in into is it its itself just me more most my myself no nor not now of off on
once only or other our ours ourselves out over own same she should so some such than
that the their theirs them themselves then there these they this those through to too
under until up very was we were what when where which while who whom why will with
would you your yours yourself yourselves what's it's i'm don't
""".split())

#: Floor of the IDF factor: a row that covers none of the query's rare tokens
#: keeps this share of its similarity (see :func:`idf_factors`). Tuned on the
#: quality benchmark (docs/benchmarks.md).
IDF_FLOOR = 0.5


_STEMMER = Stemmer.Stemmer("english")


@lru_cache(maxsize=1 << 18)
def normalize(token: str) -> str:
    """A lower-case token's canonical form (plural folded, then stemmed); ``""`` for a
    stop word."""
    if token in STOPWORDS:
        return ""
    return str(_STEMMER.stemWord(fold_plural(token)))


@lru_cache(maxsize=1 << 18)
def fold_plural(token: str) -> str:
    """A lower-case token with its plural or verb ``s`` ending folded."""
    n = len(token)
    if n > 4 and token.endswith("ies") and not token.endswith(("eies", "aies")):
        return token[:-3] + "y"
    if n > 3 and token.endswith("es") and not token.endswith(("aes", "ees", "oes", "ses")):
        return token[:-1]
    if n > 3 and token.endswith("s") and not token.endswith(("us", "ss", "is")):
        return token[:-1]
    return token


def tokenize(text: str) -> list[str]:
    """The normalised tokens of ``text``, in order, stop words dropped.

    Text beyond ASCII is folded first: accents on Latin, Greek and Cyrillic letters
    are dropped (``crème`` matches ``creme``), and runs of CJK characters, written
    without spaces, become overlapping character pairs (``電気ケトル`` → ``電気``,
    ``気ケ``, ``ケト``, ``トル``; a query ``ケトル`` shares two of them), the usual
    way to index CJK without a dictionary (Lucene's CJK bigrams)."""
    lowered = text.lower()
    if lowered.isascii():
        return [t for t in map(normalize, _TOKEN.findall(lowered)) if t]
    tokens: list[str] = []
    for word in _TOKEN.findall(_fold_accents(lowered)):
        if word.isascii():
            token = normalize(word)
            if token:
                tokens.append(token)
        else:
            tokens.extend(_unicode_word_tokens(word))
    return tokens


#: Scripts written without spaces between words: Hiragana, Katakana, CJK ideographs
#: (and extension A, compatibility), Hangul syllables.
_CJK_RUN = re.compile(r"([\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]+)")


def _fold_accents(text: str) -> str:
    """``text`` without the combining accents of Latin, Greek and Cyrillic letters
    (other scripts' marks, such as Japanese voicing marks, are kept)."""
    kept: list[str] = []
    base = ""
    for char in unicodedata.normalize("NFKD", text):
        if unicodedata.combining(char):
            if base < "\u0530":  # a mark on a Latin, Greek or Cyrillic letter: an accent
                continue
        else:
            base = char
        kept.append(char)
    return unicodedata.normalize("NFC", "".join(kept))


def _unicode_word_tokens(word: str) -> list[str]:
    """The tokens of one non-ASCII word: CJK runs as character pairs (a lone character
    as itself), the rest normalised like any word."""
    tokens: list[str] = []
    for part in _CJK_RUN.split(word):
        if not part:
            continue
        if _CJK_RUN.fullmatch(part):
            tokens.extend([part] if len(part) == 1 else
                          [part[i:i + 2] for i in range(len(part) - 1)])
        else:
            token = normalize(part)
            if token:
                tokens.append(token)
    return tokens


def plain_tokens(text: str) -> list[str]:
    """The words of ``text`` with plurals folded but not stemmed, stop words dropped
    (for a search engine that stems by its own rules)."""
    return [fold_plural(t) for t in _TOKEN.findall(text.lower()) if t not in STOPWORDS]


def _word_tokens(word: bytes) -> tuple[str, ...]:
    """The tokens of one raw word of the batch tokenizer (usually one, or none)."""
    if word.isalnum():  # plain ASCII letters and digits
        token = normalize(word.decode())
        return (token,) if token else ()
    return tuple(tokenize(word.decode("utf-8", "replace")))


_WORD_TOKENS: dict[bytes, tuple[str, ...]] = {}

_SEPARATOR = b"\x02"
#: ``_KEEP_FIRST[k]``: the mask of the first ``k`` bytes of a little-endian 8-byte integer.
_KEEP_FIRST = np.array([(1 << 8 * k) - 1 for k in range(9)], dtype=np.uint64)
#: Words up to this many bytes are keyed by numbers; longer ones (rare) by their bytes.
_SHORT_WORD = 16
#: Odd 64-bit constants of the word hash (a multiply-xorshift mix, as in splitmix64).
_MIX = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F),
        np.uint64(0xBF58476D1CE4E5B9))


def _word_ids(data: bytes, raw_ids: dict[bytes, int]) -> npt.NDArray[np.int64]:
    """The id in ``raw_ids`` of each word of ``data`` (its runs of bytes other than
    space), new words added in order of first appearance, without a Python object per
    word (``bytes.split`` and a dict lookup cost ~130 ns a word; this, a third of that).

    A word of up to 16 bytes is exactly two integers: its first and its next 8 bytes,
    the bytes past its end cleared (no word holds a NUL: the byte translation made
    NUL a space). Words are grouped by a hash of the two with one ``np.sort`` of
    (hash, position) packed into an int64, and every word is checked against its
    group's first: a hash collision, which a hostile row could aim for, regroups them
    exactly with ``np.unique``. Longer words, rare in text, are grouped by their bytes.
    Only the first word of each group becomes a bytes object, to look its id up."""
    padded = b" " + data + b" " * _SHORT_WORD
    is_word = np.frombuffer(padded, dtype=np.uint8) != 0x20
    edges = np.flatnonzero(is_word[1:] != is_word[:-1]) + 1
    starts, ends = edges[0::2], edges[1::2]
    lengths = ends - starts
    # Every offset's next 8 bytes as one integer (an unaligned view: nothing is copied).
    eight = np.ndarray((len(padded) - 7,), dtype="<u8", buffer=padded, strides=(1,))
    long_words = np.flatnonzero(lengths > _SHORT_WORD)
    short = np.flatnonzero(lengths <= _SHORT_WORD) if len(long_words) else None
    at, size = (starts, lengths) if short is None else (starts[short], lengths[short])
    first = eight[at] & _KEEP_FIRST[np.minimum(size, 8)]
    second = eight[at + 8] & _KEEP_FIRST[np.clip(size - 8, 0, 8)]
    word_group, leaders = _group_equal(first, second)  # leaders: each group's first word
    if short is not None:
        short_group, leaders = word_group, short[leaders]
        word_group = np.empty(len(starts), dtype=np.int64)
        word_group[short] = short_group
        by_bytes: dict[bytes, int] = {}
        n_short = len(leaders)
        long_group = [by_bytes.setdefault(padded[s:e], n_short + len(by_bytes))
                      for s, e in zip(starts[long_words].tolist(), ends[long_words].tolist(),
                                      strict=True)]
        word_group[long_words] = long_group
        _, first_of = np.unique(np.array(long_group, dtype=np.int64), return_index=True)
        leaders = np.concatenate((leaders, long_words[first_of]))
    order = np.argsort(leaders)  # groups in order of first appearance
    group_id = np.empty(len(leaders), dtype=np.int64)
    group_id[order] = [raw_ids.setdefault(padded[s:e], len(raw_ids)) for s, e in zip(
        starts[leaders[order]].tolist(), ends[leaders[order]].tolist(), strict=True)]
    ids: npt.NDArray[np.int64] = group_id[word_group]
    return ids


def _group_equal(first: npt.NDArray[np.uint64], second: npt.NDArray[np.uint64],
                 ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The group of each (first, second) pair (equal pairs share one) and each group's
    first position."""
    n = len(first)
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    shift = max(n - 1, 1).bit_length()
    mixed = (first * _MIX[0]) ^ (second * _MIX[1])
    mixed ^= mixed >> np.uint64(29)
    mixed *= _MIX[2]
    hashed = (mixed >> np.uint64(shift + 1)).astype(np.int64)  # 63 - shift bits
    packed = np.sort((hashed << shift) | np.arange(n, dtype=np.int64))
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


def keyword_stems(text: str) -> list[str]:
    """Distinct substrings to match a word and its plural with ``LIKE``:
    the common prefix of the word and its normal form (``queries`` → ``quer``)."""
    stems: dict[str, None] = {}
    for raw in _TOKEN.findall(text.lower()):
        normal = fold_plural(raw) if raw not in STOPWORDS else ""
        if normal:
            stems[os.path.commonprefix([raw, normal])] = None  # noqa: RUF071 (by character)
    return list(stems)


@dataclass
class TokenBatch:
    """The tokens of many texts as flat arrays: occurrence ``i`` of the batch is
    term ``terms[i]`` (an index into ``vocab``) in text ``rows[i]``."""

    n_texts: int
    rows: npt.NDArray[np.int64]
    terms: npt.NDArray[np.int64]
    vocab: dict[str, int]
    _pairs: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]] | None = (
        field(default=None, repr=False))

    @classmethod
    def from_texts(cls, texts: list[str]) -> TokenBatch:
        """Tokenise many texts at once; the tokens equal :func:`tokenize` on each text.

        The per-word work runs in C and numpy: texts are joined (a ``\\x02`` word
        between them), every ASCII byte that is not a letter or digit becomes a
        space, and :func:`_word_ids` numbers the words without a Python object per
        word. Only each *distinct* raw word then goes through :func:`tokenize`
        (Unicode punctuation, stop words, plurals). Chunks of rows keep the
        temporary arrays small.
        """
        raw_ids: dict[bytes, int] = {_SEPARATOR: 0}
        row_parts, id_parts = [], []
        for start in range(0, len(texts), _CHUNK):
            chunk = texts[start:start + _CHUNK]
            joined = " \x02 ".join(chunk)
            if joined.count("\x02") != len(chunk) - 1:  # a text holds the separator
                joined = " \x02 ".join(t.replace("\x02", " ") for t in chunk)
            ids = _word_ids(joined.lower().encode("utf-8", "replace").translate(_ASCII_SPLIT),
                            raw_ids)
            is_separator = ids == raw_ids[_SEPARATOR]
            keep = ~is_separator
            row_parts.append((start + np.cumsum(is_separator))[keep])
            id_parts.append(ids[keep])
        rows = np.concatenate(row_parts) if row_parts else np.zeros(0, dtype=np.int64)
        word_ids = np.concatenate(id_parts) if id_parts else np.zeros(0, dtype=np.int64)

        vocab_ids: defaultdict[str, int] = defaultdict()
        vocab_ids.default_factory = vocab_ids.__len__
        word_tokens = cached_values(_WORD_TOKENS, _word_tokens, list(raw_ids))
        counts = np.fromiter(map(len, word_tokens), dtype=np.int64, count=len(word_tokens))
        if counts.max(initial=0) <= 1:  # the usual case: a word is one token or a stop word
            mapping = np.array([vocab_ids[w[0]] if w else -1 for w in word_tokens],
                               dtype=np.int64)
            terms = mapping[word_ids]
            kept = terms >= 0
            return cls(len(texts), rows[kept], terms[kept], dict(vocab_ids))
        parts = [[vocab_ids[t] for t in w] for w in word_tokens]
        vocab = dict(vocab_ids)
        starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
        flat = np.fromiter(chain.from_iterable(parts), dtype=np.int64, count=int(counts.sum()))
        per_word = counts[word_ids]
        first = np.repeat(starts[word_ids], per_word)
        within = np.arange(int(per_word.sum())) - np.repeat(np.cumsum(per_word) - per_word,
                                                            per_word)
        return cls(len(texts), np.repeat(rows, per_word), flat[first + within], vocab)

    @classmethod
    def from_tokens(cls, token_lists: list[list[str]]) -> TokenBatch:
        """A batch of texts that are already tokens (e.g. a tokenised query)."""
        vocab: dict[str, int] = {}
        terms = [vocab.setdefault(t, len(vocab)) for tokens in token_lists for t in tokens]
        lengths = [len(tokens) for tokens in token_lists]
        rows = np.repeat(np.arange(len(token_lists), dtype=np.int64), lengths)
        return cls(len(token_lists), rows, np.array(terms, dtype=np.int64), vocab)

    def pairs(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Distinct (text, term) pairs and each one's count in its text."""
        if self._pairs is None:
            width = max(len(self.vocab), 1)
            keys, counts = np.unique(self.rows * width + self.terms, return_counts=True)
            self._pairs = (keys // width, keys % width, counts.astype(np.int64))
        return self._pairs

    def bigrams(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64],
                               npt.NDArray[np.int64]]:
        """Adjacent term pairs within each text: (text, first term, second term)."""
        same_text = self.rows[1:] == self.rows[:-1]
        return self.rows[1:][same_text], self.terms[:-1][same_text], self.terms[1:][same_text]


def query_token_weights(batch: TokenBatch, query_tokens: list[str]) -> dict[str, float]:
    """The batch-local IDF weight of each distinct query token.

    With ``N`` texts in the batch and ``df(t)`` of them containing ``t``:
    ``w(t) = ln(1 + N / df(t)) / ln(1 + N)`` — 1 for a token in one text (or in
    none), ``ln 2 / ln(1 + N)`` for a token in every text (a hub).
    """
    n = batch.n_texts
    distinct = list(dict.fromkeys(query_tokens))
    if n == 0 or not distinct:
        return dict.fromkeys(distinct, 1.0)
    _, pair_terms, _ = batch.pairs()
    df = np.bincount(pair_terms, minlength=len(batch.vocab))
    weights = {}
    for token in distinct:
        term = batch.vocab.get(token)
        count = int(df[term]) if term is not None else 0
        weights[token] = math.log1p(n / count) / math.log1p(n) if count else 1.0
    return weights


def idf_factors(batch: TokenBatch, weights: dict[str, float],
                floor: float = IDF_FLOOR) -> npt.NDArray[np.float64]:
    """Each text's IDF factor in ``[floor, 1]``, for rows scored by their own vectors.

    A text's IDF-weighted coverage of the query is
    ``c = Σ_{t ∈ q ∩ text} w(t) / Σ_{t ∈ q} w(t)`` (``w`` from
    :func:`query_token_weights`) and its factor ``floor + (1 - floor) · c``: a
    row that matches the query only through hub tokens keeps little more than
    ``floor`` of its similarity. A query without tokens gives every text 1.
    """
    n = batch.n_texts
    total = sum(weights.values())
    if n == 0 or total <= 0:
        return np.ones(n, dtype=np.float64)
    pair_rows, pair_terms, _ = batch.pairs()
    weight_by_term = np.zeros(len(batch.vocab), dtype=np.float64)
    for token, weight in weights.items():
        term = batch.vocab.get(token)
        if term is not None:
            weight_by_term[term] = weight
    covered = np.bincount(pair_rows, weights=weight_by_term[pair_terms], minlength=n)
    factors: npt.NDArray[np.float64] = floor + (1.0 - floor) * (covered / total)
    return factors
