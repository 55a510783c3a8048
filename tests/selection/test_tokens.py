"""Token counts: exact o200k_base with the ``tokens`` extra (no network), the documented
over-estimate without it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from nautilus_ranking.selection import tokens
from nautilus_ranking.selection.tokens import count_tokens, estimate_tokens, tokenizer_name

ROOT = Path(__file__).resolve().parents[2]
DATASETS = ROOT.parent / "shared" / "datasets"

#: Counted with tiktoken's own o200k_base (its published vocabulary file, sha256
#: 446a9538…1a2d) — an implementation independent of the one nautilus uses.
TIKTOKEN_O200K = {
    "hello world": 2,
    '{"id":"d1","text":"The quick brown fox jumps over the lazy dog."}': 19,
    "naïve café — 日本語": 7,
    "1234567": 3,
    "🧠 ok\n\nnext line": 7,
}


def test_the_exact_counts_are_o200k_base_as_tiktoken_counts() -> None:
    assert tokenizer_name() == "o200k_base"
    assert count_tokens(list(TIKTOKEN_O200K), exact=True) == list(TIKTOKEN_O200K.values())


def test_counting_needs_no_network() -> None:
    """A fresh process in which any connection or name look-up raises (an audit hook)
    loads the vocabulary and counts."""
    code = (
        "import sys\n"
        "def refuse(event, args):\n"
        "    if event.startswith(('socket.connect', 'socket.getaddrinfo',\n"
        "                         'socket.gethostbyname', 'urllib.Request')):\n"
        "        raise OSError(f'network used: {event}')\n"
        "sys.addaudithook(refuse)\n"
        "from nautilus_ranking.selection.tokens import count_tokens\n"
        "print(count_tokens(['hello world'], exact=True))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[2]"


def test_without_the_extra_a_count_is_the_estimate_and_exact_is_refused() -> None:
    code = (
        "import sys; sys.modules['toktok'] = None\n"
        "from nautilus_ranking.selection.tokens import count_tokens, tokenizer_name\n"
        "print(tokenizer_name(), count_tokens(['hello world']))\n"
        "try:\n    count_tokens(['x'], exact=True)\n"
        "except ImportError as e:\n    print(e)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()
    assert first == "estimate [4]"  # two words of 5 letters: (5 + 3 + 5 + 3) // 4
    assert "pip install 'nautilus-ranking[tokens]'" in second


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("hello world", (5 + 3 + 5 + 3) // 4),  # two words of 5 letters
        ("a  b\nc", (3 + 3 * 3) // 4 + 1 + 1),  # 3 one-letter words, '  ', '\n'
        ('{"n":12345}', (1 + 3) // 4 + (5 + 2) // 3 + 5),  # n; 12345; { " " : }
        ("café", (3 + 3) // 4 + 2),  # 'caf', and é's two UTF-8 bytes
        ("日本", 3 + 3),  # three UTF-8 bytes each
        ("x" * 9 + " " + "7" * 7, (9 + 3) // 4 + (7 + 2) // 3 + 1),  # + the space before 7s
    ],
)
def test_the_estimate_worked_examples(text: str, expected: int) -> None:
    assert estimate_tokens(text) == expected
    assert count_tokens([text], exact=False) == [expected]


def test_a_batch_is_estimated_as_each_text_alone() -> None:
    texts = ["", "ab", " a", "a ", "12 34", "\n\n", "x\x00y", "Ωmega 42", "", "end  "]
    assert count_tokens(texts, exact=False) == [estimate_tokens(t) for t in texts]


def _rows() -> list[str]:
    texts = []
    for seed in sorted((ROOT / "nautilus_ranking" / "demo").glob("*.jsonl")):
        for line in seed.read_text(encoding="utf-8").splitlines():
            if line.strip():
                texts.append(json.dumps(json.loads(line), sort_keys=True, separators=(",", ":")))
    for name in ("adi", "cacm"):
        corpus = DATASETS / name / "corpus.jsonl"
        if corpus.is_file():
            for line in corpus.read_text(encoding="utf-8").splitlines():
                doc = json.loads(line)
                texts.append(
                    json.dumps(
                        {
                            "id": doc["_id"],
                            "title": doc.get("title", ""),
                            "text": doc.get("text", ""),
                        },
                        sort_keys=True,
                        separators=(",", ":"),
                    )
                )
    return texts


def test_the_estimate_never_counts_less_than_o200k_base_on_rows() -> None:
    """On the demo's rows and two shared corpora's rows, serialised as a response
    carries them, and on JSON numbers and non-Latin text."""
    texts = (
        _rows()
        + [
            json.dumps(
                {"id": i, "v": [i / 7, i * 1e-9, -i, (i * 7919 % 1000) / 997] * 3, "n": 10**12 + i}
            )
            for i in range(200)
        ]
        + ["Привет, мир! Как дела?", "你好，世界。今天天气很好。", "emoji 🧠🚀✨ end"]
    )
    assert len(texts) > 200
    exact = count_tokens(texts, exact=True)
    under = [
        (t[:60], estimate_tokens(t), n)
        for t, n in zip(texts, exact, strict=True)
        if estimate_tokens(t) < n
    ]
    assert under == []


def test_the_estimate_is_not_a_bound_on_random_letters() -> None:
    """What the docs say it misses: letters BPE finds no merges for (here 'qxzj…')."""
    text = "qxzjvkwpfgbh " * 20
    assert estimate_tokens(text) < count_tokens([text], exact=True)[0]


def test_a_lone_surrogate_is_counted_not_raised() -> None:
    """Counted as its bytes decoded with replacement characters, the other texts as ever."""
    replaced = "a\ud800b".encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    assert "\ufffd" in replaced
    assert count_tokens(["a\ud800b", "hello world"], exact=True) == [
        count_tokens([replaced], exact=True)[0],
        2,
    ]
    assert count_tokens(["a\ud800b"], exact=False) == [estimate_tokens("a\ud800b")]


def test_the_exact_counter_is_loaded_once() -> None:
    assert tokens._exact() is tokens._exact()
