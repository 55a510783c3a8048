"""``python -m nautilus_ranking.calibration.through_broker --config nautilus.yaml --out fit.json
…``: ``nautilus-ranking calibrate`` with its queries asked through the Nautilus broker.

A confidence fit is true only of the sources it was made on, and inside the broker
those are the broker's adapters, which our own ``calibrate`` (our sources file) never
queries. This runs the same command (every flag, the same fit, file and report) with
one step changed: each off-topic and judged query is a request to a broker built by
``Broker.from_config`` from ``--config``, with the ranking attached
(``attach_ranking(config_path=…)``), asked as ``--agent`` with ``--context`` (its
``purpose``, which the broker's policy reads) and ``--intent-prefix`` before the
query (the routing word the broker routes by, ``"ops: "``: the ranking leaves it out
of the query it ranks by). The signals read are those of the ranking the broker made,
so the fit is made for that ``nautilus.yaml``: its digest is what ``attach_ranking``
checks a fit against. A query the broker answered with no ranking (refused, routed to
no source, no rows) is counted as skipped, as ``calibrate`` counts a query with no
confidence.

It runs in a process of its own, never in a serving broker's: it reaches the evaluation
code ``calibrate`` shares, which ``upstream/`` (what runs inside the broker) must not
import.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from nautilus_ranking.calibration.collect import CalibrateError, Collected, observations_of
from nautilus_ranking.evaluation.progress import Progress
from nautilus_ranking.evaluation.sweep import row_id
from nautilus_ranking.selection import confidence
from nautilus_ranking.settings.model import NautilusSettings
from nautilus_ranking.upstream.attach import attach_ranking

Judged = Sequence[tuple[str, str, Mapping[str, int]]]
Collector = Callable[
    [str | None, NautilusSettings, Sequence[str], Judged, str, bool | None], Collected
]


def broker_collector(agent_id: str, context: Mapping[str, Any], prefix: str) -> Collector:
    """``calibrate``'s collect step, with each query asked of the Nautilus broker."""

    def collect(
        config: str | None,
        settings: NautilusSettings,
        null: Sequence[str],
        judged: Judged,
        id_field: str = "id",
        progress: bool | None = None,
    ) -> Collected:
        if config is None:
            raise CalibrateError("--config: the broker's nautilus.yaml is required here")
        path = Path(config).expanduser()
        empty: dict[str, int] = {}
        items = [(f"null-{i}", text, empty) for i, text in enumerate(null)] + list(judged)
        # no fit (a stale one is what this replaces), no abstain, no budget: every
        # ranked row's signals, as calibrate reads them
        settings = settings.model_copy(
            update={
                "ranking_confidence_fit": None,
                "ranking_min_confidence": None,
                "ranking_max_tokens": None,
            }
        )
        started = time.perf_counter()
        asker = (agent_id, context, prefix)
        rows, skipped = _ask(path, settings, items, len(null), asker, id_field, progress)
        elapsed = time.perf_counter() - started
        if not rows:
            raise CalibrateError(
                "no query was ranked: does the broker route the queries (--intent-prefix) "
                "and allow the agent (--agent, --context's purpose)?"
            )
        return Collected(observations_of(rows), path, skipped, elapsed, 0.0)

    return collect


def _ask(
    path: Path,
    settings: NautilusSettings,
    items: list[tuple[str, str, Mapping[str, int]]],
    nulls: int,
    asker: tuple[str, Mapping[str, Any], str],
    id_field: str,
    progress: bool | None,
) -> tuple[list[tuple[str, list[float], bool, int]], int]:
    """(setup, signals, judged, label) of each query the broker ranked, and how many it
    did not."""
    agent_id, context, prefix = asker
    broker = importlib.import_module("nautilus").Broker.from_config(path)
    rows: list[tuple[str, list[float], bool, int]] = []
    skipped = 0
    try:
        attached = attach_ranking(broker, settings, config_path=path, keep=1)
        if not attached.enabled:
            raise CalibrateError(
                "ranking is off, and the confidence is the ranking's: set a ranking knob "
                "(NAUTILUS_RANKING_TOP_K=10, for one) and calibrate again"
            )
        with Progress(len(items), "calibrate: asking the broker", enabled=progress) as bar:
            for i, (_, text, grades) in enumerate(items):
                response = broker.request(agent_id, prefix + text, dict(context))
                bar.step()
                ranking = attached.ranking(response.request_id)
                found = ranking.confidence if ranking is not None else None
                if ranking is None or found is None:
                    skipped += 1
                    continue
                signals = confidence.Signals(**found["signals"]).vector().tolist()
                ids = [row_id(r.row, id_field) for r in ranking.ranking[: confidence.TOP_K]]
                label = int(any(grades.get(d, 0) >= 1 for d in ids if d is not None))
                rows.append((str(found["setup"]), signals, i >= nulls, label))
    finally:
        broker.close()
    return rows, skipped


def main(argv: Sequence[str]) -> int:
    """Parse ``calibrate``'s flags plus the broker's three, and run it."""
    from nautilus_ranking.calibration import command

    parser = argparse.ArgumentParser(prog="python -m nautilus_ranking.calibration.through_broker")
    commands = parser.add_subparsers(dest="command", required=True)
    command.add_parser(commands)
    calibrate = commands.choices["calibrate"]
    calibrate.add_argument("--agent", required=True, help="the broker agent the queries ask as")
    calibrate.add_argument(
        "--context",
        default="{}",
        help='the request context, as JSON (its "purpose" is what the broker\'s policy reads)',
    )
    calibrate.add_argument(
        "--intent-prefix",
        default="",
        metavar="TEXT",
        help='put before each query: the routing word the broker routes by, e.g. "ops: "',
    )
    args = parser.parse_args(["calibrate", *argv])
    try:
        context = json.loads(args.context)
    except ValueError as exc:
        parser.error(f"--context: not JSON ({exc})")
    if not isinstance(context, dict):
        parser.error(f"--context: a JSON object, got {args.context!r}")
    from nautilus_ranking.errors import NautilusError
    from nautilus_ranking.log import LogSettings, configure_logging

    log = LogSettings()
    level = log.log_level.strip().lower() if "log_level" in log.model_fields_set else "warning"
    configure_logging(level, log.log_format.strip().lower())
    try:
        return int(command.run(args, broker_collector(args.agent, context, args.intent_prefix)))
    except NautilusError as exc:  # a refused fit or knob, nothing ranked: a line, exit 1
        print(f"nautilus-ranking: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
