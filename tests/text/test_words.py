"""The batch tokenizer's word grouping and its cache of known words: exact, whatever the
hashes do, and safe to share between threads."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from unittest import mock

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

import nautilus_ranking.text.words as words_module
from nautilus_ranking.text.words import WordTokenCache, group_words

#: Words around the two integer keys' edges (8 and 16 bytes) and beyond, with bytes
#: that are not ASCII (a UTF-8 text's) inside.
WORD = st.text(alphabet="ab\x80\xe9", min_size=1, max_size=20).map(lambda w: w.encode("latin-1"))


def split_groups(data: bytes) -> list[int]:
    """What group_words must give: equal words share a number, numbered as they come."""
    numbers: dict[bytes, int] = {}
    return [numbers.setdefault(w, len(numbers)) for w in data.split(b" ") if w]


@settings(max_examples=300, deadline=None)
@given(words=st.lists(WORD, max_size=40), collide=st.booleans())
@example(
    words=[b"abcdefgh", b"abcdefgha", b"abcdefgh", b"a" * 16, b"a" * 17, b"a" * 17], collide=False
)
@example(
    words=[b"abcdefgh", b"abcdefgha", b"abcdefgh", b"a" * 16, b"a" * 17, b"a" * 17], collide=True
)
def test_group_words_groups_exactly_equal_words(words: list[bytes], collide: bool) -> None:
    """Groups are equal words, in order of first appearance, even when every hash
    collides (the constants zeroed): then the pairs are regrouped exactly."""
    data = b"  ".join(words) + b" "
    mix = (np.uint64(0),) * 3 if collide else words_module._MIX
    with mock.patch("nautilus_ranking.text.words._MIX", mix):
        groups = group_words(data)
    assert groups.group.tolist() == split_groups(data)
    distinct = list(dict.fromkeys(w for w in data.split(b" ") if w))
    assert [groups.word(g) for g in range(len(distinct))] == distinct
    assert groups.is_long.tolist() == [len(w) > words_module.SHORT_WORD for w in distinct]


def word_tokens(word: bytes) -> tuple[str, ...]:
    """A stand-in tokenizer: ``b`` has no token, ``pair`` two, any other word itself."""
    if word == b"pair":
        return ("PA", "IR")
    return (word.decode("latin-1").upper(),) if word != b"b" else ()


def tokens(cache: WordTokenCache, groups: words_module.WordGroups) -> list[tuple[str, ...]]:
    """Each group's tokens, from what the cache answers (first tokens, all if several)."""
    firsts, every = cache.tokens_of(groups)
    if every is not None:
        assert firsts == [t[0] if t else "" for t in every]
        return every
    return [(f,) if f else () for f in firsts]


def test_cache_gives_each_groups_tokens_and_empties_itself_at_its_limit() -> None:
    cache = WordTokenCache(word_tokens, limit=3)
    data = b"alpha beta b alpha gamma delta epsilon " + b"x" * 20
    groups = group_words(data)
    expected = [word_tokens(groups.word(g)) for g in range(len(groups.first))]
    assert tokens(cache, groups) == expected  # filled: 6 short words, past the limit
    assert tokens(cache, groups) == expected  # from the cache
    fresh = group_words(b"zeta eta alpha")
    assert tokens(cache, fresh) == [("ZETA",), ("ETA",), ("ALPHA",)]  # emptied, refilled
    assert len(cache._index) == 3
    assert tokens(cache, group_words(b"")) == []
    assert tokens(cache, group_words(b"b")) == [()]
    # a word with several tokens: every group's tokens come back, cached or not
    assert tokens(cache, group_words(b"pair b " + b"z" * 20)) == [("PA", "IR"), (), ("Z" * 20,)]
    assert tokens(cache, group_words(b"pair b " + b"z" * 20)) == [("PA", "IR"), (), ("Z" * 20,)]


def test_cache_lookup_is_checked_against_the_words_keys() -> None:
    """Two words with the same hash: the second is not given the first one's tokens."""
    cache = WordTokenCache(word_tokens)
    tokens(cache, group_words(b"first"))
    same_hash = group_words(b"second")
    object.__setattr__(same_hash, "hashed", group_words(b"first").hashed.copy())
    assert tokens(cache, same_hash) == [("SECOND",)]


def test_cache_shared_by_threads_gives_every_thread_its_own_words() -> None:
    """Threads filling and emptying one small cache at once: every answer is exact."""
    cache = WordTokenCache(word_tokens, limit=40)
    texts = [b" ".join(b"w%d_%d" % (t, i) for i in range(60)) for t in range(4)]
    wrong: list[str] = []

    def work(t: int) -> None:
        for _ in range(30):
            groups = group_words(texts[t])
            got = tokens(cache, groups)
            want = [word_tokens(groups.word(g)) for g in range(len(groups.first))]
            if got != want:
                wrong.append(f"thread {t}")

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []


@settings(max_examples=200, deadline=None)
@given(chunks=st.lists(st.lists(WORD, max_size=12), min_size=1, max_size=5))
def test_merge_groups_equal_words_across_chunks(chunks: list[list[bytes]]) -> None:
    """Chunks grouped one by one, then merged: the same groups as the whole text at once."""
    parts = [group_words(b" ".join(words)) for words in chunks]
    merged = words_module.merge(parts)
    whole = [w for words in chunks for w in words]
    numbers: dict[bytes, int] = {}
    expected = [numbers.setdefault(w, len(numbers)) for w in whole]
    got = [
        int(merged.group[offset + g])
        for part, offset in zip(
            parts, np.cumsum([0] + [len(p.first) for p in parts[:-1]]), strict=True
        )
        for g in part.group.tolist()
    ]
    assert got == expected
    assert [merged.word(g) for g in range(len(merged.first))] == list(numbers)


def test_a_long_word_does_not_send_every_call_down_the_adding_path() -> None:
    """Long words are never cached: a batch holding one must still be answered from
    the cache once its short words are known."""
    cache = WordTokenCache(word_tokens)
    groups = group_words(b"alpha " + b"y" * 40 + b" beta")
    first = tokens(cache, groups)
    with mock.patch.object(WordTokenCache, "_add", side_effect=AssertionError("re-added")):
        assert tokens(cache, groups) == first == [("ALPHA",), ("Y" * 40,), ("BETA",)]


def test_the_word_hash_is_keyed_per_process_and_the_tokens_do_not_depend_on_it() -> None:
    """Each process draws its own key (a row cannot be written to collide with common
    words), and the same texts give the same batch under any key."""
    script = (
        "import json, nautilus_ranking.text.words as w\n"
        "from nautilus_ranking.text.tokens import TokenBatch\n"
        "b = TokenBatch.from_texts(['Disk full on db-1', 'disks FULL again',"
        " 'ok \\u00e9t\\u00e9'])\n"
        "print(json.dumps([[int(k) for k in w._MIX[:2]], b.vocab, b.rows.tolist(),"
        " b.terms.tolist()]))\n"
    )
    runs = [
        json.loads(
            subprocess.run(
                [sys.executable, "-c", script], capture_output=True, text=True, check=True
            ).stdout
        )
        for _ in range(2)
    ]
    (key_a, *batch_a), (key_b, *batch_b) = runs
    assert key_a != key_b
    assert all(k % 2 == 1 for k in key_a + key_b)  # odd: multiplying by it is a bijection
    assert batch_a == batch_b
    assert batch_a[0] == {"disk": 0, "full": 1, "db": 2, "1": 3, "ok": 4, "ete": 5}
