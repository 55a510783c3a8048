"""Candidates: every successful source's rows, flattened into parallel arrays once a pass.

A row is a candidate when it is a dict whose mapping methods work; its source rank
is its 1-based place in its source's own answer (``AdapterResult.source_ranks`` when
given and usable), counting the rows left out. Vectors handed over as a matrix
(``AdapterResult.embeddings``) stay where they are, indexed by candidate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from nautilus_ranking.records import AdapterResult
from nautilus_ranking.rows import mapping_problem, source_ranks_problem
from nautilus_ranking.synthesis.rank_warnings import RankWarnings
from nautilus_ranking.text.arrays import FloatArray, IntArray

#: A row's text is cut to this many characters before tokenising or embedding,
#: so one 1 MB field cannot stall a request; the cut is logged. About 15,000 words:
#: past the longest rows an agent is handed whole (a runbook, a policy of 5,000
#: tokens), so the lexical score reads a long row's late answer; tokenising it costs
#: a few milliseconds. (A query is cut at 20,000: ``query.MAX_QUERY_CHARS``.)
MAX_TEXT_CHARS = 100_000
#: Fields that describe a row's vector, not its content.
NOT_TEXT = frozenset({"embedding", "embedding_model"})
_IS_STR = str.__instancecheck__  # a C-level predicate for filter()


@dataclass
class Matrices:
    """Vectors handed over as matrices (``AdapterResult.embeddings``): for each
    candidate, which matrix holds its vector (-1: none) and at which row."""

    parts: list[tuple[Any, int]]  # (the matrix as given, how many rows its source gave)
    matrix_of: IntArray
    row_in: IntArray

    @classmethod
    def build(cls, parts: list[tuple[int, Any, int, IntArray]], n: int) -> Matrices | None:
        """From (first candidate, matrix, rows given, row of each kept row) per source."""
        if not parts:
            return None
        matrix_of = np.full(n, -1, dtype=np.int64)
        row_in = np.zeros(n, dtype=np.int64)
        for m, (offset, _, _, rows) in enumerate(parts):
            matrix_of[offset : offset + len(rows)] = m
            row_in[offset : offset + len(rows)] = rows
        return cls([(matrix, given) for _, matrix, given, _ in parts], matrix_of, row_in)


@dataclass
class Candidates:
    """The flattened batch: parallel arrays, one entry per candidate row."""

    source_ids: list[str]  # routing order
    source_index: IntArray
    source_rank: IntArray
    rows: list[dict[str, Any]]
    matrices: Matrices | None = None
    plain: bool = False  # every row is a plain dict (no subclass): C-level dict.get is safe

    def take(self, keep: IntArray) -> Candidates:
        matrices = self.matrices
        if matrices is not None:
            matrices = Matrices(matrices.parts, matrices.matrix_of[keep], matrices.row_in[keep])
        return Candidates(
            self.source_ids,
            self.source_index[keep],
            self.source_rank[keep],
            [self.rows[i] for i in keep],
            matrices,
            self.plain,
        )


def flatten(results: list[AdapterResult], warnings: RankWarnings | None) -> Candidates:
    """The successful results' rows as candidates, in routing order; ``warnings``
    collects what was wrong with them (None: a second look, not reported again)."""
    source_ids: list[str] = []
    position: dict[str, int] = {}
    next_rank: list[int] = []
    index_parts: list[IntArray] = []
    rank_parts: list[IntArray] = []
    rows: list[dict[str, Any]] = []
    matrix_parts: list[tuple[int, Any, int, IntArray]] = []
    not_a_dict = 0
    plain = True
    for result in results:
        if result.error is not None:
            continue
        sid = result.source_id
        if sid not in position:
            position[sid] = len(source_ids)
            source_ids.append(sid)
            next_rank.append(1)
        index = position[sid]
        source_rows = result.rows if isinstance(result.rows, list) else []
        if warnings is not None and not isinstance(result.rows, list):
            warnings.add("rank_rows_not_a_list", source_id=sid, type=type(result.rows).__name__)
        start, given = next_rank[index], len(source_rows)
        ranks = source_ranks(result, given, warnings)
        positions = ranks + (start - 1)
        at = np.arange(given, dtype=np.int64)  # where each kept row is in result.rows
        is_dict = (
            []
            if set(map(type, source_rows)) <= {dict}
            else [  # plain dicts: fast
                type(row) is dict or (isinstance(row, dict) and mapping_problem(row) is None)
                for row in source_rows
            ]
        )
        plain = plain and not is_dict
        if not all(is_dict):
            not_a_dict += is_dict.count(False)
            keep = np.array(is_dict, dtype=bool)
            positions, at = positions[keep], at[keep]
            source_rows = [row for row, ok in zip(source_rows, is_dict, strict=True) if ok]
        if result.embeddings is not None:
            matrix_parts.append((len(rows), result.embeddings, given, at))
        rows.extend(source_rows)
        index_parts.append(np.full(len(source_rows), index, dtype=np.int64))
        rank_parts.append(positions)
        # ranks count the rows left out too (here, and by the broker: source_ranks)
        next_rank[index] = start + (int(ranks[-1]) if given else 0)
    if warnings is not None and not_a_dict:
        warnings.add(
            "rank_row_not_a_dict",
            count=not_a_dict,
            reason="not a dict, or a dict subclass whose methods fail",
            action="left out of the ranking",
        )
    empty = np.zeros(0, dtype=np.int64)
    return Candidates(
        source_ids,
        np.concatenate(index_parts) if index_parts else empty,
        np.concatenate(rank_parts) if rank_parts else empty,
        rows,
        Matrices.build(matrix_parts, len(rows)),
        plain,
    )


def source_ranks(result: AdapterResult, given: int, warnings: RankWarnings | None) -> IntArray:
    """Each given row's 1-based position in its source's own answer: the result's
    ``source_ranks`` when usable, else ``1..given`` (warned about when not)."""
    said = getattr(result, "source_ranks", None)
    if said is not None:
        problem = source_ranks_problem(said, given)
        if problem is None:
            ranks: IntArray = np.asarray(said, dtype=np.int64)
            return ranks
        if warnings is not None:
            warnings.add(
                "rank_source_ranks_invalid",
                source_id=result.source_id,
                reason=problem,
                action="rows ranked in the order given",
            )
    return np.arange(1, given + 1, dtype=np.int64)


def declared(results: list[AdapterResult], source_ids: list[str]) -> list[bool | None]:
    """Each source's own word on whether its order is relevance (AdapterResult.ranked)."""
    said: dict[str, bool] = {}
    for result in results:
        ranked = getattr(result, "ranked", None)
        if result.error is None and isinstance(ranked, bool):
            said.setdefault(result.source_id, ranked)
    return [said.get(sid) for sid in source_ids]


def row_texts(rows: list[dict[str, Any]], warnings: RankWarnings) -> list[str]:
    """Each row's text, what the embedder and the IDF statistics read: its string
    values, cut at :data:`MAX_TEXT_CHARS`."""
    # "embedding" is never a string, so only rows naming their vector's model need the
    # slower, key-aware join.
    texts = [
        " ".join(filter(_IS_STR, row.values()))
        if "embedding_model" not in row
        else " ".join(v for k, v in row.items() if _IS_STR(v) and k not in NOT_TEXT)
        for row in rows
    ]
    long_rows = [i for i, t in enumerate(texts) if len(t) > MAX_TEXT_CHARS]
    if long_rows:
        warnings.add(
            "rank_row_text_truncated",
            count=len(long_rows),
            limit_chars=MAX_TEXT_CHARS,
            action="scored on the first part",
        )
        for i in long_rows:
            texts[i] = texts[i][:MAX_TEXT_CHARS]
    return texts


#: What a row's resemblance text leaves out besides :data:`NOT_TEXT`: its ``id`` names the
#: row, it is not its content (two copies of one text under two ids are one text).
NOT_RESEMBLANCE = NOT_TEXT | {"id"}


def resemblance_texts(rows: list[dict[str, Any]]) -> list[str]:
    """Each row's text as the near-copy stages compare it: :func:`row_texts` without the
    row's ``id``, cut at :data:`MAX_TEXT_CHARS` (the cut is warned about by the scoring)."""
    return [
        " ".join(v for k, v in row.items() if _IS_STR(v) and k not in NOT_RESEMBLANCE)[
            :MAX_TEXT_CHARS
        ]
        for row in rows
    ]


def has_text_id(rows: list[dict[str, Any]]) -> bool:
    """Whether any row's ``id`` is a string (then its :func:`row_texts` holds it)."""
    return any(_IS_STR(row.get("id")) for row in rows)


def cap(cands: Candidates, keys: FloatArray, max_candidates: int) -> IntArray:
    """Positions of the ``max_candidates`` best rows by ``keys`` (ascending positions)."""
    order = np.lexsort((cands.source_rank, cands.source_index, -keys))
    return np.sort(order[:max_candidates])
