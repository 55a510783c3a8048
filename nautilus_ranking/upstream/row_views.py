"""The ranking's view of a broker row: what its content is, without changing the row.

The broker's rows go into ``data`` exactly as the adapters returned them; the ranking
reads a view of each. A pgvector row is ``{id, metadata: '<JSON string>', embedding:
<vector>}``: its content is in the metadata, so the view holds the metadata's fields
(parsed; the row's own keys win) and leaves the vector out. The broker's vectors are
never in the ranking's embedding space (they come from the broker's model, or the
caller's), so a vector field is left out of every row's view: content is scored by
the ranking's own embedder on the row's text, and pgvector's similarity counts
through its order.
"""

from __future__ import annotations

import json
from typing import Any

from nautilus_ranking.upstream.source_kinds import SourceKind

#: The longest metadata string parsed (characters); a longer one stays a string.
MAX_METADATA_CHARS = 1 << 20


def row_view(row: dict[str, Any], kind: SourceKind) -> dict[str, Any]:
    """``row`` as the ranking reads it: the row itself when nothing needs leaving out,
    else a new dict (the row is never changed)."""
    vector, metadata = kind.vector_column, kind.metadata_column
    if vector not in row and (metadata is None or metadata not in row):
        return row
    view = {k: v for k, v in row.items() if k != vector and k != metadata}
    if metadata is not None and metadata in row:
        parsed = _metadata(row[metadata])
        if parsed is None:
            view[metadata] = row[metadata]
        else:
            view = {**parsed, **view}
    return view


def _metadata(value: Any) -> dict[str, Any] | None:
    """A metadata value's fields: a JSON object (as a string, or already a dict);
    None when it is neither (it is then kept as it is)."""
    if isinstance(value, dict):
        return value
    if not isinstance(value, str | bytes) or len(value) > MAX_METADATA_CHARS:
        return None
    try:
        parsed = json.loads(value)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None
