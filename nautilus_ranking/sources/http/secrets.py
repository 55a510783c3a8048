"""Credentials of an HTTP source, masked wherever they could be shown (logs, errors,
``config`` listings, ``repr``), as a DSN's password is.

Every header value is a secret (an ``Authorization`` or ``X-API-Key`` header is the
usual place for one, and a masked harmless header costs nothing). In a URL, the
``user:password@`` part and every query parameter named like a key, a token, a secret, a
password or a signature (``?x-typesense-api-key=``, ``&sig=``) are masked too.

An engine that refuses a credential may quote it back in its error, and not as it was
sent: the bare token of ``Bearer X``, the key of ``ApiKey K`` (and, when ``K`` is
base64 of ``id:key``, as Elasticsearch's are, the pair and each half), the password of
a basic pair and the base64 pair itself. :func:`credential_forms` lists each of these,
and :class:`Masker` masks them all, before a message is cut to its length (a cut
through a secret would leave its start showing).
"""

from __future__ import annotations

import base64
import binascii
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


def credential_forms(value: str) -> list[str]:
    """``value`` (a header's or a URL's secret) and the forms an engine may quote of it:
    the part after a scheme word, and what a base64 ``user:password`` pair holds."""
    forms = [value]
    scheme, space, bare = value.strip().partition(" ")
    bare = bare.strip() if space else scheme
    if bare != value:
        forms.append(bare)
    try:
        pair = base64.b64decode(bare, validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return forms
    name, colon, secret = pair.partition(":")
    if colon and pair.isprintable():
        forms += [pair, secret]
        if scheme.lower() != "basic":  # an API key's id:key pair: both halves are its own
            forms.append(name)
    return forms


class Masker:
    """Masks one source's secrets in free text, every form of each (built once)."""

    def __init__(self, secrets: Iterable[str]) -> None:
        forms = {form for secret in secrets for form in credential_forms(secret)}
        forms |= {unquote(form) for form in forms}
        self.forms = sorted((f for f in forms if len(f) >= MIN_SCRUBBED), key=len, reverse=True)
        self.longest = len(self.forms[0]) if self.forms else 0

    def __call__(self, text: str) -> str:
        for form in self.forms:
            if form in text:
                text = text.replace(form, MASK)
        return text

    def cut(self, text: str, length: int) -> str:
        """``text`` masked, then cut to at most ``length`` characters: what is masked is
        a window ``longest`` characters past the cut, so a secret straddling the cut is
        masked whole, and the window's own last ``longest`` characters (where a secret
        cut by the window may start) are never shown."""
        if len(text) <= length + self.longest:
            return self(text)[:length]
        masked = self(text[: length + self.longest])
        return masked[: min(length, len(masked) - self.longest)]


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
