"""Stable pages past the top K: the same query and settings give the same pages.

One module past 400 lines because the page, its cursor and the cursor's key are one
promise (a cursor names the ranking it pages); the budget's paging
(:mod:`nautilus_ranking.selection.budget_pages`) and the cursor's signing keys
(:mod:`nautilus_ranking.request.cursor_keys`) are modules of their own.

Page ``n`` (1-based) of size ``K`` is ranks ``(n-1)·K+1 … n·K`` of one ranking: the
broker ranks the top ``n·K + 1`` with the same settings and the page is cut from it.
The ranking is a sort of one batch by a total order (score, source, source rank),
cut at ``top_k`` only at the end, and the batch does not depend on ``top_k`` — so
the top ``n·K`` is a prefix of the top ``(n+1)·K`` and consecutive pages neither
overlap nor skip a row; the extra row says whether a next page exists.

A cursor is opaque to the caller (URL-safe base64 of a small JSON object and its
HMAC-SHA256 tag): the page it points to, its page size, a key of the query and every
setting that shapes the ranking, and a key of the sources' raw answers. A caller hands
it back, so no field of it is read before its tag checks out under the cursor key
(:mod:`nautilus_ranking.request.cursor_keys`): an altered or forged cursor is "not a
cursor nautilus made", and one made before cursors were signed is refused as such.
Its page size is an override of ``top_k``: where the caller may not override
``top_k`` (``NAUTILUS_SERVE_ALLOW_OVERRIDES=false``, or a profile that fixes it) a
cursor of another size is refused. A cursor is refused when the key differs (another
query, page size, boosts, idf, sources, embedder: its pages would belong to another
ranking) and when the sources' answers changed since its page was made (a row
added, a source failed or came back: the next page could repeat or skip rows).
The HTTP API, the MCP tool and ``nautilus-ranking query`` share this module, so a cursor
made by one is honoured by the others. A cursor also carries its page size, so a
request that gives the cursor without ``top_k`` pages on by the same size.

**Under a token budget** a page is not a fixed slice: the budget keeps what fits of the
page's K rows and the next page starts at the first row it left out
(:mod:`nautilus_ranking.selection.budget_pages`), so paging for more never loses the
rows a tight budget dropped. The cursor stays stateless: page ``n`` recomputes what
pages ``1 … n-1`` delivered from the same ranking and budget (the ranking is the top
``n·K + 1`` as without a budget), and carries a digest of that delivery, so a cursor
used under another budget or way of counting rows (MCP counts a text line, JSON an
entry) is refused (422) rather than repeat or skip rows.

A ranked request with a top K and no page asked is answered as page 1
(:func:`first_page`): the broker ranks K + 1 rows, so the answer can say whether more
exist and carry the next page's cursor.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from nautilus_ranking.embedders import Embedder
from nautilus_ranking.errors import NautilusError, Problem, cut
from nautilus_ranking.records import BrokerResponse, RankedRow
from nautilus_ranking.request.cursor_keys import TAG_BYTES, CursorKeys, cursor_keys
from nautilus_ranking.response_hash import compute_response_hash
from nautilus_ranking.selection.budget import BudgetResult, counted_by, entry_text
from nautilus_ranking.selection.budget_pages import budget_page
from nautilus_ranking.selection.passage_parts import (
    asked_whole,
    costs_to_fit,
    parts_that_fit,
    whole_tokens,
)
from nautilus_ranking.selection.tokens import count_tokens
from nautilus_ranking.settings.knobs import cursor_key_entries, ranks_by_time
from nautilus_ranking.settings.model import NautilusSettings
from nautilus_ranking.synthesis.ranking import RankingSynthesizer

#: 3: revisions across sources only as NAUTILUS_RANKING_MAY_REVISE allows (a version 2
#: cursor's pages were cut from a ranking that took other rows for revisions); 2: signed
#: (version 1 cursors carried no tag and are refused as made before).
_VERSION = 3
#: The characters a cursor is made of (URL-safe base64, unpadded).
_CURSOR_TEXT = re.compile(r"[A-Za-z0-9_-]+")
#: A signed cursor's first character: its tag comes first and base64 of a tag may start
#: with '-', which a command line would read as a flag (``--cursor -x…``).
CURSOR_PREFIX = "n"
#: The longest cursor read (a cursor nautilus makes is under 200 characters).
MAX_CURSOR_CHARS = 512
#: The deepest page a request may ask for: page n ranks n·K + 1 rows.
MAX_PAGE = 1000
#: The largest page size a cursor may carry: the largest ``top_k`` a request may ask.
MAX_PAGE_SIZE = 10**18 - 1
_FIELDS = (
    "query, top_k, boosts, idf, sources, cut, near_duplicates, diversity, max_per_source, "
    "canonical_sources, recency, as_of"
)


class PageError(NautilusError, ValueError):
    """A page or cursor that cannot be served; ``stale`` when the data moved under it."""

    def __init__(
        self, field: str, value: str, reason: str, valid: str, stale: bool = False
    ) -> None:
        self.field, self.value, self.reason, self.valid = field, value, reason, valid
        super().__init__(self.problem.message)
        self.stale = stale

    @property
    def problem(self) -> Problem:
        """The refused page or cursor as a :class:`Problem`, named by its field."""
        return Problem(self.field, self.value, self.reason, self.valid)


@dataclass(frozen=True)
class Paging:
    """One page of one ranking: its number, its size, and the keys its cursor carries."""

    number: int
    size: int
    key: str
    data_key: str | None = None  # from the cursor: the answers its page was cut from
    asked: bool = True  # False: page 1 of a top K no page was asked for (first_page)
    #: From a cursor made under a token budget: a digest of the rows the pages before
    #: it handed over (or reported too large), checked against their recomputation.
    delivered: str | None = None
    #: The keys that sign the next page's cursor (None: this page makes none).
    keys: CursorKeys | None = field(default=None, repr=False, compare=False)

    @property
    def rank_top_k(self) -> int:
        """How many rows to rank: this page and the previous ones, plus one to see past it."""
        return self.number * self.size + 1

    def synthesizer(
        self, settings: NautilusSettings, embedder: Embedder | None
    ) -> RankingSynthesizer:
        """The page's ranker: the request's settings with a deeper ``top_k``."""
        deeper = settings.model_copy(update={"ranking_top_k": self.rank_top_k})
        # a per-source cap counts in each page, not in the deeper ranking as a whole
        return RankingSynthesizer.from_settings(deeper, embedder=embedder, page_size=self.size)

    def cut(
        self,
        response: BrokerResponse,
        max_tokens: int | None = None,
        text: Callable[[RankedRow], str] | None = None,
        passages: bool = False,
        whole: tuple[str, ...] = (),
    ) -> tuple[BrokerResponse, dict[str, Any], BudgetResult | None]:
        """The page's rows out of the deeper response (``data`` and its hash follow),
        the ``page`` object (number, size, ranks shown, the next page's cursor) and,
        under ``max_tokens``, what the budget did, each row counted as ``text(row)``:
        the page then starts at the first row the budget left out
        (:mod:`nautilus_ranking.selection.budget_pages`)."""
        data_key = _data_key(response.source_response_hashes)
        if self.data_key is not None and data_key != self.data_key:
            raise PageError(
                "cursor",
                f"page {self.number}",
                "the sources' answers changed since this cursor was made "
                "(rows added or removed, or a source failed or recovered), so "
                "this page could repeat or skip rows",
                "no cursor: ask for the first page again",
                stale=True,
            )
        start = (self.number - 1) * self.size
        rows = response.ranking[start : start + self.size]
        more = len(response.ranking) > start + self.size
        budget: dict[str, Any] | None = response.budget
        fitted = None
        delivered = None
        if max_tokens is None and self.delivered is not None:
            raise _other_budget(self)
        if max_tokens is not None:
            ranking = response.ranking
            counts = count_tokens([(text or entry_text)(r) for r in ranking])
            named: list[bool] = []  # the rows asked for whole
            if passages:  # a row too large for its page: its passage
                ranking, counts = parts_that_fit(
                    ranking, counts, max_tokens, text or entry_text, whole=whole, page=self.size
                )
                named = asked_whole(ranking, whole)
            chosen = budget_page(
                costs_to_fit(counts, named),
                [r.relevance > 0 for r in ranking],
                self.size,
                max_tokens,
                self.number,
            )
            if self.data_key is not None and self.delivered != _digest(chosen.earlier):
                raise _other_budget(self)  # its earlier pages were not these
            delivered = _digest((*chosen.earlier, *chosen.kept, *chosen.too_large))
            used = chosen.fitted.tokens_used + whole_tokens(counts, named, chosen.kept)
            fitted = replace(chosen.fitted, tokens_used=used, tokenizer=counted_by(None))
            rows, more = [ranking[i] for i in chosen.kept], chosen.more
            budget = {
                **fitted.as_dict(),
                "too_large_ranks": [ranking[i].rank for i in chosen.too_large],
            }
        data: dict[str, list[dict[str, Any]]] = {sid: [] for sid in response.data}
        for ranked in rows:
            data.setdefault(ranked.source_id, []).append(ranked.row)
        cut_info = response.cut
        if cut_info is not None:  # of the rows the cut left out, those of this page's ranks
            kept = len(response.ranking)
            uncut = kept + int(cut_info["rows_left_out"])
            in_page = max(0, min(start + self.size, uncut) - max(start, kept))
            cut_info = {**cut_info, "rows_left_out": in_page}
        page = replace(
            response,
            ranking=rows,
            data=data,
            response_hash=compute_response_hash(data),
            cut=cut_info,
            budget=budget,
            # an abstained answer's rows held back: this page's ranks of them
            nearest=response.nearest[start : start + self.size],
        )
        following = Paging(
            self.number + 1, self.size, self.key, data_key, delivered=delivered, keys=self.keys
        )
        info = {
            "number": self.number,
            "size": self.size,
            "first_rank": rows[0].rank if rows else None,
            "last_rank": rows[-1].rank if rows else None,
            "next_cursor": following.cursor() if more else None,
        }
        return page, info, fitted

    def cursor(self) -> str:
        """This page's cursor, signed (the data key is that of the page before it)."""
        if self.keys is None:
            raise ValueError("a cursor needs the keys that sign it (Paging.keys)")
        body = {"v": _VERSION, "n": self.number, "k": self.key, "d": self.data_key, "s": self.size}
        if self.delivered is not None:
            body["b"] = self.delivered
        raw = json.dumps(body, separators=(",", ":"), sort_keys=True).encode()
        signed = self.keys.sign(raw) + raw
        return CURSOR_PREFIX + base64.urlsafe_b64encode(signed).decode().rstrip("=")


def ranking_key(
    query: str,
    settings: NautilusSettings,
    source_ids: Sequence[str],
    profile: str | None = None,
    as_of: str | None = None,
) -> str:
    """A short digest of the query and everything that shapes its ranking (the profile
    that ranked it among them: a cursor carries its profile; ``as_of``, the time a
    request's ages count from)."""
    shape: dict[str, Any] = {
        "query": query,
        "sources": list(source_ids),
        **cursor_key_entries(settings),
    }
    if profile is not None:  # without profiles the key is what it was
        shape["profile"] = profile
    if as_of is not None and ranks_by_time(settings):
        shape["as_of"] = as_of
    return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:24]


def first_page(
    query: str,
    settings: NautilusSettings,
    source_ids: Sequence[str],
    profile: str | None = None,
    as_of: str | None = None,
) -> Paging | None:
    """Page 1 of a ranked top K that no page was asked for (None without a top K): its
    answer says whether more rows exist and carries the next page's cursor."""
    size = settings.ranking_top_k
    if size is None:
        return None
    key = ranking_key(query, settings, source_ids, profile, as_of)
    return Paging(1, size, key, asked=False, keys=cursor_keys(settings))


def _digest(rows: Sequence[int]) -> str:
    """A short digest of the rows (indices into the ranking) earlier pages delivered."""
    return hashlib.sha256(json.dumps(list(rows)).encode()).hexdigest()[:16]


def _other_budget(paging: Paging) -> PageError:
    return PageError(
        "cursor",
        f"page {paging.number}",
        "made under another token budget or way of counting rows (max_tokens, explain, "
        "vectors, or another way in: MCP counts a result's text line, JSON its entry), so "
        "this page could repeat or skip rows",
        "the same max_tokens, explain and vectors, through the way in that made it",
    )


def _data_key(source_hashes: Mapping[str, str]) -> str:
    return hashlib.sha256(json.dumps(sorted(source_hashes.items())).encode()).hexdigest()[:24]


def paging(
    query: str,
    settings: NautilusSettings,
    source_ids: Sequence[str],
    *,
    page: int | None = None,
    cursor: str | None = None,
    profile: str | None = None,
    size_fixed: bool = False,
    as_of: str | None = None,
) -> Paging | None:
    """The page asked for (``page`` or ``cursor``, not both), None when neither is given.

    ``settings`` are the request's effective settings (its overrides applied); the
    page size is their ``ranking_top_k`` (unset: a cursor's own). ``size_fixed``: the
    caller may not override ``top_k``, so a cursor's size must be it.
    """
    if page is None and cursor is None:
        return None
    if page is not None and cursor is not None:
        raise PageError(
            "page",
            str(page),
            "both page and cursor given",
            "one of them: page for a page by number, cursor to continue",
        )
    keys = cursor_keys(settings)
    size = settings.ranking_top_k
    decoded = _decode(cursor, keys) if cursor is not None else None
    if size is None and decoded is not None and not size_fixed:
        size = decoded[3]  # the cursor's own page size: it runs without top_k
        settings = settings.model_copy(update={"ranking_top_k": size})
    if size is None:
        raise PageError(
            "top_k",
            "(unset)",
            "paging needs a page size",
            "an integer >= 1 (top_k, or NAUTILUS_RANKING_TOP_K)",
        )
    key = ranking_key(query, settings, source_ids, profile, as_of)
    if page is not None:
        if isinstance(page, bool) or not isinstance(page, int) or not 1 <= page <= MAX_PAGE:
            raise PageError(
                "page", cut(page), "not a page number", f"an integer from 1 to {MAX_PAGE}"
            )
        return Paging(page, size, key, keys=keys)
    number, made_for, data_key, made_size, delivered = (
        decoded if decoded is not None else _decode(cursor, keys)
    )
    # a cursor of another size made for this same query and settings: its size is what
    # differs (else: another query, profile or settings, said as such below)
    resized = made_size != size and made_for == ranking_key(
        query,
        settings.model_copy(update={"ranking_top_k": made_size}),
        source_ids,
        profile,
        as_of,
    )
    if resized and size_fixed:
        raise PageError(
            "cursor",
            cut(cursor),
            f"made for pages of {made_size} rows, not {size}: this caller's page size "
            "is fixed (top_k may not be overridden)",
            f"a cursor made for pages of {size} rows",
        )
    if resized:
        raise PageError(
            "cursor",
            cut(cursor),
            f"made for pages of {made_size} rows, not {size} (top_k)",
            f"top_k {made_size}, or none in the request (the cursor's own size)",
        )
    if made_for != key or made_size != size:
        raise PageError(
            "cursor",
            cut(cursor),
            "made for another query or other settings "
            f"(one of {_FIELDS}, the profile, or the service's ranking settings, differs)",
            "the next_cursor of a response to this same query and settings",
        )
    return Paging(number, size, key, data_key, delivered=delivered, keys=keys)


def _decode(cursor: object, keys: CursorKeys) -> tuple[int, str, str, int, str | None]:
    """A cursor's page number, ranking key, data key, page size and digest of what its
    earlier pages delivered under a budget, once its tag checks out under ``keys``."""
    bad = PageError(
        "cursor",
        cut(cursor),
        "not a cursor nautilus made (altered, or signed with another key)",
        "the next_cursor of an earlier response, unchanged",
    )
    if (
        not isinstance(cursor, str)
        or not cursor
        or len(cursor) > MAX_CURSOR_CHARS
        or not _CURSOR_TEXT.fullmatch(cursor)
    ):  # base64 would skip other characters
        raise bad
    signed_form = cursor.startswith(CURSOR_PREFIX)  # version 1 was base64 of its JSON alone
    text = cursor.removeprefix(CURSOR_PREFIX)
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise bad from None
    if not signed_form and _unsigned(raw):
        raise PageError(
            "cursor",
            cut(cursor),
            "made by an earlier version of nautilus-ranking, whose cursors were not signed",
            "no cursor: ask for the first page again",
        )
    tag, signed = raw[:TAG_BYTES], raw[TAG_BYTES:]
    if not signed_form or len(tag) < TAG_BYTES or not keys.verify(tag, signed):
        raise bad
    try:
        body = json.loads(signed)
    except ValueError:
        raise bad from None
    if isinstance(body, dict) and body.get("v") == 2:
        raise PageError(
            "cursor",
            cut(cursor),
            "made by an earlier version of nautilus-ranking, which took rows of other "
            "sources for revisions",
            "no cursor: ask for the first page again",
        )
    if not isinstance(body, dict) or body.get("v") != _VERSION:
        raise bad
    number, key, data_key, size = body.get("n"), body.get("k"), body.get("d"), body.get("s")
    delivered = body.get("b")
    if (
        isinstance(number, bool)
        or not isinstance(number, int)
        or not 2 <= number <= MAX_PAGE
        or not isinstance(key, str)
        or not isinstance(data_key, str)
        or isinstance(size, bool)
        or not isinstance(size, int)
        or not 1 <= size <= MAX_PAGE_SIZE
        or (delivered is not None and not isinstance(delivered, str))
    ):
        raise bad
    return number, key, data_key, size, delivered


def _unsigned(raw: bytes) -> bool:
    """Whether ``raw`` is a cursor of version 1 (JSON alone, no tag: made before cursors
    were signed). A signed cursor starts with its tag, which is never JSON with it."""
    try:
        body = json.loads(raw)
    except ValueError:
        return False
    return isinstance(body, dict) and body.get("v") == 1
