"""Prometheus metrics, correct with one worker or many.

``nautilus-ranking serve`` points ``PROMETHEUS_MULTIPROC_DIR`` at a fresh directory before
any worker imports this module, so every worker writes its samples there and a
scrape of any worker aggregates all of them (prometheus-client multiprocess mode).
Labels are of bounded cardinality: a route, a status code, a source id, an error
type — never a query or a request id. A profile's name is a label too, and the API
hides it from a caller whose key may not name it: a scrape shows the profiles its key
may name (every one without API keys; none without a key), so ``/metrics`` never lists
them to a caller the API would not (:func:`render`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import GaugeMetricFamily, Metric

from nautilus_ranking.feedback.recorder import DROP_LISTENERS
from nautilus_ranking.log import get_logger
from nautilus_ranking.records import BrokerResponse
from nautilus_ranking.sources.base import ForwardingSource, Row, Source

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

REQUEST_DURATION = Histogram(
    "nautilus_request_duration_seconds",
    "HTTP request latency, by route and status code.",
    ["route", "status"],
    buckets=_LATENCY_BUCKETS,
)
SOURCE_DURATION = Histogram(
    "nautilus_source_duration_seconds",
    "One source's search latency within a query (a timed-out search counts its wait).",
    ["source"],
    buckets=_LATENCY_BUCKETS,
)
SOURCE_ERRORS = Counter(
    "nautilus_source_errors_total",
    "Searches that gave no rows, by source and error type ('timeout' for a timeout).",
    ["source", "error_type"],
)
SOURCE_WARNINGS = Counter(
    "nautilus_source_warnings_total",
    "Answers a source gave with something left out, by source and warning type: "
    "rows_dropped, hits_dropped, page_failed, mapping_null (a mapped path null in "
    "every hit: a wrong mapping).",
    ["source", "warning_type"],
)
TOPK_ROWS = Counter(
    "nautilus_source_topk_rows_total",
    "Rows each source placed in the returned top K (all returned rows when ranking is off).",
    ["source"],
)
REJECTED = Counter(
    "nautilus_requests_rejected_total",
    "Queries refused before or while running: overloaded, deadline, disconnected (the "
    "client left mid-query).",
    ["reason"],
)
FEEDBACK_DROPPED = Counter(
    "nautilus_feedback_dropped_total",
    "Feedback log records lost, never a request: JsonlSink_failed, OpenSearchSink_failed, "
    "OpenSearchSink_resting, record_failed (in records); buffer_full (in answers or reports).",
    ["reason"],
)
DROP_LISTENERS.append(lambda reason, count: FEEDBACK_DROPPED.labels(reason).inc(count))
PROFILE_QUERIES = Counter(
    "nautilus_profile_queries_total",
    "Queries answered, by the ranking profile that ranked them ('' for the global knobs); "
    "only configured profile names are labels.",
    ["profile"],
)
CONFIG_PROBLEMS = Gauge(
    "nautilus_config_problems",
    "Configuration values skipped at start-up (warned about).",
    multiprocess_mode="max",
)
IN_FLIGHT = Gauge(
    "nautilus_requests_in_flight", "Queries being answered now.", multiprocess_mode="livesum"
)
CONFIDENCE = Histogram(
    "nautilus_answer_confidence",
    "The confidence of each ranked answer that one of its top 10 rows is relevant "
    "(answers of a scoring setup with no fit are not counted).",
    buckets=(0.02, 0.04, 0.06, 0.08, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0),
)
ABSTAINED = Counter(
    "nautilus_answers_abstained_total",
    "Answers that handed over no rows: their confidence was below the minimum.",
)

SHARE_NAME = "nautilus_source_topk_share"
_LOG = get_logger("nautilus_ranking.service")


def record_response(response: BrokerResponse) -> None:
    """Errors by type and each source's rows in the returned ranking."""
    for error in response.sources_errored:
        SOURCE_ERRORS.labels(error.source_id, error.error_type[:64]).inc()
    for warning in response.sources_warned:
        SOURCE_WARNINGS.labels(warning.source_id, warning.warning_type[:64]).inc()
    counts: dict[str, int] = {}
    for ranked in response.ranking:
        counts[ranked.source_id] = counts.get(ranked.source_id, 0) + 1
    for source_id, count in counts.items():
        TOPK_ROWS.labels(source_id).inc(count)
    found = response.confidence
    if found is not None and found["value"] is not None:
        CONFIDENCE.observe(found["value"])
    if response.abstain is not None and response.abstain["abstained"]:
        ABSTAINED.inc()


def record_profile(profile: str | None) -> None:
    """One query ranked by ``profile`` (a configured name, or None for the global knobs)."""
    PROFILE_QUERIES.labels(profile or "").inc()


def start(source_ids: Iterable[str], config_problems: int, profiles: Iterable[str] = ()) -> None:
    """Create every per-source (and per-profile) series at zero, so a dashboard sees each
    at once."""
    for name in profiles:
        PROFILE_QUERIES.labels(name)
    for source_id in source_ids:
        TOPK_ROWS.labels(source_id)
        SOURCE_DURATION.labels(source_id)
    CONFIG_PROBLEMS.set(config_problems)


class _TopKShare:
    """``nautilus_source_topk_share``: each source's share of all returned top-K rows,
    computed at scrape time from the (aggregated) row counters — the live view of
    whether a boost hijacks the ranking."""

    def __init__(self, base: Any) -> None:
        self._base = base

    def collect(self) -> Iterable[Metric]:
        rows: dict[str, float] = {}
        for metric in self._base.collect():
            if metric.name != "nautilus_source_topk_rows":
                continue
            for sample in metric.samples:
                if sample.name.endswith("_total"):
                    source = sample.labels["source"]
                    rows[source] = rows.get(source, 0.0) + sample.value
        total = sum(rows.values())
        family = GaugeMetricFamily(
            SHARE_NAME,
            "Each source's share of the rows returned (the top K) since start-up, 0-1.",
            labels=["source"],
        )
        for source, count in sorted(rows.items()):
            family.add_metric([source], count / total if total else 0.0)
        yield family


class _Delegate:
    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry

    def collect(self) -> Iterable[Metric]:
        return self._registry.collect()


class _ProfilesShown:
    """``base``'s samples, those labelled with a profile only where ``shown`` allows its
    name (the global knobs' ``""`` names none: always kept)."""

    def __init__(self, base: Any, shown: Callable[[str], bool]) -> None:
        self._base, self._shown = base, shown

    def collect(self) -> Iterable[Metric]:
        for metric in self._base.collect():  # a fresh Metric each scrape: ours to trim
            metric.samples = [
                s
                for s in metric.samples
                if not s.labels.get("profile") or self._shown(s.labels["profile"])
            ]
            yield metric


def render(shown: Callable[[str], bool] | None = None) -> tuple[bytes, str]:
    """The exposition text of every worker's metrics, and its content type; ``shown``:
    which profiles' series the caller may see (None: every one)."""
    registry = CollectorRegistry()
    base: Any
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        base = multiprocess.MultiProcessCollector(None)  # type: ignore[no-untyped-call]
    else:
        base = _Delegate(REGISTRY)
    registry.register(base if shown is None else _ProfilesShown(base, shown))
    registry.register(_TopKShare(base))
    return generate_latest(registry), CONTENT_TYPE_LATEST


class TimedSource(ForwardingSource):
    """A source wrapped to time every search into ``nautilus_source_duration_seconds``.

    The broker's timeout cancels the search; the ``finally`` still records the wait.
    The build step (``prepare``) is forwarded untimed: the broker bounds it.
    """

    def __init__(self, inner: Source) -> None:
        super().__init__(inner)
        self._observe: Callable[[float], None] = SOURCE_DURATION.labels(inner.id).observe

    async def search(self, query: str, context: Mapping[str, Any], limit: int) -> list[Row]:
        started = time.perf_counter()
        try:
            return await self.inner.search(query, context, limit)
        finally:
            self._observe(time.perf_counter() - started)


def record_http_request(
    scope: Mapping[str, Any], status: int, started: float, routes: Iterable[str], **fields: Any
) -> None:
    """One HTTP request done, as both servers record it: its duration under its route
    (``other`` for a path outside ``routes``, so a caller's path never becomes a label)
    and one ``http_request`` log line with ``fields``."""
    elapsed = time.perf_counter() - started
    path: str = scope["path"]
    REQUEST_DURATION.labels(path if path in routes else "other", str(status)).observe(elapsed)
    _LOG.info(
        "http_request",
        method=scope["method"],
        path=path[:200],
        status=status,
        duration_ms=round(elapsed * 1000, 2),
        **fields,
    )
