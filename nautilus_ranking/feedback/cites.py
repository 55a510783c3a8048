"""A row's ``cite`` handle: which answer, page, position and row it is, signed.

A feedback event names the row it means by the handle its answer gave: the server keeps
no state of what it handed over, and the handle proves it. It is ``c1.`` then URL-safe
base64 of a small JSON array (ranking id, page, position, source, row id, profile,
caller, time made) then ``.`` and its tag, HMAC-SHA256 under the cursor keys and a
purpose string of its own (``CITE_PURPOSE``): a cursor's tag or a ranking hash's
signature never passes as a cite's. Nothing of a handle is read before its tag checks
out; a forged or altered one is refused, and so is one older than
``NAUTILUS_FEEDBACK_CITE_LIFETIME_DAYS``.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass, fields
from typing import Protocol

from nautilus_ranking.errors import NautilusError

#: The purpose a handle is signed under: no other tag of the cursor keys passes as one.
CITE_PURPOSE = b"nautilus-ranking cite\x00"
#: Bytes of a handle's tag (128 bits of HMAC-SHA256, as a cursor's).
TAG_BYTES = 16


class Signer(Protocol):
    """What signs and checks handles: the cursor keys (``request/cursor_keys.py``)."""

    def sign_for(self, purpose: bytes, body: bytes) -> bytes: ...

    def verify_for(self, purpose: bytes, tag: bytes, body: bytes) -> bool: ...


#: What a handle starts with (its format's version).
CITE_PREFIX = "c1."
#: The longest handle read (one nautilus makes is well under it).
MAX_CITE_CHARS = 1024
#: How far a handle's time may be ahead of this process's clock (replicas' clocks differ).
_CLOCK_SKEW_S = 300
_BASE64 = re.compile(r"[A-Za-z0-9_-]+")


@dataclass(frozen=True)
class Cite:
    """What a handle carries."""

    ranking_id: str
    page: int
    position: int
    source: str
    row_id: str
    #: The profile that ranked the answer (None: the global knobs).
    profile: str | None
    #: The caller whose answer made it (``identity.client_id``).
    client: str
    #: When it was made (Unix seconds).
    issued: int


_FIELDS = tuple(f.name for f in fields(Cite))
_JSON = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


class CiteError(NautilusError, ValueError):
    """A handle refused: ``reason`` is ``malformed``, ``forged`` or ``expired``."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


def make_cite(keys: Signer, cite: Cite) -> str:
    """The signed handle of ``cite``."""
    values = [getattr(cite, name) for name in _FIELDS]  # not astuple(): it deep-copies
    body = _JSON.encode(values).encode()
    tag = keys.sign_for(CITE_PURPOSE, body)
    return CITE_PREFIX + _encode(body) + "." + _encode(tag)


def read_cite(keys: Signer, handle: object, lifetime_s: float, now: float) -> Cite:
    """The cite ``handle`` carries, once its tag checks out and it is younger than
    ``lifetime_s``; a :class:`CiteError` otherwise."""
    if not isinstance(handle, str) or len(handle) > MAX_CITE_CHARS:
        raise CiteError("malformed", f"not a cite handle (a string of at most {MAX_CITE_CHARS})")
    if not handle.startswith(CITE_PREFIX) or handle.count(".") != 2:
        raise CiteError("malformed", "not a cite handle an answer gave (it starts with c1.)")
    encoded_body, encoded_tag = handle[len(CITE_PREFIX) :].split(".")
    try:
        body, tag = _decode(encoded_body), _decode(encoded_tag)
    except (binascii.Error, ValueError):
        raise CiteError("malformed", "not a cite handle an answer gave (bad base64)") from None
    if len(tag) != TAG_BYTES or not keys.verify_for(CITE_PURPOSE, tag, body):
        raise CiteError("forged", "not a cite handle this server made (its signature fails)")
    cite = Cite(*json.loads(body))  # signed by us: the shape is ours
    if not -_CLOCK_SKEW_S <= now - cite.issued <= lifetime_s:
        raise CiteError(
            "expired",
            f"made {max(0, int(now - cite.issued)) // 86400} day(s) ago, over the lifetime of "
            f"{lifetime_s / 86400:g} day(s) (NAUTILUS_FEEDBACK_CITE_LIFETIME_DAYS)",
        )
    return cite


def _encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _decode(text: str) -> bytes:
    if not _BASE64.fullmatch(text):
        raise ValueError(text)
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if _encode(raw) != text:  # one text per bytes: an altered last character never passes
        raise ValueError(text)
    return raw
