"""Reading judged queries: BEIR and TREC files, the format detected from the content.

Queries (``--queries``):

* BEIR ``queries.jsonl``: one ``{"_id": ..., "text": ...}`` a line (``id`` /
  ``query`` are accepted too);
* TREC topics: ``<top> <num> Number: 51 <title> ...`` blocks (the title is the query);
* TSV: ``query-id<TAB>text`` a line (MS MARCO style; a header line is skipped).

Judgments (``--judgments``):

* BEIR ``qrels/*.tsv``: ``query-id<TAB>corpus-id<TAB>score`` with a header line;
  a BEIR folder or its ``qrels`` folder is accepted (``test.tsv`` is used);
* TREC qrels: ``qid iteration docid grade`` separated by whitespace.

A grade is an integer from -:data:`MAX_GRADE` to :data:`MAX_GRADE`.

Every problem is an :class:`EvalInputError` naming the file, the line and what
was expected — never a traceback.
"""

from __future__ import annotations

import itertools
import math
import os
import re
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from nautilus_ranking.errors import NautilusError
from nautilus_ranking.sources.seeds import (
    FileRefusedError,
    open_seed,
    read_jsonl,
    read_text_file,
)


class EvalInputError(NautilusError):
    """A queries or judgments file that cannot be read as any supported format."""


@dataclass
class Judgments:
    """Graded judgments ``{query_id: {doc_id: grade}}`` and the format they were read as."""

    grades: dict[str, dict[str, int]]
    format: str
    repeated: int = 0  # (query, doc) pairs judged twice: the last line wins
    notes: list[str] = field(default_factory=list)
    elsewhere: list[str] = field(default_factory=list)  # judged queries not asked for


@dataclass
class Queries:
    """``{query_id: text}`` in file order, and the format they were read as."""

    texts: dict[str, str]
    format: str


#: The largest queries or judgments file read (bytes; MS MARCO's dev qrels are 1 MB).
MAX_EVAL_FILE_BYTES = 512 << 20

#: The longest judgments line read (bytes): a qrels line is a few ids and a grade.
MAX_JUDGMENT_LINE_BYTES = 64 << 10

#: The largest grade, either sign. Qrels grade on small scales (TREC -2..4, MS MARCO
#: 0..3, Cranfield 1..4); 100 leaves room for a percentage scale, and a grade past it
#: is a mistake (a 400-digit grade overflowed nDCG's float arithmetic).
MAX_GRADE = 100


def _read(path: Path) -> str:
    """The file's text: a regular file only (``/dev/zero`` never ends, a FIFO waits for a
    writer), at most :data:`MAX_EVAL_FILE_BYTES`, UTF-8."""
    if path.is_dir():
        raise EvalInputError(f"{path}: is a folder, expected a file")
    if not path.exists():
        raise EvalInputError(f"{path}: no such file")
    try:
        return read_text_file(
            path,
            "eval file",
            MAX_EVAL_FILE_BYTES,
            "expected a regular text file of queries or judgments",
        )
    except FileRefusedError as exc:
        raise EvalInputError(str(exc)) from None


# --- queries ----------------------------------------------------------------------------

# Each pattern runs in time linear in its input: no two adjacent parts can match the
# same characters (40,000 spaces after <title> took 15 s with a lazy ".*?\s*").
_TOP_TAG = re.compile(r"<(/?)top>", re.I)
_NUM = re.compile(r"<num>\s*(?:Number:\s*)?([^\s<]+)", re.I)
_TITLE = re.compile(r"<title>\s*(?:Topic:)?((?:[^<]|<(?![a-z/]))*)", re.I)


def read_queries(path: Path) -> Queries:
    """The queries of a BEIR ``queries.jsonl``, a TREC topics file or a ``qid<TAB>text`` TSV."""
    text = _read(path)
    stripped = text.lstrip()
    if not stripped:
        raise EvalInputError(f"{path}: empty queries file")
    if stripped.startswith("{"):
        return Queries(_jsonl_queries(path), "beir-jsonl")
    if re.search(r"<top>", text, re.I):
        return Queries(_trec_topics(path, text), "trec-topics")
    return Queries(_tsv_queries(path, text), "tsv")


def _jsonl_queries(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    try:
        for number, value in enumerate(read_jsonl(path), start=1):
            qid = value.get("_id", value.get("id"))
            query = value.get("text", value.get("query"))
            if qid is None or not isinstance(query, str):
                raise EvalInputError(
                    f"{path}: query #{number}: expected fields '_id' and "
                    f"'text' (found: {', '.join(map(str, value)) or 'none'})"
                )
            out[str(qid)] = query
    except ValueError as exc:  # read_jsonl names the file and the line
        raise EvalInputError(str(exc)) from exc
    return out


def _topic_blocks(text: str) -> list[str]:
    """What lies between each ``<top>`` and the ``</top>`` after it (one pass)."""
    blocks, start = [], None
    for tag in _TOP_TAG.finditer(text):
        if not tag.group(1):
            start = tag.end() if start is None else start
        elif start is not None:
            blocks.append(text[start : tag.start()])
            start = None
    return blocks


def _trec_topics(path: Path, text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for i, block in enumerate(_topic_blocks(text), start=1):
        num, title = _NUM.search(block), _TITLE.search(block)
        if num is None or title is None or not title.group(1).strip():
            raise EvalInputError(f"{path}: topic #{i} needs a <num> and a non-empty <title>")
        out[num.group(1)] = " ".join(title.group(1).split())
    if not out:
        raise EvalInputError(f"{path}: no complete <top>...</top> topic found")
    return out


def _tsv_queries(path: Path, text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        qid, tab, query = line.partition("\t")
        if not tab or not qid.strip() or not query.strip():
            raise EvalInputError(
                f"{path}:{number}: expected 'query-id<TAB>text' (or a BEIR queries.jsonl, "
                f"or TREC <top> topics), got {line[:60]!r}"
            )
        if number == 1 and qid.strip().lower() in {"query-id", "qid", "id", "query_id"}:
            continue
        out[qid.strip()] = query.strip()
    return out


# --- judgments --------------------------------------------------------------------------


def judgments_file(path: Path) -> Path:
    """A BEIR folder (or its ``qrels`` folder) resolves to its ``test.tsv``."""
    if not path.is_dir():
        return path
    folder = path / "qrels" if (path / "qrels").is_dir() else path
    tsvs = sorted(folder.glob("*.tsv"))
    chosen = (
        folder / "test.tsv"
        if (folder / "test.tsv").is_file()
        else (tsvs[0] if len(tsvs) == 1 else None)
    )
    if chosen is None:
        names = ", ".join(p.name for p in tsvs) or "none"
        raise EvalInputError(
            f"{path}: a folder without test.tsv (qrels found: {names}); pass the file itself"
        )
    return chosen


def read_judgments(
    path: Path, queries: Collection[str] | None = None, relevant_only: bool = False
) -> Judgments:
    """Judgments from a BEIR qrels TSV (with header) or a TREC qrels file, detected.

    Read a line at a time, never the whole text: memory holds the judgments kept, about
    100 bytes each. With ``queries``, only those queries' judgments are kept; the ids of
    the other judged queries are listed in :attr:`Judgments.elsewhere`. With
    ``relevant_only``, only grades >= 1 (every metric reads no other; most of a pooled
    TREC qrels file is grade 0): a query judged with none keeps an empty entry."""
    path = judgments_file(path)
    with _open(path) as handle:
        lines = _lines(path, handle)
        first = next(lines, None)
        if first is None:
            raise EvalInputError(f"{path}: empty judgments file")
        number, line = first
        head = line.split()
        if [f.lower() for f in head[:2]] == ["query-id", "corpus-id"]:
            return _parse(path, lines, "beir-tsv", (0, 1, 2), 3, queries, relevant_only)
        rows = itertools.chain([first], lines)
        if len(head) == 4:
            return _parse(path, rows, "trec", (0, 2, 3), 4, queries, relevant_only)
        if len(head) == 3:  # a BEIR TSV without its header
            return _parse(path, rows, "beir-tsv", (0, 1, 2), 3, queries, relevant_only)
    raise EvalInputError(
        f"{path}:{number}: expected a BEIR qrels line 'query-id<TAB>corpus-id<TAB>score' "
        f"or a TREC qrels line 'qid 0 docid grade', got {line[:60]!r}"
    )


def _open(path: Path) -> BinaryIO:
    """The judgments file opened as :func:`_read` reads one: a regular file of at most
    :data:`MAX_EVAL_FILE_BYTES` (refused from its size, before any line is read)."""
    if not path.exists():
        raise EvalInputError(f"{path}: no such file")
    try:
        handle = open_seed(path, "eval file", "expected a regular text file of judgments")
    except FileRefusedError as exc:
        raise EvalInputError(str(exc)) from None
    if os.fstat(handle.fileno()).st_size > MAX_EVAL_FILE_BYTES:
        handle.close()
        raise EvalInputError(
            f"eval file {path} is larger than {MAX_EVAL_FILE_BYTES:,} bytes; "
            "expected a regular text file of judgments"
        )
    return handle


def _lines(path: Path, handle: BinaryIO) -> Iterator[tuple[int, str]]:
    """The file's non-blank lines with their numbers, decoded one at a time; a line past
    :data:`MAX_JUDGMENT_LINE_BYTES` or the file past :data:`MAX_EVAL_FILE_BYTES` (it grew
    while read) is refused."""
    total = 0
    for number, raw in enumerate(
        iter(lambda: handle.readline(MAX_JUDGMENT_LINE_BYTES + 1), b""), start=1
    ):
        total += len(raw)
        if len(raw) > MAX_JUDGMENT_LINE_BYTES:
            raise EvalInputError(
                f"{path}:{number}: line longer than {MAX_JUDGMENT_LINE_BYTES:,} bytes; "
                "a judgment is one short line 'qid 0 docid grade'"
            )
        if total > MAX_EVAL_FILE_BYTES:
            raise EvalInputError(f"{path}: larger than {MAX_EVAL_FILE_BYTES:,} bytes")
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise EvalInputError(
                f"eval file {path}:{number}: not valid UTF-8 (byte 0x{raw[exc.start]:02x})"
            ) from None
        if number == 1:
            line = line.removeprefix("\ufeff")
        if line.strip():
            yield number, line.rstrip("\r\n")


def _parse(
    path: Path,
    lines: Iterable[tuple[int, str]],
    fmt: str,
    at: tuple[int, int, int],
    width: int,
    queries: Collection[str] | None,
    relevant_only: bool = False,
) -> Judgments:
    grades: dict[str, dict[str, int]] = {}
    elsewhere: dict[str, None] = {}  # judged queries not kept, in file order
    repeated = 0
    expected = "'query-id<TAB>corpus-id<TAB>score'" if fmt == "beir-tsv" else "'qid 0 docid grade'"
    for number, line in lines:
        parts = line.split("\t") if fmt == "beir-tsv" and "\t" in line else line.split()
        if len(parts) != width:
            raise EvalInputError(
                f"{path}:{number}: expected {width} columns {expected}, "
                f"got {len(parts)}: {line[:60]!r}"
            )
        qid, doc, raw = (parts[i].strip() for i in at)
        grade = _grade(raw)
        if grade is None:
            raise EvalInputError(
                f"{path}:{number}: grade {_shown(raw)} is not an integer (expected {expected})"
            )
        if not -MAX_GRADE <= grade <= MAX_GRADE:
            raise EvalInputError(
                f"{path}:{number}: grade {_shown(raw)} is out of range: a grade is an "
                f"integer from {-MAX_GRADE} to {MAX_GRADE}"
            )
        if queries is not None and qid not in queries:
            elsewhere.setdefault(qid)
            continue
        per = grades.setdefault(qid, {})
        if doc in per:
            repeated += 1
        if grade >= 1 or not relevant_only:
            per[doc] = int(grade)
        else:  # a later line judging it not relevant wins over an earlier one
            per.pop(doc, None)
    return Judgments(grades, fmt, repeated, elsewhere=list(elsewhere))


def _shown(raw: str) -> str:
    """The grade as the file has it, a long one elided (a 400-digit grade is one line)."""
    return repr(raw) if len(raw) <= 24 else f"{raw[:12]!r}… ({len(raw)} characters)"


def _grade(raw: str) -> float | None:
    """An integer grade as a float, exact within the bound; ``1.0`` is accepted as 1,
    ``0.5``, ``nan`` or ``high`` are not. A huge one (``1e400``, 400 digits) is returned
    as a float outside the bound (infinite past float's range), never converted to int."""
    try:
        value = float(raw)
    except ValueError:
        return None
    if math.isnan(value) or (math.isfinite(value) and not value.is_integer()):
        return None
    return value
