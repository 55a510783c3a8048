"""Tokens, token batches and the batch-local IDF factor.

One tokenizer serves the hashing embedder, the IDF factor and the SQL sources,
so "a word" means the same thing everywhere: lower-cased runs of letters and
digits, English stop words dropped, plural/verb ``s`` endings folded
(``incidents`` → ``incident``, ``queries`` → ``query``), then the Snowball
English stemmer (PyStemmer: ``replication`` and ``replicated`` → ``replic``).
The stemmer raised content-only nDCG@10 by 0.01-0.03 on every shared
collection (docs/tuning-fusion.md). Sources that stem themselves (FTS5's porter) get
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
from itertools import chain, count

import numpy as np
import numpy.typing as npt
import Stemmer

from nautilus_ranking.text.arrays import concatenated
from nautilus_ranking.text.words import GroupTokens, WordGroups, WordTokenCache, group_words, merge

_TOKEN = re.compile(r"[^\W_]+")
#: bytes.translate table: ASCII bytes other than letters and digits become spaces
#: (the separator \x02 between joined texts is kept).
_ASCII_SPLIT = bytes(
    b if (chr(b).isalnum() or b >= 0x80 or b == 0x02) else 0x20 for b in range(256)
)
_CHUNK = 2048

STOPWORDS = frozenset(
    """
a about above after again against all also am an and any are as at be because been
before being below between both but by can could did do does doing down during each
few for from further had has have having he her here hers herself him himself his how
i if in into is it its itself just me more most my myself no nor not now of off on
once only or other our ours ourselves out over own same she should so some such than
that the their theirs them themselves then there these they this those through to too
under until up very was we were what when where which while who whom why will with
would you your yours yourself yourselves what's it's i'm don't
""".split()
)

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
            tokens.extend(
                [part] if len(part) == 1 else [part[i : i + 2] for i in range(len(part) - 1)]
            )
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


#: The word between two joined texts (no text holds it: see TokenBatch.from_texts).
_SEPARATOR_KEY = np.uint64(0x02)
_WORD_CACHE = WordTokenCache(_word_tokens)


def _terms(
    groups: npt.NDArray[np.int64],
    group_tokens: GroupTokens,
    vocab_ids: defaultdict[str, int],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """How many tokens each word occurrence (its group in ``groups``) has, and their
    terms in order. ``vocab_ids`` numbers new tokens as they come (groups are in order
    of first appearance); ``""`` (a group without a token) is -1 in it."""
    if group_tokens.every is None:  # the usual case: a word is one token or a stop word
        firsts = group_tokens.firsts
        mapping = np.fromiter(map(vocab_ids.__getitem__, firsts), dtype=np.int64, count=len(firsts))
        terms = mapping[groups]
        return (terms >= 0).astype(np.int64), terms[terms >= 0]
    every = group_tokens.every
    counts = np.fromiter(map(len, every), dtype=np.int64, count=len(every))
    parts = [[vocab_ids[t] for t in w] for w in every]
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    flat = np.fromiter(chain.from_iterable(parts), dtype=np.int64, count=int(counts.sum()))
    per_word = counts[groups]
    first = np.repeat(starts[groups], per_word)
    within = np.arange(int(per_word.sum())) - np.repeat(np.cumsum(per_word) - per_word, per_word)
    return per_word, flat[first + within]


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
        field(default=None, repr=False)
    )

    @classmethod
    def from_texts(cls, texts: list[str]) -> TokenBatch:
        """Tokenise many texts at once; the tokens equal :func:`tokenize` on each text.

        The per-word work runs in C and numpy: texts are joined (a ``\\x02`` word
        between them), every ASCII byte that is not a letter or digit becomes a
        space, and :mod:`nautilus_ranking.text.words` groups equal words without a Python object
        per word, chunk by chunk (the arrays stay in the CPU cache), then across the
        chunks. Only each *distinct* word is looked up in the cache of known words'
        tokens, and only a new one goes through :func:`tokenize` (Unicode
        punctuation, stop words, plurals).
        """
        parts: list[WordGroups] = []
        row_parts, group_parts = [], []
        n_groups = 0
        for start in range(0, len(texts), _CHUNK):
            chunk = texts[start : start + _CHUNK]
            joined = " \x02 ".join(chunk)
            if joined.count("\x02") != len(chunk) - 1:  # a text holds the separator
                joined = " \x02 ".join(t.replace("\x02", " ") for t in chunk)
            words = group_words(joined.lower().encode("utf-8", "replace").translate(_ASCII_SPLIT))
            separator = ((words.first == _SEPARATOR_KEY) & (words.second == 0) & ~words.is_long)[
                words.group
            ]
            keep = ~separator
            row_parts.append(start + np.cumsum(separator)[keep])
            group_parts.append(words.group[keep] + n_groups)
            n_groups += len(words.first)
            parts.append(words)
        groups = merge(parts) if parts else group_words(b"")
        # Terms numbered as they come (a C-level counter); "" stands for no token.
        vocab_ids: defaultdict[str, int] = defaultdict(count().__next__, {"": -1})
        counts, terms = _terms(
            groups.group[concatenated(group_parts)], _WORD_CACHE.tokens_of(groups), vocab_ids
        )
        del vocab_ids[""]
        return cls(len(texts), np.repeat(concatenated(row_parts), counts), terms, dict(vocab_ids))

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
            shift = max(len(self.vocab) - 1, 1).bit_length()  # (text, term) in one int64
            keys = np.sort((self.rows << shift) | self.terms)
            is_start = np.ones(len(keys), dtype=bool)
            np.not_equal(keys[1:], keys[:-1], out=is_start[1:])
            starts = np.flatnonzero(is_start)
            counts = np.diff(np.append(starts, len(keys)))
            keys = keys[starts]
            self._pairs = (keys >> shift, keys & ((1 << shift) - 1), counts.astype(np.int64))
        return self._pairs


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


def idf_factors(
    batch: TokenBatch, weights: dict[str, float], floor: float = IDF_FLOOR
) -> npt.NDArray[np.float64]:
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
