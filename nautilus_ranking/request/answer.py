"""One request, start to finish: parse, plan, run, cut the page, build the answer.

Every way in calls :func:`answer` (or :func:`answer_sync`) with a
:class:`~nautilus_ranking.request.model.QueryRequest` and renders the :class:`Answer` its own
way: the service and ``nautilus-ranking query --json`` write :meth:`Answer.to_json`, the MCP
server its results and a short text, the retrievers their documents. A refused
request is a :class:`~nautilus_ranking.request.errors.ProblemError` whatever the way in.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, replace
from typing import Any

from nautilus_ranking.fanout.thread_loop import run_sync
from nautilus_ranking.feedback.citing import Citations, cite_rows
from nautilus_ranking.feedback.identity import client_id
from nautilus_ranking.feedback.recorder import record_answer
from nautilus_ranking.feedback.records import HandedOver
from nautilus_ranking.ranking_hash import ranking_hash
from nautilus_ranking.records import BrokerResponse, RankedRow
from nautilus_ranking.request.cursor_keys import cursor_keys
from nautilus_ranking.request.engine import Engine
from nautilus_ranking.request.model import QueryRequest
from nautilus_ranking.request.plan import (
    Plan,
    cut_page,
    forbid_overrides,
    given_overrides,
    plan,
)
from nautilus_ranking.request.profile_choice import Grant, check_overrides, choose
from nautilus_ranking.request.trace import (
    budget_stage,
    finish_request,
    page_stage,
    trace_request,
)
from nautilus_ranking.response_hash import compute_response_hash
from nautilus_ranking.selection.budget import apply_budget, entry_text
from nautilus_ranking.settings.model import NautilusSettings
from nautilus_ranking.tracing import RequestTrace

#: How a server runs a request's broker call: on its own loop, under its deadline and
#: concurrency limit (``nautilus_ranking.service.state``). Without one it is awaited here.
Runner = Callable[[Coroutine[Any, Any, BrokerResponse]], Awaitable[BrokerResponse]]


@dataclass
class Answer:
    """A request's answer: the response (the asked page of it), and how it was made."""

    request: QueryRequest
    response: BrokerResponse
    plan: Plan
    page: dict[str, Any] | None
    broker_request_id: str
    #: The next page's cursor when a ranked top K has more rows (None otherwise).
    next_cursor: str | None = None
    #: The profile that ranked it (None: the global knobs).
    profile: str | None = None
    #: Whether profiles are configured: only then does an answer name one.
    profiled: bool = False
    #: With ``NAUTILUS_FEEDBACK`` on: the ranking id and each row's position and cite
    #: (``feedback/citing.py``); None off, and then no answer carries them.
    citations: Citations | None = None

    @property
    def ranked(self) -> bool:
        """Whether the rows were scored (a passthrough has no scores)."""
        return self.plan.broker.synthesizer.ranking_enabled

    @property
    def synthesizer(self) -> str:
        return type(self.plan.broker.synthesizer).__name__

    @property
    def ranking_hash(self) -> str | None:
        """The hash of the order the rows are handed over in, with the reference time,
        ``as_of`` and the profile (:mod:`nautilus_ranking.ranking_hash`): what
        ``response_hash`` does not cover. None when the rows were not ranked."""
        if not self.ranked:
            return None
        time = self.response.time
        return ranking_hash(
            ((r.source_id, r.row) for r in self.response.ranking),
            reference=time.get("reference") if time is not None else None,
            as_of=self.request.as_of,
            profile=self.profile,
        )

    @property
    def per_source_cap(self) -> dict[str, Any] | None:
        """With ``max_per_source``: the cap, and whether it was relaxed to fill the page —
        the rows each source has over it (a page holds more than the cap of a source
        only when nothing else was left to fill it). None without a cap."""
        cap = self.plan.effective.ranking_max_per_source
        if cap is None or not self.ranked:
            return None
        counts = Counter(r.source_id for r in self.response.ranking)
        over = {source: n - cap for source, n in counts.items() if n > cap}
        return {"max_per_source": cap, "relaxed": bool(over), "rows_over": over}

    @property
    def explain(self) -> dict[str, Any]:
        """The request's effective ranking settings (what ``explain`` adds)."""
        shown = {**self.plan.explain, "broker_request_id": self.broker_request_id}
        if self.profiled:
            shown["profile"] = self.profile
        if self.response.embedding is not None:  # rows scored by words past the deadline
            shown["embedding"] = dict(self.response.embedding)
        return shown

    def to_json(self) -> dict[str, Any]:
        """The answer as ``POST /v1/query`` and ``nautilus-ranking query --json`` write it."""
        out = self.response.to_dict(
            vectors=bool(self.request.vectors),
            ranking_enabled=self.ranked,
            explain=bool(self.request.explain),
        )
        out["synthesizer"] = self.synthesizer
        if self.citations is not None:  # feedback on: beside the rows, never in data
            out["ranking_id"] = self.citations.ranking_id
            self.citations.add_to(out["ranking"])
        hashed = self.ranking_hash
        if hashed is not None:  # only a ranked answer: no key otherwise
            out["ranking_hash"] = hashed
        if self.profiled:
            out["profile"] = self.profile
        cap = self.per_source_cap
        if cap is not None:  # only under a cap: no key otherwise
            out["per_source_cap"] = cap
        if self.page is not None:
            out["page"] = self.page
        out["next_cursor"] = self.next_cursor
        if self.request.explain:
            out["explain"] = self.explain
        return out


def cap_relaxed(cap: dict[str, Any]) -> str:
    """The line every way in prints when :attr:`Answer.per_source_cap` was relaxed."""
    over = ", ".join(f"{source} +{n}" for source, n in cap["rows_over"].items())
    return (
        f"max_per_source: {cap['max_per_source']} relaxed to fill the page ({over}): "
        "no other source had rows left"
    )


#: How one way in hands a ranked row over, as text: what a token budget counts.
RowText = Callable[[RankedRow, QueryRequest, bool], str]
#: What a budget says it counted (its ``counted_as``): a way in's ``RowText`` may name
#: itself with a ``counted_as`` attribute; the JSON answer's is the default.
JSON_ENTRY = "json_entry"


def counted_as(row_text: RowText) -> str:
    """What ``row_text`` hands over, as a budget reports it."""
    name = getattr(row_text, "counted_as", JSON_ENTRY)
    return name if isinstance(name, str) else JSON_ENTRY


def response_row_text(row: RankedRow, request: QueryRequest, ranked: bool) -> str:
    """A row as a JSON answer carries it (``POST /v1/query``, ``nautilus-ranking query --json``):
    its ranking entry (lean; the score components only with ``explain``) and the row,
    vectors only when asked for. The retrievers count a row this way too, in-process
    and over HTTP alike."""
    return entry_text(
        row, vectors=bool(request.vectors), scored=ranked, explain=bool(request.explain)
    )


async def answer(
    engine: Engine,
    request: QueryRequest,
    *,
    allow_overrides: bool = True,
    max_query_chars: int | None = None,
    max_ranked_rows: int | None = None,
    run: Runner | None = None,
    request_id: str | None = None,
    row_text: RowText = response_row_text,
    profile: str | None = None,
    grant: Grant | None = None,
    api_key: bytes | None = None,
) -> Answer:
    """Plan ``request`` against ``engine`` (a bad field is a 422 ``ProblemError``; an
    override where ``allow_overrides`` is off a 403), run it (through ``run`` when
    given), cut the asked page (409 when the data moved under a cursor), and keep the
    rows of it that fit in the token budget, each counted as ``row_text`` (how this way
    in hands a row over). ``max_ranked_rows``: a server's ceiling on the rows the request
    ranks (``request.plan.within_ceiling``). ``request_id`` replaces the broker's own in
    the response (a server's request id). ``profile`` names the ranking profile asked
    for and ``grant`` is what the caller's key allows (None: no keys, any profile): the
    global knobs, then the profile's, then the request's overrides the profile allows
    (``nautilus_ranking.request.profile_choice``); a profile's rule replaces
    ``allow_overrides``. With ``NAUTILUS_FEEDBACK`` on the answer is made citable for
    the caller with ``api_key`` (``feedback/citing.py``) and logged off the request path
    (``feedback/recorder.py``)."""
    traced = trace_request(request, request_id)  # None unless an SDK records spans
    try:
        result = await _answer(
            engine,
            request,
            allow_overrides,
            max_query_chars,
            max_ranked_rows,
            run,
            request_id,
            row_text,
            profile,
            grant,
            traced,
        )
    except BaseException as exc:
        if traced is not None:
            traced.close(exc)
        raise
    if traced is not None:
        finish_request(traced, result)
        traced.close(None)
    if engine.settings.feedback:
        make_citable(engine.settings, result, api_key)
    return result


def make_citable(settings: NautilusSettings, result: Answer, api_key: bytes | None) -> None:
    """Give ``result`` its ranking id and its rows' cites, and queue its log records."""
    keys = cursor_keys(settings)
    now = time.time()
    response = result.response
    paging = result.plan.paging
    page = paging.number if paging is not None else 1
    client = client_id(keys, api_key, result.profile)
    result.citations = cite_rows(
        keys, response.request_id, page, result.profile, client, response.ranking, int(now)
    )
    confidence = response.confidence.get("value") if response.confidence is not None else None
    handed = HandedOver(
        response.request_id,
        client,
        result.request.query,
        result.profile,
        page,
        result.plan.effective,
        list(response.ranking),
        confidence,
        bool(response.abstain["abstained"]) if response.abstain is not None else False,
        now,
    )
    record_answer(settings, keys, handed)


async def _answer(
    engine: Engine,
    request: QueryRequest,
    allow_overrides: bool,
    max_query_chars: int | None,
    max_ranked_rows: int | None,
    run: Runner | None,
    request_id: str | None,
    row_text: RowText,
    profile: str | None,
    grant: Grant | None,
    traced: RequestTrace | None,
) -> Answer:
    profiled = bool(engine.profiles)
    chosen = choose(engine.profiles, profile, grant) if profiled or profile else None
    if chosen is not None:
        check_overrides(chosen, given_overrides(request))
        engine = engine.by_profile[chosen.name]
    elif not allow_overrides:
        forbid_overrides(request)
    name = chosen.name if chosen is not None else None
    # a cursor's page size is an override of top_k: held to the top K where that is fixed
    size_fixed = "top_k" not in chosen.overrides if chosen is not None else not allow_overrides
    chars = max_query_chars if max_query_chars is not None else len(request.query)
    run_plan = plan(
        request,
        engine.broker,
        engine.settings,
        engine.embedder,
        chars,
        name,
        max_ranked_rows=max_ranked_rows,
        size_fixed=size_fixed,
    )
    context = {"as_of": request.as_of} if request.as_of is not None else None
    call = run_plan.broker.arequest(request.query, context)
    response = await (run(call) if run is not None else call)
    whole = response
    ranked = run_plan.broker.synthesizer.ranking_enabled

    def text(row: RankedRow) -> str:
        return row_text(row, request, ranked)

    # a page under a budget starts at the first row the budget left out: the page and
    # the budget are cut together
    response, page, fitted = cut_page(run_plan, response, text, tuple(request.whole or ()))
    if traced is not None and page is not None:
        # the page's window of K rows; what of it fits is the budget stage's to say
        window = len(fitted.kept) + fitted.left_out if fitted is not None else None
        page_stage(traced, page, whole, response, window)
    next_cursor = page["next_cursor"] if page is not None else None
    if run_plan.paging is not None and not run_plan.paging.asked:
        page = None  # page 1 of a top K: only its next cursor is shown
    max_tokens = run_plan.effective.ranking_max_tokens
    if max_tokens is not None and fitted is None:  # no pages: what fits of the ranking
        data, ranking, fitted = apply_budget(
            response.data,
            response.ranking,
            max_tokens,
            text,
            passages=run_plan.effective.ranking_budget_passages,
            whole=tuple(request.whole or ()),
        )
        response = replace(
            response,
            data=data,
            ranking=ranking,
            budget=fitted.as_dict(),
            response_hash=compute_response_hash(data),
        )
    if response.budget is not None and max_tokens is not None:  # what its tokens are of
        response = replace(response, budget={**response.budget, "counted_as": counted_as(row_text)})
    if traced is not None and fitted is not None:
        budget_stage(traced, fitted, len(fitted.kept) + fitted.left_out, response.ranking)
    broker_request_id = response.request_id
    if request_id is not None:
        response.request_id = request_id
    return Answer(
        request,
        response,
        run_plan,
        page,
        broker_request_id,
        next_cursor,
        name,
        profiled,
    )


def answer_sync(
    engine: Engine,
    request: QueryRequest,
    row_text: RowText = response_row_text,
    profile: str | None = None,
) -> Answer:
    """:func:`answer` from synchronous code (``nautilus-ranking query``, a sync retriever)."""
    return run_sync(
        answer(engine, request, row_text=row_text, profile=profile),
        "answer_sync()",
        "await answer(...)",
    )
