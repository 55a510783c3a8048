"""Seed files: JSON lines read safely, checked, and hashed (the SQLite builds and
``nautilus-ranking load`` share them)."""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import stat as stat_kind
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from nautilus_ranking.errors import NautilusError
from nautilus_ranking.sources.base import Row


class SeedError(NautilusError, ValueError):
    """A seed file that cannot be used: missing, not JSON lines, empty, or lacking a field."""


#: The longest seed line read (bytes): a file with no line end is refused at this
#: size instead of being read whole into memory.
MAX_SEED_LINE_BYTES = 16 << 20
_KINDS = (
    (stat_kind.S_ISDIR, "a directory"),
    (stat_kind.S_ISFIFO, "a named pipe"),
    (stat_kind.S_ISCHR, "a character device"),
    (stat_kind.S_ISBLK, "a block device"),
    (stat_kind.S_ISSOCK, "a socket"),
)


class FileRefusedError(NautilusError, ValueError):
    """An operator's file that is not read: missing, not a regular file, or too large."""


class OpenToOthersError(FileRefusedError):
    """A file that holds a secret, refused because others on the host may read or write it."""


def open_seed(
    path: Path, what: str = "seed file", expected: str = "a seed is a regular JSON-lines file"
) -> BinaryIO:
    """A seed (or another operator's file, ``what``) opened for reading, refused unless it
    is a regular file: a device or a pipe never ends (``/dev/zero``) or blocks until a
    writer comes (a FIFO). A :class:`SeedError` for a seed, else :class:`FileRefusedError`."""
    error = SeedError if what == "seed file" else FileRefusedError
    try:  # O_NONBLOCK: opening a FIFO does not wait for a writer; no effect on a file
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise error(f"{what} {path} not found") from None
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    mode = os.fstat(fd).st_mode
    if not stat_kind.S_ISREG(mode):
        os.close(fd)
        kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
        raise error(f"{what} {path} is {kind}; {expected}")
    return os.fdopen(fd, "rb")


def refuse_unless_owner_only(handle: BinaryIO, path: Path, what: str) -> None:
    """Refuse a secret (the API keys file, the cursor key) that others on the host may
    read or write: whoever reads it holds every key, or signs cursors. Owner-only means no
    permission for others and, unless root owns the file (as a Kubernetes Secret volume
    with ``fsGroup`` mounts it; PostgreSQL's rule for its key), none for the group."""
    if os.name != "posix":  # no POSIX modes to read: the platform's own ACLs decide
        return
    found = os.fstat(handle.fileno())
    forbidden = 0o007 if found.st_uid == 0 else 0o077
    mode = stat_kind.S_IMODE(found.st_mode)
    if mode & forbidden:
        raise OpenToOthersError(
            f"{what} {path} is open to others (mode {mode:04o}) but holds a secret; "
            f"make it owner-only: chmod 600 {path}"
        )


def read_text_file(
    path: Path, what: str, max_bytes: int, expected: str, secret: bool = False
) -> str:
    """The whole of an operator's text file (eval queries and judgments, a manifest, the
    API keys file) as :func:`open_seed` opens a seed: a regular file only, at most
    ``max_bytes`` (never read past them), strict UTF-8, a leading BOM dropped; ``secret``:
    owner-only too (:func:`refuse_unless_owner_only`). Every refusal is a
    :class:`FileRefusedError` naming the file and ``what`` it should be."""
    with open_seed(Path(path), what, expected) as handle:
        if secret:
            refuse_unless_owner_only(handle, Path(path), what)
        raw = handle.read(max_bytes + 1)
    if len(raw) > max_bytes:
        raise FileRefusedError(f"{what} {path} is larger than {max_bytes:,} bytes; {expected}")
    try:
        return raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise FileRefusedError(
            f"{what} {path}:{line}: not valid UTF-8 (byte 0x{raw[exc.start]:02x})"
        ) from None


def read_jsonl(path: Path) -> Iterator[Row]:
    """The objects of a JSON-lines file; blank lines skipped, a bad line is a clear error."""
    if path.suffix.lower() in {".csv", ".tsv"}:
        raise SeedError(
            f"{path}: seeds are JSON lines (one JSON object a line), not CSV; "
            'convert it, e.g. with: python -c "import csv,json,sys; '
            '[print(json.dumps(r)) for r in csv.DictReader(sys.stdin)]" '
            "< in.csv > out.jsonl"
        )
    with open_seed(path) as handle:
        for number, raw in enumerate(
            iter(lambda: handle.readline(MAX_SEED_LINE_BYTES + 1), b""), start=1
        ):
            if len(raw) > MAX_SEED_LINE_BYTES:
                raise SeedError(
                    f"{path}:{number}: line longer than {MAX_SEED_LINE_BYTES} "
                    "bytes; seeds are JSON lines, one object a line"
                )
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise SeedError(f"{path}:{number}: not valid UTF-8") from None
            if number == 1:  # a byte-order mark, as editors on Windows write one
                line = line.removeprefix("\ufeff")
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except (ValueError, RecursionError) as exc:  # ValueError: past the digit limit
                reason = (
                    exc.msg
                    if isinstance(exc, json.JSONDecodeError)
                    else "nested too deeply"
                    if isinstance(exc, RecursionError)
                    else str(exc).split(";")[0][:120]
                )
                raise SeedError(
                    f"{path}:{number}: not valid JSON ({reason}); seeds are "
                    "JSON lines, one object a line"
                ) from None
            if not isinstance(value, dict):
                raise SeedError(
                    f"{path}:{number}: expected a JSON object, got {type(value).__name__}"
                )
            yield value


def load_seed(
    path: Path,
    columns: Iterable[str] = (),
    every_row: Iterable[str] = (),
    allow_empty: bool = False,
) -> list[Row]:
    """A seed's rows, checked: not empty, ``columns`` present in some row, ``every_row``
    fields present in each row. Every failure is a :class:`SeedError` naming the file."""
    rows = list(read_jsonl(path))
    if not rows and not allow_empty:
        raise SeedError(f"seed file {path} has no rows")
    fields = list(dict.fromkeys(k for row in rows for k in row))
    for name in columns:
        if name not in fields:
            close = difflib.get_close_matches(name, fields, n=1, cutoff=0.6)
            hint = f" — did you mean {close[0]!r}?" if close else ""
            raise SeedError(
                f"seed file {path} has no field {name!r}{hint} (fields: {', '.join(fields[:30])})"
            )
    required = list(every_row)
    for number, row in enumerate(rows, start=1):
        missing = [name for name in required if row.get(name) is None]
        if missing:
            raise SeedError(f"seed file {path}: row {number} has no {missing[0]!r}")
    return rows


#: The integers SQLite stores as integers (a seed's larger ones are stored as text).
SQLITE_INTEGERS = (-(1 << 63), (1 << 63) - 1)


def sqlite_value(value: object) -> object:
    """A seed value as SQLite can store it: an integer past 64 bits as its digits (SQLite
    refuses it, and every query of the source would fail), a string's lone surrogates
    (JSON's ``"\\ud800"``, not UTF-8) as U+FFFD; anything else as it is."""
    if (
        isinstance(value, int)
        and not isinstance(value, bool)
        and not (SQLITE_INTEGERS[0] <= value <= SQLITE_INTEGERS[1])
    ):
        return str(value)
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return value


def id_problem(path: Path, rows: list[Row], id_field: str) -> str | None:
    """What is wrong with the ids of a seed's rows (None: every row has one): how many lack
    ``id_field``, and the fields that could be the id instead (in every row, unique)."""
    missing = sum(1 for row in rows if row.get(id_field) is None)
    if not missing:
        return None
    candidates = [
        name
        for name in dict.fromkeys(k for row in rows for k in row)
        if _unique_everywhere(rows, name)
    ]
    hint = (
        f"; set id_field to the seed's id field (unique in every row: {', '.join(candidates[:5])})"
        if candidates
        else "; give every row an id, or set id_field to the field that is one"
    )
    return (
        f"{missing} of {len(rows)} rows of {path} have no {id_field!r} (the id_field): "
        f"their id is null in every answer{hint}"
    )


def _unique_everywhere(rows: list[Row], name: str) -> bool:
    seen = set()
    for row in rows:
        value = row.get(name)
        if value is None or isinstance(value, dict | list | bool | float):
            return False
        key = (type(value).__name__, value)
        if key in seen:
            return False
        seen.add(key)
    return True


def file_digest(paths: Iterable[Path]) -> str:
    """sha256 over the contents of ``paths`` (streamed)."""
    digest = hashlib.sha256()
    for path in paths:
        with open_seed(path) as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        digest.update(b"\x00")
    return digest.hexdigest()
