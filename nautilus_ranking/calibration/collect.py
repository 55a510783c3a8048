"""Running ``calibrate``'s queries through the configured broker and reading their signals.

The broker is built as ``query``, ``eval`` and the service build theirs
(``Broker.from_config`` with the run's settings); each query is one fan-out, a few at a
time (``eval``'s ``fetch_all``), and the broker's own ranker ranks it, so the signals
are the ones the confidence reads when the deployment serves.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from nautilus_ranking.broker import Broker
from nautilus_ranking.calibration.fit import Observations
from nautilus_ranking.errors import NautilusError
from nautilus_ranking.evaluation.evaluate import fetch_all
from nautilus_ranking.evaluation.progress import Progress
from nautilus_ranking.evaluation.sweep import Fetched, row_id
from nautilus_ranking.selection import confidence
from nautilus_ranking.settings.model import NautilusSettings
from nautilus_ranking.source_settings import config_path


class CalibrateError(NautilusError):
    """What stops a calibration: ranking off, nothing ranked, no fit possible."""


@dataclass
class Collected:
    """The scored queries, the sources file they ran on, and what the run cost."""

    observations: Observations
    sources_file: Path
    skipped: int  # queries with no confidence (nothing ranked)
    fetch_seconds: float
    rank_seconds: float


def collect(
    config: str | None,
    settings: NautilusSettings,
    null: Sequence[str],
    judged: Sequence[tuple[str, str, Mapping[str, int]]],
    id_field: str = "id",
    progress: bool | None = None,
) -> Collected:
    """Fetch and rank every null and judged query; their signals and labels."""
    empty: dict[str, int] = {}
    items = [(f"null-{i}", text, empty) for i, text in enumerate(null)] + list(judged)
    # the fit in force changes no signal, and a stale one is what calibrate replaces
    settings = settings.model_copy(update={"ranking_confidence_fit": None})
    broker = Broker.from_config(config, settings)
    with broker:
        ranker = broker.synthesizer
        if not ranker.ranking_enabled:
            raise CalibrateError(
                "ranking is off, and the confidence is the ranking's: set a ranking knob "
                "(NAUTILUS_RANKING_TOP_K=10, for one) and calibrate again"
            )
        started = time.perf_counter()
        with Progress(len(items), "calibrate: fetching", enabled=progress) as bar:
            runs = asyncio.run(fetch_all(broker, items, bar))
        fetched = time.perf_counter() - started
        started = time.perf_counter()
        with Progress(len(runs), "calibrate: ranking", enabled=progress) as bar:
            rows, skipped = _signals(ranker, runs, len(null), id_field, bar)
        ranked = time.perf_counter() - started
    if not rows:
        raise CalibrateError("no query was ranked: do the sources return rows?")
    return Collected(observations_of(rows), config_path(settings, config), skipped, fetched, ranked)


def observations_of(rows: list[tuple[str, list[float], bool, int]]) -> Observations:
    """The ranked queries' ``(setup, signals, judged, label)`` as the fit reads them: those
    of the setup most of them were ranked with (the first seen on a tie)."""
    setup = Counter(r[0] for r in rows).most_common(1)[0][0]
    rows = [r for r in rows if r[0] == setup]
    return Observations(
        setup,
        np.array([r[1] for r in rows], dtype=np.float64),
        np.array([r[2] for r in rows], dtype=bool),
        np.array([r[3] for r in rows], dtype=np.intp),
    )


def _signals(
    ranker: Any, runs: list[Fetched], nulls: int, id_field: str, bar: Progress
) -> tuple[list[tuple[str, list[float], bool, int]], int]:
    """(setup, signals, judged, label) of each ranked query, and how many had none."""
    rows = []
    skipped = 0
    for i, run in enumerate(runs):
        result = ranker.merge_ranked(run.results, {"query": run.text})
        bar.step()
        found = result.confidence
        if found is None:
            skipped += 1
            continue
        ids = [row_id(r.row, id_field) for r in result.ranking[: confidence.TOP_K]]
        label = int(any(run.grades.get(d, 0) >= 1 for d in ids if d is not None))
        rows.append((found.setup, found.signals.vector().tolist(), i >= nulls, label))
    return rows, skipped


def shipped_entry(setup: str) -> dict[str, Any] | None:
    """The shipped fit of ``setup`` as the file stores it (None: no such setup)."""
    text = resources.files("nautilus_ranking.selection").joinpath(confidence.FIT_FILE)
    entry = json.loads(text.read_text("utf-8")).get("setups", {}).get(setup)
    return dict(entry) if entry is not None else None
