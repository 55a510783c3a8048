"""Build the generic word prior the lexical scorer ships (nautilus_ranking/text/word_prior.tsv.gz).

    pip install wordfreq && python -m tools.word_prior

Each line is a token as :func:`nautilus_ranking.text.tokens.tokenize` makes it (plural
folded, stemmed) and its Zipf frequency in general English (log10 of its occurrences
per billion words), the frequencies of every word that normalises to it summed. Only
tokens at Zipf 3 or more (one in a million words) are kept: a rarer word's prior share
of documents is below 1e-4, which the scorer treats as the floor anyway. The
frequencies are wordfreq's English data (Robyn Speer, CC BY-SA 4.0), so the table is
CC BY-SA 4.0 too (nautilus_ranking/text/WORD_PRIOR_LICENSE.md).
"""

from __future__ import annotations

import gzip
import math
from pathlib import Path

from nautilus_ranking.text.tokens import normalize

OUT = Path(__file__).resolve().parents[1] / "nautilus_ranking" / "text" / "word_prior.tsv.gz"
MIN_ZIPF = 3.0


def main() -> int:
    import wordfreq

    by_token: dict[str, float] = {}
    for word, frequency in wordfreq.get_frequency_dict("en").items():
        if not word.isascii() or not word.isalnum():
            continue
        token = normalize(word)
        if token:
            by_token[token] = by_token.get(token, 0.0) + frequency
    lines = [
        f"{token}\t{zipf:.2f}\n"
        for token, frequency in sorted(by_token.items())
        if (zipf := math.log10(frequency) + 9.0) >= MIN_ZIPF
    ]
    # mtime 0: the same table gives the same bytes
    with OUT.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as out:
        out.write("".join(lines).encode("utf-8"))
    print(f"{len(lines)} tokens -> {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
