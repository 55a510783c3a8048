"""``nautilus-ranking config``: the effective settings and the sources file, checked as a broker and
``nautilus-ranking load`` would check them; with ``--strict``, a gate that fails on any problem."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nautilus_ranking.cli.args import CONFIG_HELP

if TYPE_CHECKING:  # loaded when the command runs (``nautilus-ranking --help`` needs none of it)
    from nautilus_ranking.errors import Problem
    from nautilus_ranking.profiles.build import Profiles
    from nautilus_ranking.settings.model import NautilusSettings


def add_parser(commands: Any, argv: Sequence[str] = ()) -> None:
    config = commands.add_parser(
        "config",
        help="show the effective settings, every skipped entry and the sources file's status",
    )
    config.add_argument("--config", help=CONFIG_HELP)
    config.add_argument("--json", action="store_true", help="one JSON object on stdout")
    config.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 if any entry was skipped or the sources file is broken "
        "(for deployment pipelines)",
    )
    config.add_argument(
        "--schema", action="store_true", help="print the sources file's JSON Schema and exit"
    )
    config.add_argument(
        "--env-file",
        metavar="FILE",
        help="check the NAUTILUS_* settings of this dotenv file instead of the environment",
    )
    config.add_argument(
        "--manifest",
        metavar="FILE",
        help="check the NAUTILUS_* env of a Kubernetes Deployment/StatefulSet "
        "(with its ConfigMaps) or a compose file, without deploying it",
    )
    config.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """``nautilus-ranking config``, with ``--manifest`` or ``--env-file`` read first."""
    from nautilus_ranking.service.manifest import with_manifest

    return with_manifest(run_config)(args)


def run_config(args: argparse.Namespace) -> int:
    """``nautilus-ranking config``: print the effective settings and sources, or gate them."""
    from nautilus_ranking.confidence_fit_check import fit_problems
    from nautilus_ranking.settings.model import NautilusSettings
    from nautilus_ranking.source_settings import boost_problems, config_path, named_source_problems
    from nautilus_ranking.sources.factory import sources_json_schema
    from nautilus_ranking.startup.checks import keys_problems, read_profiles

    if args.schema:
        print(json.dumps(sources_json_schema(), indent=2, sort_keys=True))
        return 0
    with _quiet("nautilus_ranking.settings.model") if args.strict else contextlib.nullcontext():
        settings = NautilusSettings()  # --strict reports each problem itself, once
    path = config_path(settings, args.config)
    sources = _sources_file(args, settings, path)
    source_ids = None if sources.listing is None else [s["id"] for s in sources.listing]
    profiles, profile_problems = read_profiles(settings, source_ids, sources.agents)
    problems = (
        list(settings.problems)
        + list(boost_problems(settings, source_ids) if source_ids is not None else ())
        + list(named_source_problems(settings, source_ids) if source_ids is not None else ())
        + profile_problems
        + keys_problems(settings, profiles)
        + fit_problems(settings, path, profiles)
    )
    failed = args.strict and bool(problems or sources.warnings or sources.error is not None)
    if args.json:
        _print_json(settings, problems, sources, profiles)
    elif not failed:  # a failed gate prints its problems alone, on stderr
        _print_text(settings, problems, sources, profiles)
    if failed:
        for problem in problems:
            print(f"nautilus-ranking: {problem.message}", file=sys.stderr)
        if sources.error is not None:
            print(f"nautilus-ranking: {sources.error}", file=sys.stderr)
        for warning in sources.warnings:
            print(f"nautilus-ranking: {warning}", file=sys.stderr)
        return 1
    return 0


@dataclass
class _SourcesFile:
    """The sources file as ``config`` reports it."""

    path: Path
    listing: list[dict[str, str]] | None  # each source's id and kind; None: unreadable
    error: str | None
    warnings: list[str]  # sources whose seed rows lack their id field
    #: a Nautilus broker's nautilus.yaml: its agents (profiles may name them); else None
    agents: list[str] | None


def _sources_file(args: argparse.Namespace, settings: NautilusSettings, path: Path) -> _SourcesFile:
    """The sources file checked as a broker would load it (or a Nautilus broker's
    nautilus.yaml, whose sources boosts name), its error saying how to check a
    manifest's in-container path here."""
    from nautilus_ranking.request.engine import NO_SOURCES
    from nautilus_ranking.startup.checks import check_sources

    # a Nautilus broker's nautilus.yaml: boosts name its sources (nautilus_ranking.upstream)
    from nautilus_ranking.upstream.broker_config import broker_agents, broker_sources

    listing, source_error = (
        (broker, None)
        if (broker := broker_sources(path)) is not None
        else check_sources(settings, path)
    )
    if (
        source_error is not None
        and getattr(args, "manifest", None)
        and args.config is None
        and settings.config is not None
        and not path.exists()
    ):  # the manifest's NAUTILUS_CONFIG is a path inside the container, not here
        source_error += (
            f" ({path} is NAUTILUS_CONFIG in the manifest, a path inside the container: "
            "pass --config with your copy of that file to check it here)"
        )
    id_problems = _id_problems(path) if source_error is None and broker is None else []
    if listing == []:
        source_error = f"{path}: lists no sources (valid: {NO_SOURCES})"
    agents = broker_agents(path) if broker is not None else None
    return _SourcesFile(path, listing, source_error, id_problems, agents)


def _print_json(
    settings: NautilusSettings, problems: list[Problem], sources: _SourcesFile, profiles: Profiles
) -> None:
    """``config --json``: one object on stdout."""
    from nautilus_ranking.cli.config_profiles import profiles_json

    print(
        json.dumps(
            {
                "settings": settings.effective(),
                "ranking_enabled": settings.ranking_enabled,
                "log_level_applied": _log_levels()
                or {"cli": settings.log_level, "serve": settings.log_level},
                "skipped": [
                    {
                        "variable": p.variable,
                        "value": p.shown_value,
                        "reason": p.reason,
                        "valid": p.valid,
                        "message": p.message,
                    }
                    for p in problems
                ],
                "sources_file": {
                    "path": str(sources.path),
                    "ok": sources.error is None,
                    "error": sources.error,
                    "sources": sources.listing or [],
                    "warnings": sources.warnings,
                },
                **({"profiles": profiles_json(profiles, settings)} if profiles else {}),
            },
            indent=2,
            sort_keys=True,
        )
    )


def _print_text(
    settings: NautilusSettings, problems: list[Problem], sources: _SourcesFile, profiles: Profiles
) -> None:
    """``config`` for a person: the settings table, the profiles, the sources file and
    what was skipped."""
    from nautilus_ranking.cli.config_profiles import profiles_text

    print(_settings_table(settings))
    if profiles:
        print(profiles_text(profiles, settings))
    print(f"\nranking: {'on' if settings.ranking_enabled else 'off (exact passthrough)'}")
    said = f"ERROR {sources.error}" if sources.error is not None else "(none)"
    print(f"sources: {sources.path}" + ("" if sources.listing else f": {said}"))  # listed below
    for source in sources.listing or []:
        print("  - " + "  ".join(source.values()))
    for warning in sources.warnings:
        print(f"  warning: {warning}")
    print("skipped:" if problems else "skipped: none")
    for problem in problems:
        print(f"  - {problem.message}")


@contextlib.contextmanager
def _quiet(name: str) -> Iterator[None]:
    """The stdlib logger ``name`` off for the block (its warnings are reported otherwise)."""
    target = logging.getLogger(name)
    was = target.disabled
    target.disabled = True
    try:
        yield
    finally:
        target.disabled = was


def _log_levels() -> dict[str, str] | None:
    """The levels that apply when ``NAUTILUS_LOG_LEVEL`` is unset (None when it is set):
    the commands whose output is the point log warnings, the servers info
    (:func:`nautilus_ranking.cli.main`)."""
    from nautilus_ranking.log import LogSettings

    if "log_level" in LogSettings().model_fields_set:
        return None
    return {"cli": "warning", "serve": "info"}


def _id_problems(path: Path) -> list[str]:
    """Sources whose seed rows lack their ``id_field`` (answered with a null id): one
    message each. A graph's entities and a PostgreSQL seed must have ids (checked above)."""
    from nautilus_ranking.sources.factory import load_sources
    from nautilus_ranking.sources.postgres.load import seed_path
    from nautilus_ranking.sources.schema import SeededSqliteSpec
    from nautilus_ranking.sources.seeds import id_problem, load_seed

    problems = []
    for spec in load_sources(path).specs:
        if not isinstance(spec, SeededSqliteSpec):
            continue
        seed = seed_path(spec.seed, path.parent)
        problem = id_problem(seed, load_seed(seed), spec.id_field)
        if problem is not None:
            problems.append(f"source {spec.id!r}: {problem}")
    return problems


def _settings_table(settings: NautilusSettings) -> str:
    from nautilus_ranking.embedders.default import AUTO, resolution_reason

    rows = []
    applied = _log_levels()
    for name, value in settings.effective().items():
        if name == "NAUTILUS_EMBEDDER" and settings.embedder == AUTO:
            shown = f"{value} ({resolution_reason(AUTO)})"
        elif name == "NAUTILUS_RANKING_IDF" and settings.ranking_idf is None:
            shown = f"{str(value).lower()} (default: the embedder's, {settings.resolved_embedder})"
        elif name == "NAUTILUS_LOG_LEVEL" and applied is not None:
            shown = f"{applied['cli']} (serve, mcp: {applied['serve']}; unset: by command)"
        elif isinstance(value, dict):
            shown = ",".join(f"{k}:{v}" for k, v in value.items()) or "(unset)"
        else:
            shown = (
                "(unset)"
                if value is None
                else str(value).lower()
                if isinstance(value, bool)
                else str(value)
            )
        rows.append((name, shown))
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {shown}" for name, shown in rows)
