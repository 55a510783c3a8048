"""A refused request, in terms every transport maps to its own form.

:class:`ProblemError` carries an HTTP status and an RFC 9457 problem's fields: the
service writes it as problem+json, the MCP server as a tool error, ``nautilus-ranking query``
as a message and an exit code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from nautilus_ranking.errors import NautilusError, Problem


@dataclass(eq=False)  # an exception compares and hashes by identity
class ProblemError(NautilusError):
    """Raised anywhere in a request; the app turns it into a problem+json response."""

    status: int
    slug: str
    title: str
    detail: str
    extra: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.status} {self.title}: {self.detail}"


def invalid(problems: list[Problem]) -> ProblemError:
    """422 naming every bad field (a problem's ``name``), its value and the valid choices."""
    first = problems[0]
    return ProblemError(
        422,
        "invalid-request",
        "Invalid request",
        "; ".join(p.message for p in problems),
        extra={
            "field": first.name,
            "value": first.value,
            "valid": first.valid,
            "errors": [
                {"field": p.name, "value": p.value, "reason": p.reason, "valid": p.valid}
                for p in problems
            ],
        },
    )
