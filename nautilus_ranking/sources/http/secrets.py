"""Credentials of an HTTP source, masked wherever they could be shown (logs, errors,
``config`` listings, ``repr``), as a DSN's password is.

Every header value is a secret (an ``Authorization`` or ``X-API-Key`` header is the
usual place for one, and a masked harmless header costs nothing). In a URL, the
``user:password@`` part and every query parameter named like a key, a token, a secret, a
password or a signature (``?x-typesense-api-key=``, ``&sig=``) are masked too.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from urllib.parse import unquote

MASK = "***"
#: Query parameters whose value is a credential (matched anywhere in the name).
SECRET_PARAMETER = re.compile(
    r"key|token|secret|passw|pwd|signature|sig$|credential|auth", re.IGNORECASE
)
#: A secret shorter than this is not searched for in free text (it would mask words).
MIN_SCRUBBED = 4


_PARTS = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*://)?([^?#]*)(\?[^#]*)?(#.*)?$", re.S)


def _split(url: str) -> tuple[str, str, str, str, tuple[int, int] | None]:
    """(scheme, authority and path, ``?query``, ``#fragment``, the password's span in
    the second part). Erring wide, as a DSN is masked: the password runs from the ``:``
    after the user name to the *last* ``@`` before the query (a password with an
    unencoded ``/`` or ``@`` is still all masked)."""
    match = _PARTS.match(url)
    if match is None:  # pragma: no cover - the pattern matches any string
        return "", url, "", "", None
    scheme, head, query, fragment = (g or "" for g in match.groups())
    at = head.rfind("@")
    colon = head.find(":", 0, at) if at >= 0 else -1
    span = (colon + 1, at) if colon >= 0 and "/" not in head[:colon] else None
    return scheme, head, query, fragment, span


def _secret_parameters(query: str) -> list[tuple[str, str]]:
    """``(name, value)`` of each query parameter named like a credential."""
    found = []
    for part in query.lstrip("?").split("&"):
        name, eq, value = part.partition("=")
        if eq and SECRET_PARAMETER.search(unquote(name)):
            found.append((name, value))
    return found


def mask_url(url: str) -> str:
    """``url`` with its password and credential-like query parameters as ``***``."""
    scheme, head, query, fragment, span = _split(url)
    if span is not None:
        head = head[: span[0]] + MASK + head[span[1] :]
    if query:
        secret = {name for name, _ in _secret_parameters(query)}
        query = "?" + "&".join(
            f"{part.partition('=')[0]}={MASK}" if part.partition("=")[0] in secret else part
            for part in query[1:].split("&")
        )
    return f"{scheme}{head}{query}{fragment}"


def url_secrets(url: str) -> list[str]:
    """The credential values written in ``url`` (its password, secret parameters)."""
    _, head, query, _, span = _split(url)
    found = [head[span[0] : span[1]]] if span is not None else []
    found += [value for _, value in _secret_parameters(query)]
    return [s for s in found if s]


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret (and its URL-decoded form) replaced by ``***``."""
    for secret in sorted({s for s in secrets if len(s) >= MIN_SCRUBBED}, key=len, reverse=True):
        text = text.replace(secret, MASK)
        decoded = unquote(secret)
        if decoded != secret and len(decoded) >= MIN_SCRUBBED:
            text = text.replace(decoded, MASK)
    return text


_URL = re.compile(r"https?://[^\s\"'<>]+")


class MaskUrls(logging.Filter):
    """A stdlib log record's URLs masked (httpx logs every request's URL at INFO): the
    message is rendered, masked and kept without its arguments."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = _URL.sub(lambda m: mask_url(m.group(0)), message)
        if masked != message:
            record.msg, record.args = masked, None
        return True


def mask_library_logs() -> None:
    """Mask URLs in what httpx and httpcore log (once; a second call adds nothing)."""
    for name in ("httpx", "httpcore"):
        target = logging.getLogger(name)
        if not any(isinstance(f, MaskUrls) for f in target.filters):
            target.addFilter(MaskUrls())
