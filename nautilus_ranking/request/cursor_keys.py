"""The key that signs cursors, so a caller cannot forge or alter one.

A cursor is handed back by a caller; every field of it (its page, its page size, the
ranking it belongs to) is trusted only once its HMAC-SHA256 tag checks out
(``hmac.compare_digest``). The key is:

- ``NAUTILUS_CURSOR_KEY`` when set: what replicas behind one load balancer share, so
  any of them honours a cursor another made. To rotate it, set the new key there and
  the old one in ``NAUTILUS_CURSOR_PREVIOUS_KEYS`` on every replica, and drop the old
  one once the last cursor signed with it is of no use (a cursor is refused anyway when
  its sources' answers change);
- else a key file, ``cursor.key`` in ``NAUTILUS_DATA_DIR``, made once (32 random bytes,
  owner-only, written whole under another name and linked into place, so processes
  that start together agree on one key): ``nautilus-ranking query``, ``serve`` and
  ``mcp`` on one machine honour each other's cursors;
- else, when the data directory cannot hold the file, a key of this process alone
  (warned once: its cursors work only in this process).

The key file is read as the operator's other files are — a regular file only (a FIFO
would block, ``/dev/zero`` never end), a few bytes at most — and, as the API keys file,
owner-only: whoever can read it signs cursors, so one open to others is refused (a
:class:`~nautilus_ranking.settings.model.ConfigError` naming the fix), never used.
Keys are read once per process and setting (:func:`cursor_keys` is cached); a server
reads them at start-up, so no request reads the file on the event loop.

Inside the Nautilus broker the same keys sign each ranked answer's ``ranking_hash``
(the order it hands over, which the broker's attestation does not cover), under a
purpose string of its own: a tag made for one can never pass as the other. So do an
answer's ``cite`` handles and the feedback log's keyed hashes
(:mod:`nautilus_ranking.feedback`), each under a purpose of its own
(:meth:`CursorKeys.sign_for`).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from nautilus_ranking.errors import Problem
from nautilus_ranking.key_files import link_new_key
from nautilus_ranking.log import get_logger
from nautilus_ranking.settings.model import ConfigError, NautilusSettings
from nautilus_ranking.sources.seeds import FileRefusedError, open_seed, refuse_unless_owner_only

logger = get_logger("nautilus_ranking.request")

#: The key file's name in ``NAUTILUS_DATA_DIR``.
KEY_FILE = "cursor.key"
#: Bytes of a tag a cursor carries (128 bits of HMAC-SHA256: forging one is a 2^-128 guess).
TAG_BYTES = 16
_KEY_BYTES = 32
#: The most a key file is read (bytes): nautilus writes 65; a longer one is not its own.
_MAX_FILE_BYTES = 4096
#: What a tag is computed over besides the cursor's body: a key used for something
#: else one day can never sign a cursor.
_PURPOSE = b"nautilus-ranking cursor\x00"
#: The purpose a ranked answer's ``ranking_hash`` is signed under (inside the broker).
RANKING_HASH_PURPOSE = b"nautilus-ranking ranking hash\x00"


@dataclass(frozen=True)
class CursorKeys:
    """The key that signs new cursors and the previous ones still accepted."""

    current: bytes
    previous: tuple[bytes, ...] = ()

    def sign(self, body: bytes) -> bytes:
        """The tag of ``body`` under the current key."""
        return _tag(self.current, body)

    def verify(self, tag: bytes, body: bytes) -> bool:
        """Whether ``tag`` is ``body``'s under the current key or a previous one."""
        return any(
            hmac.compare_digest(tag, _tag(key, body)) for key in (self.current, *self.previous)
        )

    def sign_ranking_hash(self, ranking_hash: str) -> str:
        """The signature of a ranked answer's ``ranking_hash``: the hex of its tag under
        the current key and :data:`RANKING_HASH_PURPOSE`."""
        return _tag(self.current, ranking_hash.encode(), RANKING_HASH_PURPOSE).hex()

    def verify_ranking_hash(self, signature: str, ranking_hash: str) -> bool:
        """Whether ``signature`` is ``ranking_hash``'s under the current key or a
        previous one (a cursor's tag never is)."""
        body = ranking_hash.encode()
        return any(
            hmac.compare_digest(signature, _tag(key, body, RANKING_HASH_PURPOSE).hex())
            for key in (self.current, *self.previous)
        )

    def sign_for(self, purpose: bytes, body: bytes) -> bytes:
        """The tag of ``body`` under the current key and ``purpose``."""
        return hmac.digest(self.current, purpose + body, "sha256")[:TAG_BYTES]

    def verify_for(self, purpose: bytes, tag: bytes, body: bytes) -> bool:
        """Whether ``tag`` is ``body``'s under ``purpose`` and the current key or a
        previous one."""
        return any(
            hmac.compare_digest(tag, _tag(key, body, purpose))
            for key in (self.current, *self.previous)
        )


def _tag(key: bytes, body: bytes, purpose: bytes = _PURPOSE) -> bytes:
    return hmac.new(key, purpose + body, hashlib.sha256).digest()[:TAG_BYTES]


def cursor_keys(settings: NautilusSettings) -> CursorKeys:
    """The keys of ``settings``: the key setting, else the data directory's key file (a
    :class:`ConfigError` when that file is refused)."""
    previous = tuple(k.encode() for k in settings.cursor_previous_keys)
    if settings.cursor_key is not None:
        return _configured(settings.cursor_key, previous)
    return _from_file(str(settings.data_dir.expanduser() / KEY_FILE), previous)


@lru_cache(maxsize=8)
def _configured(key: str, previous: tuple[bytes, ...]) -> CursorKeys:
    return CursorKeys(key.encode(), previous)


@lru_cache(maxsize=8)
def _from_file(path: str, previous: tuple[bytes, ...]) -> CursorKeys:
    try:
        return CursorKeys(read_or_create_key_file(Path(path)), previous)
    except FileRefusedError as exc:
        raise ConfigError(
            (
                Problem(
                    "NAUTILUS_DATA_DIR",
                    path,
                    str(exc),
                    "an owner-only regular file nautilus made (chmod 600; or delete it, and "
                    "a new key is made), or NAUTILUS_CURSOR_KEY",
                ),
            )
        ) from None
    except OSError as exc:
        logger.warning(
            "cursor_key_ephemeral",
            path=path,
            reason=f"{type(exc).__name__}: {exc.strerror or exc}",
            valid="a writable NAUTILUS_DATA_DIR, or NAUTILUS_CURSOR_KEY",
            effect="cursors are honoured by this process only",
        )
        return CursorKeys(secrets.token_bytes(_KEY_BYTES), previous)


def read_or_create_key_file(path: Path) -> bytes:
    """The key in ``path``, made first when there is none
    (:func:`~nautilus_ranking.key_files.link_new_key`). A file that is not a regular
    one, too large or open to others is a :class:`FileRefusedError`."""
    if os.path.lexists(path):
        return _read(path)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    link_new_key(path, _KEY_BYTES)
    return _read(path)


def _read(path: Path) -> bytes:
    what = "cursor key file"
    with open_seed(path, what, "a regular file nautilus made") as handle:
        refuse_unless_owner_only(handle, path, what)
        key = handle.read(_MAX_FILE_BYTES + 1).strip()
    if len(key) > _MAX_FILE_BYTES:
        raise FileRefusedError(f"{what} {path} is larger than {_MAX_FILE_BYTES} bytes")
    if len(key) < _KEY_BYTES:  # a truncated or emptied file: never a weak key
        raise OSError(f"{path}: holds {len(key)} bytes, not a key nautilus made")
    return key
