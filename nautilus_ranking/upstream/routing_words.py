"""The words that only routed a broker request, left out of the query it is ranked by.

The Nautilus broker routes a request by the words of its intent: its intent analyser
(``analysis.mode: pattern``, the default) looks for each source's ``data_types``, their
normalised forms (``scan_result`` → ``scan result``) and ``analysis.keyword_map``'s
curated keywords, and the README's own examples lead with one (``"ops: orders-db disk
full"``). Ranked as query text, such a word steers the ranking toward every row that
happens to contain it (the data type ``support`` toward "Supported browsers"), though
the agent wrote it to be routed, not to be matched.

So the ranking's query leaves out, when the intent has other words:

- a leading ``word:`` whose word is a routing word (a data type, a normalised form or
  a curated keyword, whatever ``NAUTILUS_RANKING_CURATED_KEYWORDS`` says);
- every whole word (or phrase) that is a data type or a normalised form;
- every whole curated keyword, unless ``NAUTILUS_RANKING_CURATED_KEYWORDS=content``
  (curated synonyms such as ``orders: ["purchase order"]`` are often what the agent is
  asking about: that setting ranks by them).

The vocabulary is the broker's own: ``nautilus.analysis.pattern_matching.
build_keyword_map`` over the broker's sources and ``analysis.keyword_map``, built when
the ranking is attached and again on every reload, whatever the analysis mode.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

_SPACES = re.compile(r"\s+")
_WORD = re.compile(r"\w")


class RoutingWords:
    """The routing vocabulary as the ranking's query sees it: ``words`` (lower case)
    are left out anywhere in the query, ``prefixes`` as a leading ``word:``."""

    def __init__(self, words: Iterable[str], prefixes: Iterable[str]) -> None:
        self.words = frozenset(words)
        self.prefixes = frozenset(prefixes)
        self._anywhere = _alternation(self.words, r"(?<!\w)", r"(?!\w)")
        self._prefix = _alternation(self.prefixes, r"^\s*", r"\s*:")

    def query(self, intent: str) -> str:
        """``intent`` without its routing words; ``intent`` itself when nothing else is
        left (a request that names only a data type is ranked by it)."""
        text = intent
        if self._prefix is not None:
            text = self._prefix.sub(" ", text, count=1)
        if self._anywhere is not None:
            text = self._anywhere.sub(" ", text)
        text = _SPACES.sub(" ", text).strip()
        return text if _WORD.search(text) else intent


def _alternation(phrases: Iterable[str], before: str, after: str) -> re.Pattern[str] | None:
    chosen = sorted({p for p in phrases if p.strip()}, key=lambda p: (-len(p), p))
    if not chosen:
        return None
    body = "|".join(r"\s+".join(map(re.escape, p.split())) for p in chosen)
    return re.compile(f"{before}(?:{body}){after}", re.IGNORECASE)


#: No routing words: the query is the intent.
NO_ROUTING_WORDS = RoutingWords((), ())


def routing_words(
    sources: Iterable[object],
    keyword_map: Mapping[str, list[str]],
    build_keyword_map: object,
    curated_as_content: bool,
) -> RoutingWords:
    """The vocabulary of a broker with these ``sources`` (its ``SourceConfig``s) and
    ``analysis.keyword_map``, built with the broker's ``build_keyword_map``."""
    sources = list(sources)
    built: Mapping[str, list[str]] = build_keyword_map(sources, dict(keyword_map))  # type: ignore[operator]
    generated: set[str] = set()
    for config in sources:  # the broker's SourceConfigs
        for data_type in getattr(config, "data_types", ()) or ():
            generated |= {str(data_type).lower(), str(data_type).replace("_", " ").lower()}
    generated |= {str(data_type).lower() for data_type in built}
    everything = set(generated)
    for keywords in built.values():
        everything |= {str(k).lower() for k in keywords}
    words = generated if curated_as_content else everything
    return RoutingWords(frozenset(words), frozenset(everything))
