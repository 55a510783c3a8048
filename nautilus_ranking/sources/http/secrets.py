"""Credentials of an HTTP source, masked wherever they could be shown (logs, errors,
``config`` listings, ``repr``), as a DSN's password is.

Every header value is a secret (an ``Authorization`` or ``X-API-Key`` header is the
usual place for one, and a masked harmless header costs nothing). In a URL, the
``user:password@`` part and every query parameter named like a key, a token, a secret, a
password or a signature (``?x-typesense-api-key=``, ``&sig=``) are masked too.
"""

from __future__ import annotations

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


def mask_url(url: str) -> str:
    """``url`` with its password and credential-like query parameters as ``***``."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    head, hash_sep, fragment = rest.partition("#")
    authority_end = min((i for i in (head.find("/"), head.find("?")) if i >= 0), default=len(head))
    authority, tail = head[:authority_end], head[authority_end:]
    at = authority.rfind("@")
    if at >= 0:
        userinfo, host = authority[:at], authority[at + 1 :]
        user, colon, _ = userinfo.partition(":")
        authority = f"{user}{':' + MASK if colon else ''}@{host}"
    path, qmark, query = tail.partition("?")
    if qmark:
        parts = []
        for part in query.split("&"):
            name, eq, _value = part.partition("=")
            parts.append(
                f"{name}={MASK}" if eq and SECRET_PARAMETER.search(unquote(name)) else part
            )
        query = "&".join(parts)
    return f"{scheme}{sep}{authority}{path}{qmark}{query}{hash_sep}{fragment}"


def url_secrets(url: str) -> list[str]:
    """The credential values written in ``url`` (its password, secret parameters)."""
    found = []
    masked = mask_url(url)
    if masked != url:
        scheme_end = url.find("://") + 3 if "://" in url else 0
        rest = url[scheme_end:]
        authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
        if "@" in authority:
            userinfo = authority[: authority.rfind("@")]
            if ":" in userinfo:
                found.append(userinfo.split(":", 1)[1])
        query = rest.partition("?")[2].partition("#")[0]
        for part in query.split("&"):
            name, eq, value = part.partition("=")
            if eq and value and SECRET_PARAMETER.search(unquote(name)):
                found.append(value)
    return [s for s in found if s]


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret (and its URL-decoded form) replaced by ``***``."""
    for secret in sorted({s for s in secrets if len(s) >= MIN_SCRUBBED}, key=len, reverse=True):
        text = text.replace(secret, MASK)
        decoded = unquote(secret)
        if decoded != secret and len(decoded) >= MIN_SCRUBBED:
            text = text.replace(decoded, MASK)
    return text
