"""The checks a server runs before it serves, and ``nautilus-ranking config`` reports: the
sources file, the API keys file and its grants, the ranking profiles."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from nautilus_ranking.confidence_fit_check import fit_problems
from nautilus_ranking.errors import Problem
from nautilus_ranking.profiles.build import AGENTS, Profiles, build_profiles
from nautilus_ranking.profiles.read import gather
from nautilus_ranking.settings.model import ConfigError, NautilusSettings


def check_at_start(settings: NautilusSettings) -> None:
    """The sources file, the boosts, the keys file's grants, the confidence fits, the
    profiles' restricting knobs and (strict mode) every profile problem, checked as
    ``nautilus-ranking config --strict`` checks them (without building a broker or
    loading a model): a problem is a ConfigError."""
    from nautilus_ranking.request.engine import NO_SOURCES
    from nautilus_ranking.source_settings import boost_problems, config_path, named_source_problems

    path = config_path(settings, None)
    listing, error = check_sources(settings, path)
    if error is not None:
        raise ConfigError(
            (
                Problem(
                    "NAUTILUS_CONFIG",
                    str(path),
                    error,
                    "a sources file nautilus-ranking config --strict accepts",
                ),
            )
        )
    if not listing:
        raise ConfigError(
            (
                Problem(
                    "NAUTILUS_CONFIG", str(path), "the sources file lists no sources", NO_SOURCES
                ),
            )
        )
    ids = [source["id"] for source in listing]
    problems = boost_problems(settings, ids) + named_source_problems(settings, ids)
    profiles, found = read_profiles(settings, ids)
    grants = tuple(keys_problems(settings, profiles)) + tuple(
        fit_problems(settings, path, profiles)
    )
    if (profiles.refused or grants) and not settings.config_strict:  # none fails open
        raise ConfigError(profiles.refused + grants)
    if settings.config_strict:
        problems += tuple(found) + grants
    if problems and settings.config_strict:
        raise ConfigError(problems)


def check_sources(
    settings: NautilusSettings, path: Path
) -> tuple[list[dict[str, str]] | None, str | None]:
    """Validate the sources file as a broker would (without building databases or
    connecting to one), and PostgreSQL sources' seeds as ``load`` would: each source's id
    and type (and a database's DSN, password masked), or the problem."""
    from nautilus_ranking.sources.factory import SourceConfigError, build_sources, load_sources

    try:
        sources, _ = build_sources(
            path, settings.data_dir, settings.vector_embedder, settings.embedder_cache_size
        )
    except (SourceConfigError, ImportError) as exc:
        return None, str(exc)
    for source in sources:
        source.close()
    specs = load_sources(path).specs
    from nautilus_ranking.sources.postgres.load import check_seeds, postgres_specs
    from nautilus_ranking.sources.postgres.load_steps import LoadError

    try:  # a PostgreSQL source's seed is read only by `load`: check it as load would
        check_seeds(postgres_specs(specs), path.parent)
    except LoadError as exc:
        return None, f"{path}: {exc}"
    return [
        {
            "id": spec.id,
            "type": spec.type,
            **({"dsn": str(spec.dsn)} if hasattr(spec, "dsn") else {}),
            **(spec.shown_options() if hasattr(spec, "shown_options") else {}),
        }  # Dsn masks itself; so does an HTTP source's shown_options
        for spec in specs
    ], None


def keys_problems(settings: NautilusSettings, profiles: Profiles) -> list[Problem]:
    """The API keys file as ``serve`` and ``mcp`` read it at start-up (missing, not a
    regular file, empty, a key listed twice; a grant that cannot be honoured): a gate
    must fail on what would stop the service."""
    from nautilus_ranking.settings.model import ConfigError

    try:  # the servers' web framework (the serve or mcp extra)
        import starlette  # noqa: F401
    except ImportError:  # no serve extra: nothing here reads the file
        return []
    from nautilus_ranking.startup.keys_file import load_api_keys

    try:
        load_api_keys(settings.serve_api_keys_file)
    except ConfigError as exc:
        return list(exc.problems)
    if settings.serve_api_keys_file is None:
        return []
    from nautilus_ranking.startup.key_grants import refusals
    from nautilus_ranking.startup.keys_file import read_key_lines

    path = settings.serve_api_keys_file
    return refusals(read_key_lines(path), profiles, path)


def read_profiles(
    settings: NautilusSettings,
    source_ids: Sequence[str] | None,
    agent_ids: Sequence[str] | None = None,
) -> tuple[Profiles, list[Problem]]:
    """The profiles and every problem with them, the sources' and agents' included."""
    entries, problems = gather(
        settings.profiles_file, NautilusSettings.model_config.get("env_file")
    )
    profiles = build_profiles(entries, problems)
    found = list(profiles.problems)
    for profile in profiles.by_name.values():
        boosts = profile.values.get("source_boosts", {})
        if source_ids is not None:
            known = {s.lower() for s in source_ids}
            found.extend(
                Problem(
                    profile.origins["source_boosts"],
                    sid,
                    f"no source has id {sid!r}",
                    ", ".join(source_ids),
                )
                for sid in boosts
                if sid not in known
            )
        if agent_ids is not None:
            found.extend(
                Problem(
                    profile.origins[AGENTS],
                    agent,
                    f"the broker's config has no agent {agent!r}",
                    ", ".join(agent_ids) or "(no agents listed)",
                )
                for agent in profile.agents
                if agent not in agent_ids
            )
    return profiles, found
