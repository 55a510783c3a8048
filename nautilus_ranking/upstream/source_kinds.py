"""What the ranking needs to know about each of the broker's sources, read from the
broker: whether its order means relevance, and where a pgvector row keeps its vector
and its metadata.

Which orders mean relevance (nautilus-rkm 0.3.0's adapters, read from its code): only
``pgvector`` orders its rows, by distance to the request's embedding
(``ORDER BY embedding <=> $E``). ``postgres`` runs a ``SELECT`` with no ``ORDER BY``,
``elasticsearch`` a filter-only search (no ``_score``), ``neo4j`` a ``MATCH`` in no
order, ``static`` keeps the YAML's order, and the others (``rest``, ``servicenow``,
``influxdb``, ``s3``, ``llm``) answer in an order of their own making: declared not
ranked, so their rank never counts as relevance and their rows compete on content. A
type this module does not know (a plugin adapter) is left to the ranking's per-batch
detection (``nautilus_ranking/synthesis/detection.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

#: Source types whose order is relevance to the request.
RANKED_TYPES = frozenset({"pgvector"})
#: Source types whose order is not relevance.
UNRANKED_TYPES = frozenset(
    {"postgres", "elasticsearch", "neo4j", "static", "rest", "servicenow", "influxdb", "s3", "llm"}
)
#: pgvector's default column names (the adapter's own defaults).
PGVECTOR_EMBEDDING = "embedding"
PGVECTOR_METADATA = "metadata"


@dataclass(frozen=True)
class SourceKind:
    """One source as the ranking treats it."""

    source_type: str
    #: True: its order is relevance; False: it is not; None: detect per batch.
    ranked: bool | None
    #: The column holding the row's vector (left out of the ranking's view of the row).
    vector_column: str = PGVECTOR_EMBEDDING
    #: The column holding the row's metadata as a JSON string (parsed into the view);
    #: None: no such column.
    metadata_column: str | None = None


#: A source the broker does not name (none should reach ``merge``): detect its order.
UNKNOWN = SourceKind("unknown", None)


def kind_of(config: Any) -> SourceKind:
    """The kind of one of the broker's ``SourceConfig``s (read by attribute, so any
    object with ``type`` and, for pgvector, ``embedding_column``/``metadata_column``)."""
    source_type = str(getattr(config, "type", "") or "")
    ranked = (
        True if source_type in RANKED_TYPES else False if source_type in UNRANKED_TYPES else None
    )
    if source_type == "pgvector":
        return SourceKind(
            source_type,
            ranked,
            str(getattr(config, "embedding_column", None) or PGVECTOR_EMBEDDING),
            str(getattr(config, "metadata_column", None) or PGVECTOR_METADATA),
        )
    return SourceKind(source_type, ranked)


def kinds_of(configs: Iterable[Any]) -> Mapping[str, SourceKind]:
    """Each of the broker's sources' kind, by id."""
    return {str(getattr(config, "id", "")): kind_of(config) for config in configs}
