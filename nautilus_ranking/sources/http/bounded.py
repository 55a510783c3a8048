"""An answer's body read within a cap, whatever its content coding claims.

A compression bomb is a few kB on the wire that inflates to gigabytes: counting bytes
after a library has inflated a whole chunk counts too late (a 1.8 kB chunk of
``gzip, gzip`` is 2 GB in one call). So the body is read *raw* (its bytes on the wire
count against the cap), and each coding is then undone here, in steps of at most what
is left of the cap: no step inflates past it, and the first byte over is refused.

Only the codings that can be bounded this way are offered (``Accept-Encoding``:
:data:`ACCEPT_ENCODING`, gzip and deflate, from the standard library), on every install
alike; an answer in any other coding (zstd, br) was not asked for and is refused, never
decoded.
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Any

from nautilus_ranking.errors import NautilusError

if TYPE_CHECKING:
    import httpx

#: The codings the client offers and undoes itself, each bounded as it inflates.
ACCEPT_ENCODING = "gzip, deflate"
_WBITS = {"gzip": 31, "x-gzip": 31, "deflate": 15}
_GZIP_MAGIC = b"\x1f\x8b"


class BodyError(NautilusError, ValueError):
    """A body that cannot be read as it is."""


class TooLargeError(BodyError):
    """A body past its cap (``what``: declared, streamed, or inflated)."""

    def __init__(self, cap: int, what: str) -> None:
        super().__init__(f"larger than {cap:,} bytes ({what})")
        self.cap, self.what = cap, what


class EncodingError(BodyError):
    """A body in a content coding not offered, or one that does not decode."""


def codings(header: str) -> list[str]:
    """The codings of a ``Content-Encoding`` value, in the order they were applied;
    an :class:`EncodingError` for one that was not offered."""
    applied = [c.strip().lower() for c in header.split(",") if c.strip()]
    applied = [c for c in applied if c != "identity"]
    for coding in applied:
        if coding not in _WBITS:
            raise EncodingError(
                f"in content coding {coding[:40]!r}, which was not offered "
                f"(Accept-Encoding: {ACCEPT_ENCODING})"
            )
    return applied


async def read_capped(
    response: httpx.Response, cap: int, progress: list[int] | None = None
) -> bytes:
    """The body of a streamed ``response``, its codings undone, refused past ``cap``
    bytes on the wire or inflated (a declared ``Content-Length`` past it is refused
    before reading); ``progress[0]`` counts the bytes read so far (for a deadline's
    message)."""
    applied = codings(response.headers.get("content-encoding", ""))
    declared = response.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and int(declared) > cap:
        raise TooLargeError(cap, f"{int(declared):,} declared")
    raw = bytearray()
    async for chunk in response.aiter_raw():
        raw += chunk
        if progress is not None:
            progress[0] = len(raw)
        if len(raw) > cap:
            raise TooLargeError(cap, "more streamed")
    body = bytes(raw)
    for coding in reversed(applied):
        body = inflate(body, coding, cap)
    return body


def inflate(data: bytes, coding: str, cap: int) -> bytes:
    """``data`` undone from ``coding`` (gzip: every member), in steps of at most what is
    left of ``cap``; a :class:`TooLargeError` at the first byte past it."""
    wbits = _WBITS[coding]
    if wbits == 15 and not _zlib_wrapped(data):
        wbits = -15  # deflate sent raw, as some servers do
    out = bytearray()
    pending = data
    try:
        while pending:
            inflater = zlib.decompressobj(wbits)
            while pending:
                out += inflater.decompress(pending, cap + 1 - len(out))
                if len(out) > cap:
                    raise TooLargeError(cap, "inflated")
                pending = inflater.unconsumed_tail
                if inflater.eof:
                    break
            rest = inflater.unused_data
            pending = rest if wbits == 31 and rest.startswith(_GZIP_MAGIC) else b""
    except zlib.error as exc:
        raise EncodingError(f"but its {coding} body does not decode ({exc})") from None
    return bytes(out)


def _zlib_wrapped(data: bytes) -> bool:
    """Whether ``data`` starts with a zlib header (RFC 1950), not a raw deflate stream."""
    return len(data) >= 2 and data[0] & 0x0F == 8 and (data[0] << 8 | data[1]) % 31 == 0


def too_deep(value: Any, cap: int) -> bool:
    """Whether a parsed JSON value nests containers deeper than ``cap`` (level by level:
    each container visited once, twice as fast as a stack of pairs on a 30-hit answer)."""
    level = [value] if type(value) in (dict, list) else []
    depth = 1
    while level:
        if depth > cap:
            return True
        deeper = []
        for item in level:
            for child in item.values() if type(item) is dict else item:
                kind = type(child)
                if kind is dict or kind is list:
                    deeper.append(child)
        level = deeper
        depth += 1
    return False
