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

Every problem is an :class:`EvalInputError` naming the file, the line and what
was expected — never a traceback.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from nautilus_ranking.errors import NautilusError
from nautilus_ranking.sources.seeds import FileRefusedError, read_jsonl, read_text_file


class EvalInputError(NautilusError):
    """A queries or judgments file that cannot be read as any supported format."""


@dataclass
class Judgments:
    """Graded judgments ``{query_id: {doc_id: grade}}`` and the format they were read as."""

    grades: dict[str, dict[str, int]]
    format: str
    repeated: int = 0  # (query, doc) pairs judged twice: the last line wins
    notes: list[str] = field(default_factory=list)


@dataclass
class Queries:
    """``{query_id: text}`` in file order, and the format they were read as."""

    texts: dict[str, str]
    format: str


#: The largest queries or judgments file read (bytes; MS MARCO's dev qrels are 1 MB).
MAX_EVAL_FILE_BYTES = 512 << 20


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


def read_judgments(path: Path) -> Judgments:
    """Judgments from a BEIR qrels TSV (with header) or a TREC qrels file, detected."""
    path = judgments_file(path)
    lines = [(n, line) for n, line in enumerate(_read(path).splitlines(), start=1) if line.strip()]
    if not lines:
        raise EvalInputError(f"{path}: empty judgments file")
    first = lines[0][1].split()
    if [f.lower() for f in first[:2]] == ["query-id", "corpus-id"]:
        return _parse(path, lines[1:], "beir-tsv", (0, 1, 2), 3)
    columns = len(first)
    if columns == 4:
        return _parse(path, lines, "trec", (0, 2, 3), 4)
    if columns == 3:  # a BEIR TSV without its header
        return _parse(path, lines, "beir-tsv", (0, 1, 2), 3)
    raise EvalInputError(
        f"{path}:{lines[0][0]}: expected a BEIR qrels line 'query-id<TAB>corpus-id<TAB>score' "
        f"or a TREC qrels line 'qid 0 docid grade', got {lines[0][1][:60]!r}"
    )


def _parse(
    path: Path, lines: list[tuple[int, str]], fmt: str, at: tuple[int, int, int], width: int
) -> Judgments:
    grades: dict[str, dict[str, int]] = {}
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
                f"{path}:{number}: grade {raw!r} is not an integer (expected {expected})"
            )
        per = grades.setdefault(qid, {})
        if doc in per:
            repeated += 1
        per[doc] = grade
    return Judgments(grades, fmt, repeated)


def _grade(raw: str) -> int | None:
    """An integer grade; ``1.0`` is accepted as 1, ``0.5`` or ``high`` are not."""
    try:
        return int(raw)
    except ValueError:
        pass
    try:
        value = float(raw)
    except ValueError:
        return None
    return int(value) if value.is_integer() else None
