"""How nautilus tells an operator what is wrong.

:class:`NautilusError` is the base of every exception nautilus raises on purpose, so
``except nautilus.NautilusError`` catches them all. Each also keeps the built-in base
it had (``ValueError``, ``OSError``, ``ConnectionError``, ``RuntimeError``), so an
``except`` written for that still catches it.

:class:`Problem` is one bad value — a setting, a command-line flag, a field of an
HTTP request — with what an operator or a caller needs to fix it: where it was
given, the value as shown, why it is refused and the valid choices. The settings
log it and skip the value (or list it in a ``ConfigError``); the service returns it
in a problem+json body; the command line prints it.
"""

from __future__ import annotations

from dataclasses import dataclass

_MAX_SHOWN = 60


class NautilusError(Exception):
    """The base of nautilus' own exceptions; the message names what to fix."""


@dataclass(frozen=True)
class Problem:
    """One refused value: ``name`` is the variable, flag or request field it was given in."""

    name: str
    value: str
    reason: str
    valid: str

    @property
    def variable(self) -> str:
        """The name, as the settings call it (an environment variable or a flag)."""
        return self.name

    @property
    def message(self) -> str:
        return f"{self.name}: {self.value!r}: {self.reason} (valid: {self.valid})"


def cut(value: object) -> str:
    """A value as it may appear in a log or message: text, cut if long."""
    text = value if isinstance(value, str) else repr(value)
    return text[:_MAX_SHOWN] + "…" if len(text) > _MAX_SHOWN else text


def shown(value: object) -> str:
    """A value quoted for a reason string."""
    return repr(cut(value))
