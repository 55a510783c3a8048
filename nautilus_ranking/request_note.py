"""What a ranking stage says about one request beside the order, read once by the broker.

The ranking hands back rows; what a stage did besides (the confidence, the embedding
deadline, time) reaches the answer through a context variable that the broker reads
once the synthesizer returns. Reading clears it, so what an earlier request left in
the same context never reaches a later answer.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Generic, TypeVar

T = TypeVar("T")


class RequestNote(Generic[T]):
    """One stage's note for the request running in this context (None: nothing said)."""

    def __init__(self, name: str) -> None:
        self._var: ContextVar[T | None] = ContextVar(name, default=None)

    def keep(self, value: T | None) -> None:
        """Say ``value`` for this request (replacing what was said)."""
        self._var.set(value)

    def peek(self) -> T | None:
        """What was said, left in place (a later stage of the same ranking adds to it)."""
        return self._var.get()

    def taken(self) -> T | None:
        """What was said, forgotten once read."""
        value = self._var.get()
        if value is not None:
            self._var.set(None)
        return value
