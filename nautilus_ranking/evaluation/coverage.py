"""What the sources returned against what was judged: the ceiling, and what never showed up.

A judgment whose id no returned row carries is reported, never silently dropped:
either the sources did not return that document for its query (the ranking
could not have placed it), or no source returned the id for any query ("never
seen"). A run cannot tell whether a source holds such an id and never returned it
(its search, its limit) or holds none (a stale judgment, often a wrong
``--id-field``), and the report says no more than that.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from nautilus_ranking.evaluation.metrics import relevant
from nautilus_ranking.evaluation.sweep import Fetched, row_id

_EXAMPLES = 5


@dataclass
class Coverage:
    queries_in_file: int
    evaluated: int
    no_relevant: list[str]  # queries with judgments but none >= 1: not scored
    unjudged: list[str]  # queries with no judgment at all: not scored
    judged_unknown_query: list[str]  # judged query ids the queries file does not have
    relevant_total: int  # judged-relevant (query, doc) pairs of evaluated queries
    relevant_returned: int  # ... returned by at least one source for their query
    ceiling_recall: float  # mean per-query recall of the union of every source
    not_returned: int  # relevant pairs no source returned for their query
    never_seen: list[str]  # relevant ids no source returned for any query
    rows_total: int
    rows_without_id: int
    fields_seen: list[str]  # row fields, for a wrong --id-field
    errors: dict[str, int] = field(default_factory=dict)  # source -> queries it failed

    relevant_ids: int = 0  # distinct judged-relevant ids
    judged_fields: list[str] = field(default_factory=list)  # other fields holding judged ids

    @property
    def mostly_unseen(self) -> bool:
        """More than half the judged-relevant ids came back in no row: the judgments are
        not about these sources (or not in this field), and no comparison means much."""
        return self.relevant_ids > 0 and 2 * len(self.never_seen) > self.relevant_ids

    @property
    def id_field_suspect(self) -> bool:
        """Rows came back, yet none carried a judged id: most likely a wrong ``--id-field``."""
        return self.rows_total > 0 and 0 < self.relevant_ids == len(self.never_seen)

    def examples(self, ids: Sequence[str]) -> str:
        shown = ", ".join(repr(i) for i in ids[:_EXAMPLES])
        return shown + (f", … ({len(ids) - _EXAMPLES} more)" if len(ids) > _EXAMPLES else "")


def coverage(
    runs: Sequence[Fetched],
    queries: Mapping[str, str],
    grades: Mapping[str, Mapping[str, int]],
    id_field: str,
    elsewhere: Sequence[str] = (),
) -> Coverage:
    """``elsewhere``: judged query ids whose judgments were not kept (not in ``queries``)."""
    seen: set[str] = set()
    fields: Counter[str] = Counter()
    judged: Counter[str] = Counter()  # row fields other than id_field holding a judged id
    every_relevant = {d for run in runs for d in relevant(run.grades)}
    errors: Counter[str] = Counter()
    rows_total = rows_without_id = 0
    relevant_total = relevant_returned = 0
    ceiling = 0.0
    for run in runs:
        returned: set[str] = set()
        for result in run.results:
            if result.error is not None:
                errors[result.source_id] += 1
            for row in result.rows:
                rows_total += 1
                fields.update(row.keys())
                judged.update(
                    k
                    for k, v in row.items()
                    if k != id_field and isinstance(v, str | int) and str(v) in every_relevant
                )
                doc = row_id(row, id_field)
                if doc is None:
                    rows_without_id += 1
                else:
                    returned.add(doc)
        seen |= returned
        wanted = relevant(run.grades)
        hit = len(wanted & returned)
        relevant_total += len(wanted)
        relevant_returned += hit
        ceiling += hit / len(wanted) if wanted else 0.0
    relevant_ids = every_relevant
    scored = {run.qid for run in runs}
    return Coverage(
        queries_in_file=len(queries),
        evaluated=len(runs),
        no_relevant=[q for q in queries if q in grades and q not in scored],
        unjudged=[q for q in queries if q not in grades],
        judged_unknown_query=[*(q for q in grades if q not in queries), *elsewhere],
        relevant_total=relevant_total,
        relevant_returned=relevant_returned,
        ceiling_recall=ceiling / len(runs) if runs else 0.0,
        not_returned=relevant_total - relevant_returned,
        never_seen=sorted(relevant_ids - seen),
        rows_total=rows_total,
        rows_without_id=rows_without_id,
        fields_seen=[f for f, _ in fields.most_common(12)],
        errors=dict(errors),
        relevant_ids=len(relevant_ids),
        judged_fields=[f for f, _ in judged.most_common(3)],
    )
