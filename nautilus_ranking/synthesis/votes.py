"""The source-votes stage: which sources are ranked (declared, else detected on the
reference rows), their votes for each document over the whole union, how much content
counts in this batch (from how many documents the ranked sources share), the content
vote (by normalised similarity), and the votes standing in for unranked sources'
orders; their sum is each row's relevance (``fusion.py``, ``detection.py``).
"""

from __future__ import annotations

import numpy as np

from nautilus_ranking.synthesis import detection, fusion
from nautilus_ranking.synthesis.batch import RankBatch


def vote(b: RankBatch) -> None:
    """Fill in ``b``'s votes and its relevance (content + sources + stand-ins)."""
    sub, where_ref, lexical_score = b.sub, b.where_ref, b.lexical_score
    sub_doc = b.doc[b.scored]
    source_weight, _ = detection.source_weights(
        sub.source_index[where_ref],
        sub.source_rank[where_ref],
        b.content_similarity[where_ref],
        b.said,
        sub_doc[where_ref],
        b.factors[where_ref],
    )
    evidence_all, voters_all = fusion.source_evidence(
        b.doc, b.cands.source_index, b.cands.source_rank, source_weight
    )
    weight = fusion.content_weight(b.doc, b.cands.source_index, source_weight)
    voters = voters_all[b.scored]
    normalised = fusion.normalised_similarity(b.content_similarity, sub_doc, where_ref)
    content_score = b.content_similarity  # what content ranks rows by
    if (
        lexical_score is not None
        and len(np.unique(sub_doc[where_ref][lexical_score[where_ref] > 0])) >= 2
    ):
        # A semantic and a lexical score: their convex combination. A lexical score that
        # fewer than two documents have has no distribution to normalise it by: unused.
        normalised = fusion.convex_content(
            normalised, fusion.normalised_similarity(lexical_score, sub_doc, where_ref)
        )
        content_score = normalised
    elif b.lexical_content:
        # Lexical content only: a ranked source's row that shares few of the query's
        # words is not rated far below what its rank says (a semantic index's match).
        normalised = fusion.rank_floor(
            normalised, sub.source_index, sub.source_rank, source_weight, where_ref
        )
    b.content_rank = fusion.content_ranks(content_score, sub_doc, where_ref)
    b.content = fusion.content_vote(normalised, weight=weight)
    b.unranked = fusion.unranked_votes(
        content_score, sub_doc, sub.source_index, where_ref, source_weight, voters, weight
    )
    b.evidence = evidence_all[b.scored]
    b.relevance = b.content + b.evidence + b.unranked
    b.sub_doc, b.source_weight, b.weight, b.voters = sub_doc, source_weight, weight, voters
