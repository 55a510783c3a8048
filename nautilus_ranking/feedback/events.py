"""The feedback log's records: OpenSearch User Behavior Insights (UBI 1.3) in shape.

Two kinds of record, one JSON object a line, in two families of files under
``<NAUTILUS_DATA_DIR>/feedback/`` (and, with an OpenSearch sink, the two indexes of the
same names):

- ``ubi_queries-<pid>-<start>.jsonl``: one :class:`QueryRecord` per answer handed over;
- ``ubi_events-<pid>-<start>.jsonl``: one :class:`EventRecord` per ``impression`` (a row
  handed over) and per use an agent reported (``cited``, ``used``, ``fetched``,
  ``rejected``) or per query-level outcome (``retried``, ``task_success``,
  ``task_failure``).

``<pid>`` is the writing process's id and ``<start>`` the UTC time its file was opened
(``YYYYMMDDTHHMMSSffffffZ``): each process writes its own files, a rotated file is closed and a
new one opened. A reader globs both families, reads every file, and drops repeated
``event_id`` (a client may send one event twice; the server keeps no seen-set). An
impression is never a use: only :data:`USE_ACTIONS` are.

This shape is stable: a reader (``feedback propose``) depends on it. A field is only
ever added, never renamed or retyped.
"""

from __future__ import annotations

from typing import Final, Literal, NotRequired, TypedDict

#: The folder under the data directory the JSONL sink writes to.
FEEDBACK_FOLDER = "feedback"
#: The file-name prefixes (also the OpenSearch index names).
QUERIES = "ubi_queries"
EVENTS = "ubi_events"
#: What every record's ``application`` says.
APPLICATION = "nautilus-ranking"

#: A row was handed over to the caller (written by the server; never a use).
IMPRESSION: Final = "impression"
#: What a caller reports of one row, by its ``cite`` handle.
ROW_ACTIONS: tuple[str, ...] = ("cited", "used", "fetched", "rejected")
#: Of those, what counts as a use of the row.
USE_ACTIONS: tuple[str, ...] = ("cited", "used", "fetched")
#: What a caller reports of a whole answer.
QUERY_ACTIONS: tuple[str, ...] = ("retried", "task_success", "task_failure")
#: Every action a reader may meet.
ACTIONS: tuple[str, ...] = (IMPRESSION, *ROW_ACTIONS, *QUERY_ACTIONS)

Action = Literal[
    "impression",
    "cited",
    "used",
    "fetched",
    "rejected",
    "retried",
    "task_success",
    "task_failure",
]


class QueryAttributes(TypedDict):
    """How the answer was ranked: what a replay re-scores under."""

    #: ``nautilus_ranking.config_hash.config_hash``: the sources file and ranking knobs.
    config_hash: str
    #: The source boosts in force (``NAUTILUS_SOURCE_BOOSTS`` as the profile resolved
    #: it): ``{source_id: level}``, a level as written (a ladder name or a number).
    levels: dict[str, str | float]
    #: The top K asked for (None: every row).
    top_k: int | None
    #: The page this answer is (1 for the first; a cursor's page after it).
    page: int
    #: Whether the answer abstained under ``NAUTILUS_RANKING_MIN_CONFIDENCE``.
    abstained: bool
    #: The ranking's confidence (None: no fit for the setup, or nothing ranked).
    confidence: float | None
    #: The ranking profile: a keyed hash (``hmac:<32 hex>``), its name under
    #: ``NAUTILUS_FEEDBACK_TEXT``, None for the global knobs.
    profile: str | None
    #: Each hit's source, in the order of ``query_response_hit_ids``.
    hit_sources: list[str]


class QueryRecord(TypedDict):
    """One answer handed over (UBI 1.3 ``ubi_queries``)."""

    application: str
    #: The answer's ``ranking_id`` (its ``request_id``): what each event names.
    query_id: str
    #: Who asked: a keyed hash of the API key's line (or of the profile without keys;
    #: ``"anonymous"`` with neither).
    client_id: str
    #: The query: a keyed hash (``hmac:<32 hex>``), its text under ``NAUTILUS_FEEDBACK_TEXT``.
    user_query: str
    #: ISO 8601, UTC, milliseconds (``2026-12-07T21:40:00.123Z``).
    timestamp: str
    query_attributes: QueryAttributes
    #: The same as ``query_id`` (UBI names the response separately).
    query_response_id: str
    #: The row ids handed over, in order (position 1 first; ``str`` of the row's ``id``).
    query_response_hit_ids: list[str]


class EventObject(TypedDict):
    #: The row's id (``str`` of its ``id`` field, ``""`` without one; past 200
    #: characters ``sha256:`` and 32 hex digits of it: ``identity.object_id``).
    object_id: str
    #: The row's source id (UBI: the field the id is of; here the source that holds it).
    object_id_field: str


class EventPosition(TypedDict):
    #: 1-based place in the list the answer handed over (after the budget; each page
    #: starts at 1).
    ordinal: int
    #: The page the row was on (1: the first).
    page: int


class EventAttributes(TypedDict):
    #: The row (absent for query-level actions).
    object: NotRequired[EventObject]
    position: NotRequired[EventPosition]
    #: Impressions only: the row's score components as ranked (``RankedRow.explain()``'s
    #: numbers: score, relevance, boost_bump, evidence, content, ...), for a replay.
    components: NotRequired[dict[str, float]]
    #: Reported events only: when the cite was made (its signed time, ISO 8601 UTC).
    cited_at: NotRequired[str]


class EventRecord(TypedDict):
    """One event (UBI 1.3 ``ubi_events``)."""

    application: str
    #: Unique per event: the server's for an impression, the caller's (or one the
    #: server made) for a reported event. Repeats are the same event.
    event_id: str
    action_name: Action
    query_id: str
    client_id: str
    #: When the event was recorded (ISO 8601, UTC, milliseconds).
    timestamp: str
    #: ``"impression"`` for impressions, ``"feedback"`` for reported events.
    message_type: str
    event_attributes: EventAttributes
