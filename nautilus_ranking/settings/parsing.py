"""The parsers behind every ``NAUTILUS_*`` setting, shared by whatever checks the same
kind of value elsewhere (``nautilus-ranking query --top-k``, a request's ``top_k`` and ``idf``,
the service's header deadline), so a value means the same thing wherever it is given.

Each parser takes the name the value was given under (for the :class:`Problem`), the
raw value (text from the environment, or a value passed in) and what an unset value
means, and returns ``(value, problem)``: the parsed value and ``None``, or the
fallback and the :class:`Problem` that says why. None of them raises or logs; the
caller decides whether a problem is a warning, a strict-mode error or a 422.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace

from nautilus_ranking.errors import Problem, cut

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def parse_int(
    var: str,
    raw: object,
    minimum: int = 1,
    default: int | None = None,
    valid: str = "an integer >= 1, or unset",
    maximum: int | None = None,
) -> tuple[int | None, Problem | None]:
    """An integer from ``minimum`` (and up to ``maximum``); blank or unset: ``default``."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return default, None
    value: int | None = None
    if isinstance(raw, int) and not isinstance(raw, bool):
        value = raw
    elif isinstance(raw, str):
        text = raw.strip()
        if re.fullmatch(r"\+?[0-9]{1,18}", text):
            value = int(text)
    if value is None or value < minimum:
        return default, Problem(var, cut(raw), f"not an integer >= {minimum}", valid)
    if maximum is not None and value > maximum:
        return default, Problem(var, cut(raw), f"greater than {maximum}", valid)
    return value, None


def parse_seconds(var: str, raw: object, default: float) -> tuple[float, Problem | None]:
    """A number of seconds > 0, such as ``2.5``; blank or unset: ``default``."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return default, None
    value: float | None = None
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        value = float(raw)
    elif isinstance(raw, str) and re.fullmatch(r"\+?([0-9]{1,9}(\.[0-9]*)?|\.[0-9]+)", raw.strip()):
        value = float(raw.strip())
    if value is None or not value > 0:
        return default, Problem(
            var, cut(raw), "not a number of seconds > 0", "a number > 0, such as 2.5"
        )
    return value, None


def parse_origins(var: str, raw: object) -> tuple[list[str], Problem | None]:
    """``*`` or comma-separated ``http(s)://host[:port]`` origins (a list is taken as
    the items); blank or unset: none. One bad origin refuses the whole value."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return [], None
    items = raw if isinstance(raw, list) else str(raw).split(",")
    origins = [str(o).strip().rstrip("/") for o in items if str(o).strip()]
    bad = [o for o in origins if o != "*" and not re.fullmatch(r"https?://[^\s/]+", o)]
    if bad:
        return [], Problem(
            var,
            cut(bad[0]),
            "not an origin",
            "'*' or comma-separated origins such as https://app.example.com",
        )
    return origins, None


#: The fewest characters a cursor key may have (a random 32-character text holds 128 bits
#: or more; ``openssl rand -hex 32`` makes one of 64).
MIN_CURSOR_KEY_CHARS = 32


def parse_cursor_keys(var: str, raw: object) -> tuple[list[str], Problem | None]:
    """Comma-separated cursor keys (a list is taken as its items), each of at least
    :data:`MIN_CURSOR_KEY_CHARS` characters; blank or unset: none. A key is a secret:
    a problem says its length, never its text."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return [], None
    items = raw if isinstance(raw, list) else str(raw).split(",")
    keys = [str(k).strip() for k in items if str(k).strip()]
    short = [k for k in keys if len(k) < MIN_CURSOR_KEY_CHARS]
    if short:
        return [], Problem(
            var,
            f"(a key of {len(short[0])} characters)",
            "too short to sign cursors",
            f"keys of at least {MIN_CURSOR_KEY_CHARS} characters, comma-separated "
            "(openssl rand -hex 32 makes one)",
        )
    return keys, None


#: The longest source id a list of them may hold (as a request's ``sources``).
MAX_SOURCE_ID_CHARS = 256


def parse_source_ids(var: str, raw: object) -> tuple[list[str], Problem | None]:
    """Comma-separated source ids, in order (a list is taken as its items), lower-cased as
    boosts' are, blanks and repeats dropped; blank or unset: none. An id longer than a
    source id may be refuses the whole value."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return [], None
    items = raw if isinstance(raw, list) else str(raw).split(",")
    ids: list[str] = []
    for item in items:
        sid = str(item).strip().lower()
        if len(sid) > MAX_SOURCE_ID_CHARS:
            return [], Problem(
                var, cut(sid), "not a source id", "comma-separated source ids, e.g. helpcenter,wiki"
            )
        if sid and sid not in ids:
            ids.append(sid)
    return ids, None


def parse_bool(var: str, raw: object, default: bool) -> tuple[bool, Problem | None]:
    """``true``/``false``, ``1``/``0``, ``yes``/``no``, ``on``/``off``, in any case;
    blank or unset: ``default``."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return default, None
    if isinstance(raw, bool):
        return raw, None
    text = str(raw).strip().lower() if isinstance(raw, str | int) else None
    if text in _TRUE:
        return True, None
    if text in _FALSE:
        return False, None
    return default, Problem(var, cut(raw), "not a boolean", "true/false, 1/0, yes/no, on/off")


def parse_idf(var: str, raw: object) -> tuple[bool | None, Problem | None]:
    """A boolean, or ``auto`` (and blank or unset): None, IDF as the embedder's default."""
    if raw is None or (isinstance(raw, str) and raw.strip().lower() in ("", "auto")):
        return None, None
    value, problem = parse_bool(var, raw, False)
    if problem is not None:
        return None, replace(problem, valid="true/false, 1/0, yes/no, on/off, or auto")
    return value, None


def parse_choice(
    var: str, raw: object, choices: tuple[str, ...], default: str
) -> tuple[str, Problem | None]:
    """One of ``choices`` (any case, whitespace tolerated); blank or unset: ``default``."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return default, None
    text = raw.strip().lower() if isinstance(raw, str) else None
    if text in choices:
        return text, None
    return default, Problem(var, cut(raw), "unknown value", ", ".join(choices))


#: The lexical content scores (NAUTILUS_RANKING_LEXICAL): BM25 over the batch's rows
#: (the default; nautilus_ranking/synthesis/lexical.py), or the hashing embedder's
#: IDF-weighted cosine (the default before; docs/tuning-lexical.md has the pooled evidence).
LEXICAL_SCORERS = ("bm25", "cosine")
#: NAUTILUS_RANKING_CURATED_KEYWORDS: inside the broker, analysis.keyword_map's curated
#: keywords only route a request ("routing", left out of the ranked query) or are also
#: content ("content", ranked by).
CURATED_KEYWORDS = ("routing", "content")
#: NAUTILUS_UPSTREAM_REQUEST_TOOLS: the request tools the broker's MCP server lists, both
#: (the stock nautilus_request beside nautilus_request_ranked) or the ranked one alone.
REQUEST_TOOLS = ("both", "ranked")


def parse_field_name(var: str, raw: object) -> tuple[str | None, Problem | None]:
    """A row field's name (up to 200 characters, stripped); blank or unset: ``None``."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None, None
    if isinstance(raw, str) and len(raw.strip()) <= 200:
        return raw.strip(), None
    return None, Problem(var, cut(raw), "not a field name", "a row field such as 'id'")


def parse_ranking_cut(var: str, raw: object) -> tuple[str | None, Problem | None]:
    """A relevance cut ``METHOD:VALUE`` (``relative:0.8``, ``floor:0.6``, ``gap:0.1``;
    nautilus_ranking/selection/cut.py), as its canonical text; blank, unset or ``off``: None."""
    # Here, not at the top: the command's parser uses this module, and the selection
    # package loads numpy (``nautilus-ranking --version`` does not).
    from nautilus_ranking.selection import cut as relevance_cuts

    value, problem = relevance_cuts.parse_cut(var, raw)
    return (str(value) if value is not None else None), problem


#: ``NAUTILUS_RANKING_NEAR_DUPLICATES=on``: the resemblance (Jaccard of word 3-shingles,
#: nautilus_ranking/synthesis/near_duplicates.py) at which two rows are one. Measured
#: by benchmarks/quality/near_duplicates.py (docs/benchmarks.md) over 0.3 to 0.7: at 0.4, 96 %
#: of the injected repeats left the top 10 and nDCG@10 on the collections as they are
#: moved by 0.0007 at most, except CACM (-0.0024: short, templated documents; 0.3 cost
#: it -0.0051, and only 0.7 kept it, catching no copy).
NEAR_DUPLICATES_ON = 0.4
#: How long a number's text may be (digits and a point): a value is bounded before it
#: is parsed.
_MAX_NUMBER_CHARS = 24
_NUMBER = re.compile(r"\+?([0-9]+(\.[0-9]*)?|\.[0-9]+)")


def _fraction(raw: object) -> float | None:
    """A plain number (``0.6``, ``1``, ``.5``; not ``nan``, ``1e-3`` or a boolean)."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int | float):
        return float(raw) if math.isfinite(raw) else None
    if isinstance(raw, str):
        text = raw.strip()
        if len(text) <= _MAX_NUMBER_CHARS and re.fullmatch(
            r"\+?([0-9]+(\.[0-9]*)?|\.[0-9]+)", text
        ):
            return float(text)
    return None


def parse_near_duplicates(var: str, raw: object) -> tuple[float | None, Problem | None]:
    """``on`` (:data:`NEAR_DUPLICATES_ON`), ``off``, or a resemblance threshold in
    (0, 1] (1: the same words in the same order); blank, unset or ``off``: None."""
    valid = f"on (a threshold of {NEAR_DUPLICATES_ON}), off, or a number in (0, 1] such as 0.6"
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None, None
    if isinstance(raw, str) and raw.strip().lower() in ("on", "off"):
        return (NEAR_DUPLICATES_ON if raw.strip().lower() == "on" else None), None
    value = _fraction(raw)
    if value is None or not 0 < value <= 1:
        return None, Problem(var, cut(raw), "not on, off or a number in (0, 1]", valid)
    return value, None


def parse_diversity(var: str, raw: object) -> tuple[float | None, Problem | None]:
    """An MMR weight in [0, 1] (0 or ``off``: off, None); blank or unset: None."""
    valid = "a number in [0, 1] such as 0.3 (0 or off: relevance only)"
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None, None
    if isinstance(raw, str) and raw.strip().lower() == "off":
        return None, None
    value = _fraction(raw)
    if value is None or not 0 <= value <= 1:
        return None, Problem(var, cut(raw), "not a number in [0, 1]", valid)
    return (value if value > 0 else None), None


#: The longest path a fit file's setting may name (characters): a value is bounded.
_MAX_PATH_CHARS = 4096


def parse_fit_file(var: str, raw: object) -> tuple[str | None, Problem | None]:
    """The path of a fit file ``nautilus-ranking calibrate`` wrote; blank, unset or
    ``shipped``: None (the shipped fit). Only its shape is checked here: the file is
    read, and checked against the configured sources, at start."""
    valid = "the path of a fit file nautilus-ranking calibrate wrote, or unset"
    if raw is None or (isinstance(raw, str) and raw.strip().lower() in ("", "shipped")):
        return None, None
    if not isinstance(raw, str) or len(raw) > _MAX_PATH_CHARS or "\x00" in raw:
        return None, Problem(var, cut(raw), "not a file path", valid)
    return raw.strip(), None


def parse_min_confidence(var: str, raw: object) -> tuple[float | None, Problem | None]:
    """A probability in [0, 1] below which an answer abstains (0: never, but the answer
    says so); blank, unset or ``off``: None (selection/confidence.py)."""
    valid = "a number in [0, 1] such as 0.12 (0: never abstain), or off"
    if raw is None or (isinstance(raw, str) and raw.strip().lower() in ("", "off")):
        return None, None
    value = _fraction(raw)
    if value is None or not 0 <= value <= 1:
        return None, Problem(var, cut(raw), "not a number in [0, 1]", valid)
    return value, None
