"""Who asked and what, as the feedback log may keep it: keyed hashes, not text.

A plain hash of a query or a profile name can be tested against guesses by anyone who
reads the log; an HMAC under the cursor key (``request/cursor_keys.py``, its own
purpose string) cannot, without the key. ``NAUTILUS_FEEDBACK_TEXT`` keeps the query's
text and the profile's name instead; an API key is never kept, only its keyed hash.
"""

from __future__ import annotations

import hashlib
from typing import Any

from nautilus_ranking.feedback.cites import Signer

#: The purpose the keyed hashes are made under (apart from a cite's or a cursor's tags).
FEEDBACK_HASH_PURPOSE = b"nautilus-ranking feedback hash\x00"

#: What a keyed hash starts with (then 32 hex digits: 128 bits of HMAC-SHA256).
KEYED_PREFIX = "hmac:"
#: The caller when there are neither API keys nor a profile.
ANONYMOUS = "anonymous"
#: The longest row id logged and cited as itself; a longer one is its digest.
MAX_OBJECT_ID_CHARS = 200


def keyed_hash(keys: Signer, kind: str, text: str) -> str:
    """``hmac:`` and 32 hex digits of ``text`` under the keys, apart per ``kind``."""
    tag = keys.sign_for(FEEDBACK_HASH_PURPOSE, kind.encode() + b"\x00" + text.encode())
    return KEYED_PREFIX + tag.hex()


def client_id(keys: Signer, api_key: bytes | None, profile: str | None) -> str:
    """Who asked: the API key's keyed hash; without keys the profile's; else anonymous.
    A cite is accepted only from the client it names."""
    if api_key is not None:
        return keyed_hash(keys, "key", api_key.decode("utf-8", "replace"))
    if profile is not None:
        return keyed_hash(keys, "profile", profile)
    return ANONYMOUS


def shown(keys: Signer, kind: str, text: str | None, plain: bool) -> str | None:
    """``text`` as the log keeps it: itself when ``plain``, else its keyed hash."""
    if text is None or plain:
        return text
    return keyed_hash(keys, kind, text)


def object_id(row: Any) -> str:
    """A row's id as the log and its cite name it: ``str`` of its ``id`` (``""``
    without one), a digest past :data:`MAX_OBJECT_ID_CHARS`."""
    raw = row.get("id") if isinstance(row, dict) else None
    text = "" if raw is None else str(raw)
    if len(text) > MAX_OBJECT_ID_CHARS:
        return "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:32]
    return text
