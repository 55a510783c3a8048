"""What an error message quotes of an engine's answer: its error's own words, or the
start of its body, masked before it is cut (``secrets.Masker.cut``) so that no cut
leaves a credential's start showing."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nautilus_ranking.sources.http.secrets import Masker

if TYPE_CHECKING:
    import httpx

#: What of an error body a message quotes.
SHOWN_CHARS = 200
#: What of a body that is not JSON a message quotes.
SNIPPET_CHARS = 80


def origin(url: httpx.URL) -> str:
    """``scheme://host[:port]``: what a redirect may not leave with credentials."""
    return f"{url.scheme}://{url.host}" + (f":{url.port}" if url.port else "")


def text_of(exc: BaseException) -> str:
    """An exception's message (its type's name when it has none or its ``str`` raises)."""
    try:
        return str(exc) or type(exc).__name__
    except Exception:  # an exception whose str raises
        return type(exc).__name__


def snippet(raw: bytes, mask: Masker) -> str:
    """The start of a body, whitespace folded, masked, quoted."""
    text = raw[: SNIPPET_CHARS + mask.longest].decode("utf-8", "replace")
    return repr(mask.cut(" ".join(text.split()), SNIPPET_CHARS))


def error_detail(value: Any, raw: bytes, mask: Masker) -> str:
    """What an engine's error body says: Elasticsearch's ``error.type: reason``,
    Typesense's ``message``, a ``detail``; else the body's start. Masked before it is
    cut (``Masker.cut``)."""
    if isinstance(value, dict):
        error = value.get("error")
        if isinstance(error, dict):
            kind, reason = error.get("type"), error.get("reason")
            if kind or reason:
                kind = mask.cut(str(kind or "error"), SNIPPET_CHARS)
                return f"{kind}: {mask.cut(str(reason or ''), SHOWN_CHARS)}"
        for key in ("message", "detail", "error"):
            if isinstance(value.get(key), str):
                return mask.cut(str(value[key]), SHOWN_CHARS)
    return f"body {snippet(raw, mask) if raw else '(empty)'}"
