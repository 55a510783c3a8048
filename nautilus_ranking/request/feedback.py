"""Use reported back: ``POST /v1/feedback`` and the MCP ``feedback`` tool.

A report is an action and the ``cite`` handles of the rows it is about: a row action
(``cited``, ``used``, ``fetched``, ``rejected``) records one event per cite; a
query-level one (``retried``, ``task_success``, ``task_failure``) one per answer the
cites belong to. A cite is read only once its signature checks out, only within its
lifetime, and only from the caller whose answer made it (the same API key, or without
keys the same profile). One bad cite refuses the whole report, naming it
(``cites.2``), so nothing is half-recorded.

Each event's id is a digest of its action and the row (or answer) it is about, so a
report sent twice is one event twice, which a reader drops; the server keeps no
seen-set. An impression is written by the server alone: it is not an action a caller
may report, and never counts as use.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from nautilus_ranking.errors import Problem, cut
from nautilus_ranking.feedback.cites import MAX_CITE_CHARS, Cite, CiteError, read_cite
from nautilus_ranking.feedback.events import QUERY_ACTIONS, ROW_ACTIONS, EventRecord
from nautilus_ranking.feedback.identity import client_id
from nautilus_ranking.feedback.recorder import record_events
from nautilus_ranking.feedback.records import reported_event
from nautilus_ranking.request.cursor_keys import cursor_keys
from nautilus_ranking.request.errors import ProblemError, invalid
from nautilus_ranking.settings.model import NautilusSettings

#: The most cites one report carries.
MAX_CITES = 50
_ACTIONS = (*ROW_ACTIONS, *QUERY_ACTIONS)
_DAY_S = 86_400


class FeedbackReport(BaseModel):
    """A report's body."""

    model_config = ConfigDict(extra="forbid")

    action: Literal[
        "cited", "used", "fetched", "rejected", "retried", "task_success", "task_failure"
    ]
    cites: list[str] = Field(min_length=1, max_length=MAX_CITES)


def parse_report(payload: object) -> FeedbackReport:
    """The body as a :class:`FeedbackReport`, or 422 naming each bad field."""
    try:
        return FeedbackReport.model_validate(payload)
    except ValidationError as exc:
        problems = [
            Problem(
                ".".join(cut(str(p)) for p in error["loc"]) or "body",
                cut(error.get("input")),
                error["msg"][:1].lower() + error["msg"][1:],
                _VALID.get(str(error["loc"][0]) if error["loc"] else "", _BODY),
            )
            for error in exc.errors()
        ]
        raise invalid(problems) from None


_BODY = 'a JSON object {"action": …, "cites": […]}'
_VALID = {
    "action": ", ".join(_ACTIONS),
    "cites": f"1 to {MAX_CITES} cite handles from answers (each at most {MAX_CITE_CHARS} chars)",
}


def report_feedback(
    settings: NautilusSettings,
    payload: object,
    api_key: bytes | None = None,
    profile: str | None = None,
    *,
    caller: str | None = None,
) -> dict[str, Any]:
    """Record a report from the caller with ``api_key`` (or, without keys, naming
    ``profile``; or ``caller``, the client id a cite names, where the caller was
    identified elsewhere: inside the Nautilus broker, its agent); what it answers: the
    events' ids and whether they were queued."""
    if not settings.feedback:
        raise ProblemError(
            404,
            "feedback-off",
            "Feedback is off",
            "this server records no feedback (NAUTILUS_FEEDBACK=true turns it on)",
        )
    report = parse_report(payload)
    keys = cursor_keys(settings)
    now = time.time()
    lifetime = settings.feedback_cite_lifetime_days * _DAY_S
    caller = caller if caller is not None else client_id(keys, api_key, profile)
    cites = [_checked(keys, i, text, lifetime, now, caller) for i, text in enumerate(report.cites)]
    events = _events(report.action, cites, caller, now)
    queued = record_events(settings, keys, events)
    return {"action": report.action, "event_ids": [e["event_id"] for e in events], "queued": queued}


def _checked(keys: Any, index: int, text: str, lifetime: float, now: float, caller: str) -> Cite:
    field = f"cites.{index}"
    try:
        cite = read_cite(keys, text, lifetime, now)
    except CiteError as exc:
        status, slug = {"expired": (410, "cite-expired"), "forged": (403, "cite-forged")}.get(
            exc.reason, (422, "cite-malformed")
        )
        raise ProblemError(
            status,
            slug,
            "Cite refused",
            f"{field}: {exc}",
            extra={"field": field, "value": cut(text), "valid": "a cite from a recent answer"},
        ) from None
    if cite.client != caller:
        raise ProblemError(
            403,
            "cite-not-yours",
            "Cite refused",
            f"{field}: made for another caller's answer (another API key or profile)",
            extra={"field": field, "value": cut(text), "valid": "a cite from your own answer"},
        )
    return cite


def _events(action: Any, cites: list[Cite], caller: str, now: float) -> list[EventRecord]:
    if action in QUERY_ACTIONS:
        answers = dict.fromkeys(c.ranking_id for c in cites)  # one per answer, in order
        return [
            reported_event(action, ranking_id, caller, _event_id(action, ranking_id), None, now)
            for ranking_id in answers
        ]
    unique = {(c.ranking_id, c.page, c.position): c for c in cites}
    return [
        reported_event(
            action,
            c.ranking_id,
            caller,
            _event_id(action, c.ranking_id, c.page, c.position),
            c,
            now,
        )
        for c in unique.values()
    ]


def _event_id(action: str, ranking_id: str, *place: int) -> str:
    """The same action on the same row (or answer) is the same event, whoever sends it
    twice: a reader drops the repeat."""
    text = "\x00".join((action, ranking_id, *map(str, place)))
    return hashlib.sha256(text.encode()).hexdigest()[:32]
