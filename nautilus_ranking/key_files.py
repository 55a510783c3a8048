"""A secret key file made once and shared: the cursor keys' and the vector cache's.

Written whole to a file of this process's own (mode 0600) and hard-linked into place,
so a reader never sees half a key and two processes racing agree on the one linked
first. Each caller reads the file back with its own checks."""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path


def link_new_key(path: Path, key_bytes: int) -> None:
    """Put a new random key of ``key_bytes`` (hex, one line) at ``path`` unless another
    process linked one there first; ``path``'s folder exists."""
    own = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(own, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(secrets.token_hex(key_bytes).encode() + b"\n")
            out.flush()
            os.fsync(out.fileno())
        with contextlib.suppress(FileExistsError):  # another process linked its key first
            os.link(own, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(own)
