"""Everything one broker request carries to the ranking, in one place: ``RequestScope``.

The broker (0.3) calls ``Synthesizer.merge(results)`` with no query and no context.
``merge`` runs in the task that awaits ``arequest`` (the broker's own server calls
``arequest``; ``request`` runs it on the broker's loop thread), so a context variable
the wrapper sets at the start of ``arequest`` is what ``merge`` sees, and concurrent
requests each see their own. ``merge`` leaves what it ranked on the scope; the wrapper
files it under the response's ``request_id``, which ``merge`` never sees.

Per-request inputs the ranking may read live on :class:`RequestScope` (the intent,
the calling ``agent_id``); add a new one there, not in a second context variable.

A ranked route or tool (:mod:`.ranked_answer`) opens a :func:`ranked_call` around the
broker's own handler: the wrapper hands that call the request's ranking directly, so a
served broker needs no store to answer in rank order.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nautilus_ranking.errors import NautilusError

if TYPE_CHECKING:
    from nautilus_ranking.upstream.outcome import RequestRanking


@dataclass
class RequestScope:
    """One request as the synthesizer sees it: its intent, the agent asking, and what
    ``merge`` made of it (None until it ran)."""

    intent: str
    agent_id: str | None = None
    outcome: RequestRanking | None = None


@dataclass
class RankedCall:
    """A ranked route's or tool's call: the ranking of the request it made (None until
    the broker answered, or when nothing was ranked), and the rows it asks for whole
    (by the handles of the passages an earlier answer gave of them)."""

    outcome: RequestRanking | None = None
    whole: tuple[str, ...] = ()
    #: Only the broker's caller checks, made by its own handler: the request they let
    #: through is not made (:class:`CallerChecked` is raised in its place).
    check_only: bool = False


class CallerChecked(NautilusError):
    """The broker's handler passed its caller checks and asked; a ``check_only`` call
    makes no request. A signal the feedback tool catches, never shown to a caller."""


_SCOPE: ContextVar[RequestScope | None] = ContextVar("nautilus_ranking_request", default=None)
_CALL: ContextVar[RankedCall | None] = ContextVar("nautilus_ranking_call", default=None)


def current_scope() -> RequestScope | None:
    """The request being answered in this context; None outside a wrapped ``arequest``."""
    return _SCOPE.get()


def current_call() -> RankedCall | None:
    """The ranked call waiting for this request's ranking; None outside one."""
    return _CALL.get()


@contextlib.contextmanager
def request_scope(intent: str, agent_id: str | None = None) -> Iterator[RequestScope]:
    """``intent``'s scope for the duration of the block (reset after, even on error)."""
    scope = RequestScope(intent if isinstance(intent, str) else str(intent), agent_id)
    token = _SCOPE.set(scope)
    try:
        yield scope
    finally:
        _SCOPE.reset(token)


@contextlib.contextmanager
def ranked_call(whole: tuple[str, ...] = (), check_only: bool = False) -> Iterator[RankedCall]:
    """A ranked call for the duration of the block: the broker request made inside it
    leaves its ranking on the call, and hands the rows ``whole`` names over whole;
    ``check_only``: the request is not made (see :class:`RankedCall`)."""
    call = RankedCall(whole=whole, check_only=check_only)
    token = _CALL.set(call)
    try:
        yield call
    finally:
        _CALL.reset(token)
