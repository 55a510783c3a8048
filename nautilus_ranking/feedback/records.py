"""The log's records made from what an answer handed over, and from reported use.

Built on the writer's thread (``recorder.py``), never on the request's: a request only
hands over a :class:`HandedOver` of what it already has.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from nautilus_ranking.config_hash import config_hash
from nautilus_ranking.feedback.cites import Cite, Signer
from nautilus_ranking.feedback.events import (
    APPLICATION,
    IMPRESSION,
    Action,
    EventAttributes,
    EventRecord,
    QueryRecord,
)
from nautilus_ranking.feedback.identity import object_id, shown
from nautilus_ranking.records import SCORE_COMPONENTS, RankedRow
from nautilus_ranking.settings.knobs import KNOBS
from nautilus_ranking.settings.model import NautilusSettings
from nautilus_ranking.source_settings import config_path

#: The components an impression keeps: the score and each numeric component.
_COMPONENTS = ("score", *(name for name, _ in SCORE_COMPONENTS))


@dataclass(frozen=True)
class HandedOver:
    """What one answer handed over, as a request has it."""

    ranking_id: str
    client: str
    query: str
    profile: str | None
    page: int
    #: The request's effective settings (the profile's, with its overrides).
    settings: NautilusSettings
    rows: Sequence[RankedRow]
    confidence: float | None
    abstained: bool
    #: When it was handed over (Unix seconds).
    time: float


def timestamp(unix: float) -> str:
    """ISO 8601, UTC, milliseconds: what every record's ``timestamp`` holds."""
    return datetime.fromtimestamp(unix, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def new_event_id() -> str:
    return secrets.token_hex(16)


def query_record(handed: HandedOver, keys: Signer, plain: bool) -> QueryRecord:
    """The answer's ``ubi_queries`` record."""
    effective = handed.settings
    return {
        "application": APPLICATION,
        "query_id": handed.ranking_id,
        "client_id": handed.client,
        "user_query": shown(keys, "query", handed.query, plain) or "",
        "timestamp": timestamp(handed.time),
        "query_attributes": {
            "config_hash": _config_hash(effective, config_path(effective)),
            "levels": dict(effective.source_boosts),
            "top_k": effective.ranking_top_k,
            "page": handed.page,
            "abstained": handed.abstained,
            "confidence": handed.confidence,
            "profile": shown(keys, "profile", handed.profile, plain),
            "hit_sources": [row.source_id for row in handed.rows],
        },
        "query_response_id": handed.ranking_id,
        "query_response_hit_ids": [object_id(row.row) for row in handed.rows],
    }


def impressions(handed: HandedOver) -> list[EventRecord]:
    """One ``impression`` per row handed over, with its place and score components."""
    when = timestamp(handed.time)
    return [
        {
            "application": APPLICATION,
            "event_id": new_event_id(),
            "action_name": IMPRESSION,
            "query_id": handed.ranking_id,
            "client_id": handed.client,
            "timestamp": when,
            "message_type": IMPRESSION,
            "event_attributes": {
                "object": {"object_id": object_id(row.row), "object_id_field": row.source_id},
                "position": {"ordinal": index + 1, "page": handed.page},
                "components": {name: float(getattr(row, name)) for name in _COMPONENTS},
            },
        }
        for index, row in enumerate(handed.rows)
    ]


def reported_event(
    action: Action,
    query_id: str,
    client: str,
    event_id: str,
    cite: Cite | None,
    now: float,
) -> EventRecord:
    """A use (or a query-level outcome) a caller reported; ``cite``: the row's, None
    for a query-level action."""
    attributes: EventAttributes = {}
    if cite is not None:
        attributes = {
            "object": {"object_id": cite.row_id, "object_id_field": cite.source},
            "position": {"ordinal": cite.position, "page": cite.page},
            "cited_at": timestamp(cite.issued),
        }
    return {
        "application": APPLICATION,
        "event_id": event_id,
        "action_name": action,
        "query_id": query_id,
        "client_id": client,
        "timestamp": timestamp(now),
        "message_type": "feedback",
        "event_attributes": attributes,
    }


#: Config hashes by what they cover (the sources file's stat and the knobs' values).
_HASHES: dict[tuple[object, ...], str] = {}


def _config_hash(settings: NautilusSettings, sources_file: Path) -> str:
    """:func:`config_hash`, made once per sources file state and knob values ("" when
    the file cannot be read: the record is still written)."""
    try:
        stat = os.stat(sources_file)
        key = (
            str(sources_file),
            stat.st_mtime_ns,
            stat.st_size,
            tuple(repr(getattr(settings, k.field)) for k in KNOBS),
        )
        if key not in _HASHES:
            if len(_HASHES) > 256:
                _HASHES.clear()
            _HASHES[key] = config_hash(settings, sources_file)
        return _HASHES[key]
    except OSError:
        return ""
