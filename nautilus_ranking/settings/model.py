"""Settings: ``NAUTILUS_*`` environment variables, a ``.env`` file, arguments.

Precedence (pydantic-settings): constructor arguments > environment > ``.env``
in the working directory > defaults.

A typo must never break retrieval: every bad value is reported as one
structured warning (variable, bad value, reason, valid choices) and skipped —
that knob falls back to unset. ``NAUTILUS_CONFIG_STRICT=true`` turns the same
problems into one :class:`ConfigError` raised while the settings are built, so
a bad manifest never starts serving.

One concept, the one settings model: every field and the validator that parses each
one are kept together, so that a knob's field, its parser and its default read in one
place. What could stand apart has moved out (boost entries: ``boost_entries.py``; the
typo check: ``unknown_variables.py``; which knob is what: ``knobs.py``; profiles:
``profiles/``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, ModelWrapValidatorHandler, PrivateAttr, model_validator
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
)

from nautilus_ranking.embedders.default import (
    AUTO,
    idf_default,
    installed_embedder,
    resolve_embedder,
    vector_embedder_name,
)
from nautilus_ranking.errors import NautilusError, Problem, cut
from nautilus_ranking.log import VALID_LOG_FORMATS, VALID_LOG_LEVELS, LogSettings, get_logger
from nautilus_ranking.settings.boost_entries import BOOSTS_VAR, collect_source_boosts
from nautilus_ranking.settings.knobs import RANKING_SWITCHES, ranking_on
from nautilus_ranking.settings.parsing import (
    CURATED_KEYWORDS,
    LEXICAL_SCORERS,
    REQUEST_TOOLS,
    parse_bool,
    parse_choice,
    parse_cursor_keys,
    parse_diversity,
    parse_field_name,
    parse_idf,
    parse_int,
    parse_min_confidence,
    parse_near_duplicates,
    parse_origins,
    parse_ranking_cut,
    parse_seconds,
    parse_source_ids,
)
from nautilus_ranking.settings.time_entries import (
    parse_may_revise,
    parse_recency,
    parse_source_paths,
)
from nautilus_ranking.settings.unknown_variables import (
    DOTENV_UNKNOWN,
    DotEnvTypos,
    unknown_variables,
)

logger = get_logger("nautilus_ranking.config")

#: The key that marks a profile's values handed to the settings' validator: they are
#: parsed as the variables are, and the environment is not read for typos again.
PROFILE_VALUES = "__nautilus_profile_values__"

#: ``auto`` (the default): the model where the ``embed`` extra is installed, else hashing
#: (nautilus_ranking/embedders/default.py).
VALID_EMBEDDERS: tuple[str, ...] = ("auto", "hashing", "onnx", "onnx-float32", "noop")


class ConfigError(NautilusError):
    """Strict mode found configuration problems; the message lists every one."""

    def __init__(self, problems: tuple[Problem, ...]) -> None:
        self.problems = problems
        lines = "\n".join(f"  - {p.message}" for p in problems)
        super().__init__(f"{len(problems)} configuration problem(s):\n{lines}")


def log_problem(problem: Problem) -> None:
    """Emit the one structured warning for a skipped value."""
    # a profile's boosts (NAUTILUS_PROFILES__<NAME>__SOURCE_BOOSTS, or its file's key) too
    boosts = problem.variable == BOOSTS_VAR or "source_boosts" in problem.variable.lower()
    event = "source_boost_skipped" if boosts else "config_value_skipped"
    logger.warning(
        event,
        variable=problem.variable,
        value=problem.shown_value,
        reason=problem.reason,
        valid=problem.valid,
    )


def parse_source_boosts(raw: str | Mapping[str, object] | None) -> dict[str, str]:
    """``NAUTILUS_SOURCE_BOOSTS`` to ``{source_id: level}``; warns for each bad entry."""
    boosts, problems = collect_source_boosts(raw)
    for problem in problems:
        log_problem(problem)
    return boosts


class NautilusSettings(LogSettings):
    """Every ``NAUTILUS_*`` knob. All ranking knobs unset means: change nothing."""

    ranking_top_k: int | None = None
    ranking_idf: bool | None = None  # None: unset, IDF as the embedder's default (auto)
    source_boosts: Annotated[dict[str, str], NoDecode] = Field(default_factory=dict)
    ranking_max_candidates: int | None = None
    ranking_dedup_key: str | None = None
    ranking_max_tokens: int | None = None
    # Under a budget, a row too large for it is handed over as its best passage.
    ranking_budget_passages: bool = True
    ranking_cut: str | None = None
    ranking_near_duplicates: float | None = None
    ranking_diversity: float | None = None
    ranking_max_per_source: int | None = None
    ranking_min_confidence: float | None = None
    ranking_canonical_sources: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # Time (synthesis/recency.py): the decay by age, revisions superseded, and by source
    # where a row's time and its document key are.
    ranking_recency: str | None = None
    ranking_supersede: bool = False
    ranking_time_fields: Annotated[dict[str, str], NoDecode] = Field(default_factory=dict)
    ranking_document_keys: Annotated[dict[str, str], NoDecode] = Field(default_factory=dict)
    # Which sources' newer revisions may supersede which other sources' (by document key).
    ranking_may_revise: Annotated[dict[str, list[str]], NoDecode] = Field(default_factory=dict)
    ranking_lexical: str = "bm25"
    ranking_curated_keywords: str = "routing"
    embedder: str = AUTO
    embedder_cache_size: int = 10_000
    embedder_disk_cache_mb: int = 256
    embedder_deadline_ms: int = 1500
    embedder_max_rows: int = 100
    config_strict: bool = False
    config: str | None = None
    data_dir: Path = Path("~/.cache/nautilus")
    # The key that signs cursors (nautilus_ranking/request/cursor_keys.py): unset, a key
    # file in data_dir; replicas share one here, with the keys it replaces beside it.
    cursor_key: str | None = None
    cursor_previous_keys: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # `nautilus-ranking serve` (nautilus_ranking/service/): read once at start-up by each worker.
    serve_host: str = "127.0.0.1"
    serve_port: int = 8000
    serve_workers: int = 1
    serve_allow_overrides: bool = True
    serve_max_query_chars: int = 1000
    serve_max_body_bytes: int = 16_384
    serve_max_concurrency: int = 64
    serve_max_ranked_rows: int = 10_000
    serve_request_timeout_s: float = 10.0
    serve_body_timeout_s: float = 5.0
    serve_probe_interval_s: float = 10.0
    serve_api_keys_file: str | None = None
    serve_cors_origins: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # Ranking profiles (nautilus_ranking/profiles/): the YAML file of many; each one's
    # knobs are NAUTILUS_PROFILES__<NAME>__<KNOB>, read beside these settings.
    profiles_file: str | None = None
    # Inside the Nautilus broker (nautilus_ranking/upstream/): the accessor's memory.
    upstream_rankings_max_bytes: int = 64 * 1024 * 1024
    # Inside the Nautilus broker: the query vectors its pgvector adapters get (0: none).
    upstream_vector_dim: int = 1024
    # Inside the Nautilus broker: the ranked MCP tool's attestation in _meta, not its text.
    upstream_attestation_in_meta: bool = False
    # Inside the Nautilus broker: the request tools its MCP server lists (both, ranked).
    upstream_request_tools: str = "both"
    # Traces (nautilus_ranking/tracing/): on only when an OpenTelemetry SDK is set up.
    trace_query_text: bool = False
    trace_propagate: bool = True
    trace_baggage: bool = False
    _problems: tuple[Problem, ...] = PrivateAttr(default=())

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, DotEnvTypos(dotenv_settings), file_secret_settings)

    @property
    def problems(self) -> tuple[Problem, ...]:
        """Every value that was skipped while these settings were built."""
        return self._problems

    @classmethod
    def parse_values(cls, data: dict[str, Any]) -> tuple[dict[str, Any], list[Problem]]:
        """Every field of ``data`` through its parser, a bad value replaced by the field's
        default and named in the problems; no environment, ``.env`` or file is read. What
        a ranking profile's knobs are parsed by (once per profile: building a settings
        object reads the environment and ``.env`` again, which made 17,000 profiles in
        the environment quadratic), and the first step of building these settings."""
        data = dict(data)
        found: list[Problem] = []

        def take(field: str, parsed: tuple[Any, Problem | None]) -> None:
            value, problem = parsed
            data[field] = value
            if problem is not None:
                found.append(problem)

        def var(field: str) -> str:
            return "NAUTILUS_" + field.upper()

        def default(field: str) -> Any:  # a skipped value falls back to the field's default
            return cls.model_fields[field].default

        for field in ("ranking_top_k", "ranking_max_candidates", "ranking_max_per_source"):
            take(field, parse_int(var(field), data.get(field), default=default(field)))
        take(
            "ranking_max_tokens",
            parse_int(
                var("ranking_max_tokens"),
                data.get("ranking_max_tokens"),
                valid="an integer >= 1 (tokens of the rows handed over), or unset",
            ),
        )
        take(
            "ranking_budget_passages",
            parse_bool(
                var("ranking_budget_passages"),
                data.get("ranking_budget_passages"),
                default("ranking_budget_passages"),
            ),
        )
        take("ranking_cut", parse_ranking_cut(var("ranking_cut"), data.get("ranking_cut")))
        take(
            "ranking_canonical_sources",
            parse_source_ids(
                var("ranking_canonical_sources"), data.get("ranking_canonical_sources")
            ),
        )
        take(
            "ranking_near_duplicates",
            parse_near_duplicates(
                var("ranking_near_duplicates"), data.get("ranking_near_duplicates")
            ),
        )
        take(
            "ranking_diversity",
            parse_diversity(var("ranking_diversity"), data.get("ranking_diversity")),
        )
        take(
            "ranking_min_confidence",
            parse_min_confidence(var("ranking_min_confidence"), data.get("ranking_min_confidence")),
        )
        take(
            "ranking_idf",
            parse_idf(var("ranking_idf"), data.get("ranking_idf")),
        )
        take(
            "ranking_lexical",
            parse_choice(
                var("ranking_lexical"),
                data.get("ranking_lexical"),
                LEXICAL_SCORERS,
                default("ranking_lexical"),
            ),
        )
        take(
            "ranking_curated_keywords",
            parse_choice(
                var("ranking_curated_keywords"),
                data.get("ranking_curated_keywords"),
                CURATED_KEYWORDS,
                default("ranking_curated_keywords"),
            ),
        )
        take(
            "upstream_rankings_max_bytes",
            parse_int(
                var("upstream_rankings_max_bytes"),
                data.get("upstream_rankings_max_bytes"),
                minimum=0,
                default=default("upstream_rankings_max_bytes"),
                valid="an integer >= 0 (bytes of compact JSON; 0: keep none)",
            ),
        )
        take(
            "upstream_request_tools",
            parse_choice(
                var("upstream_request_tools"),
                data.get("upstream_request_tools"),
                REQUEST_TOOLS,
                default("upstream_request_tools"),
            ),
        )
        take(
            "upstream_vector_dim",
            parse_int(
                var("upstream_vector_dim"),
                data.get("upstream_vector_dim"),
                minimum=0,
                maximum=2000,
                default=default("upstream_vector_dim"),
                valid="an integer from 0 to 2000 (the vectors' dimension, as "
                "nautilus-ranking load wrote them; HNSW indexes at most 2000; 0: no query "
                "vectors)",
            ),
        )
        take(
            "config_strict",
            parse_bool(var("config_strict"), data.get("config_strict"), default("config_strict")),
        )
        take("ranking_recency", parse_recency(var("ranking_recency"), data.get("ranking_recency")))
        take(
            "ranking_supersede",
            parse_bool(
                var("ranking_supersede"),
                data.get("ranking_supersede"),
                default("ranking_supersede"),
            ),
        )
        for field in ("ranking_time_fields", "ranking_document_keys"):
            take(field, parse_source_paths(var(field), data.get(field)))
        take(
            "ranking_may_revise",
            parse_may_revise(var("ranking_may_revise"), data.get("ranking_may_revise")),
        )
        take(
            "ranking_dedup_key",
            parse_field_name(var("ranking_dedup_key"), data.get("ranking_dedup_key")),
        )
        take(
            "embedder",
            parse_choice(
                var("embedder"), data.get("embedder"), VALID_EMBEDDERS, default("embedder")
            ),
        )
        take("embedder", installed_embedder(var("embedder"), data["embedder"], default("embedder")))
        take(
            "embedder_cache_size",
            parse_int(
                var("embedder_cache_size"),
                data.get("embedder_cache_size"),
                minimum=0,
                default=default("embedder_cache_size"),
                valid="an integer >= 0 (0: no cache)",
            ),
        )
        take(
            "embedder_disk_cache_mb",
            parse_int(
                var("embedder_disk_cache_mb"),
                data.get("embedder_disk_cache_mb"),
                minimum=0,
                default=default("embedder_disk_cache_mb"),
                valid="an integer >= 0 (MB; 0: no cache on disk)",
            ),
        )
        take(
            "embedder_deadline_ms",
            parse_int(
                var("embedder_deadline_ms"),
                data.get("embedder_deadline_ms"),
                minimum=0,
                default=default("embedder_deadline_ms"),
                valid="an integer >= 0 (milliseconds; 0: no deadline)",
            ),
        )
        take(
            "embedder_max_rows",
            parse_int(
                var("embedder_max_rows"),
                data.get("embedder_max_rows"),
                minimum=0,
                default=default("embedder_max_rows"),
                valid="an integer >= 0 (rows; 0: every row)",
            ),
        )
        take(
            "log_level",
            parse_choice(
                var("log_level"), data.get("log_level"), VALID_LOG_LEVELS, default("log_level")
            ),
        )
        take(
            "log_format",
            parse_choice(
                var("log_format"), data.get("log_format"), VALID_LOG_FORMATS, default("log_format")
            ),
        )
        _take_serve_settings(data, take, default)
        keys, problem = parse_cursor_keys(var("cursor_key"), data.get("cursor_key"))
        if len(keys) > 1:  # one key signs; the ones it replaces are the other setting's
            keys, problem = (
                [],
                Problem(
                    var("cursor_key"),
                    f"({len(keys)} keys)",
                    "one key signs cursors",
                    "one key; the keys it replaces in NAUTILUS_CURSOR_PREVIOUS_KEYS",
                ),
            )
        take("cursor_key", (keys[0] if keys else None, problem))
        take(
            "cursor_previous_keys",
            parse_cursor_keys(var("cursor_previous_keys"), data.get("cursor_previous_keys")),
        )
        for field in (
            "trace_query_text",
            "trace_propagate",
            "upstream_attestation_in_meta",
            "trace_baggage",
        ):
            take(field, parse_bool(var(field), data.get(field), default(field)))
        raw_boosts = data.get("source_boosts")
        if raw_boosts is not None and not isinstance(raw_boosts, str | Mapping):
            raw_boosts = str(raw_boosts)
        boosts, boost_problems = collect_source_boosts(raw_boosts)
        data["source_boosts"] = boosts
        found.extend(boost_problems)
        raw_dir = data.get("data_dir")
        if isinstance(raw_dir, str) and not raw_dir.strip():
            data.pop("data_dir")
            found.append(
                Problem(
                    var("data_dir"),
                    raw_dir,
                    "empty (databases would be built in the working directory)",
                    f"a folder, e.g. {default('data_dir')} (the default)",
                )
            )
        return data, found

    @model_validator(mode="wrap")
    @classmethod
    def _skip_bad_values(cls, data: Any, handler: ModelWrapValidatorHandler[Any]) -> Any:
        if not isinstance(data, dict):
            return handler(data)
        data = dict(data)
        # A profile's knobs are parsed by these same parsers (nautilus_ranking/profiles/):
        # its problems are the profile's, reported (or refused) where it is loaded.
        of_profile = bool(data.pop(PROFILE_VALUES, False))
        data, found = cls.parse_values(data)
        strict = data["config_strict"]
        if not of_profile:
            found.extend(unknown_variables(cls, data.pop(DOTENV_UNKNOWN, ())))

        if of_profile:
            settings = handler(data)
            settings._problems = tuple(found)
            return settings
        if strict and found:  # the error lists every problem: no warning each as well
            raise ConfigError(tuple(found))
        for problem in found:
            log_problem(problem)
        settings = handler(data)
        settings._problems = tuple(found)
        return settings

    @property
    def ranking_enabled(self) -> bool:
        """True when any knob that turns ranking on is set (``knobs.RANKING_SWITCHES``);
        otherwise the broker passes rows through."""
        return ranking_on(
            {k.field: getattr(self, k.field) for k in RANKING_SWITCHES}, _switch_defaults()
        )

    @property
    def resolved_embedder(self) -> str:
        """The embedder content is scored with: ``embedder``, or for ``auto`` the model
        where it is installed, else ``hashing``. What everything keyed on the embedder
        uses (a cursor, ``explain``, ``/v1/config``, eval), never the word ``auto``."""
        return resolve_embedder(self.embedder)

    @property
    def resolved_idf(self) -> bool:
        """Whether content is scored with the batch-local IDF: ``ranking_idf`` when set,
        else the resolved embedder's default (on with a model, off with words: the
        measured choice, docs/tuning-embedders.md). What a cursor, ``explain``,
        ``/v1/config`` and the ranker use."""
        return idf_default(self.resolved_embedder) if self.ranking_idf is None else self.ranking_idf

    @property
    def vector_embedder(self) -> str:
        """The embedder that sources storing or querying vectors use: ``embedder`` when
        set, else ``hashing`` (the default is for content scoring only)."""
        return vector_embedder_name(self.embedder)

    def effective(self) -> dict[str, Any]:
        """The settings as plain JSON-able values, keyed by environment variable (the
        embedder as resolved)."""
        values = self.model_dump(mode="json")
        values["embedder"] = self.resolved_embedder
        values["ranking_idf"] = self.resolved_idf
        for secret in ("cursor_key", "cursor_previous_keys"):  # shown set, never shown
            if values[secret]:
                values[secret] = "***" if isinstance(values[secret], str) else ["***"]
        return {"NAUTILUS_" + name.upper(): value for name, value in values.items()}


@functools.cache
def _switch_defaults() -> dict[str, Any]:
    """Each ranking switch's default (unset) value."""
    return {
        k.field: NautilusSettings.model_fields[k.field].get_default(call_default_factory=True)
        for k in RANKING_SWITCHES
    }


def _take_serve_settings(
    data: dict[str, Any],
    take: Callable[[str, tuple[Any, Problem | None]], None],
    default: Callable[[str], Any],
) -> None:
    """The ``NAUTILUS_SERVE_*`` knobs, each warned about and skipped (back to
    ``default(field)``, the field's default) like the others."""

    def var(field: str) -> str:
        return "NAUTILUS_" + field.upper()

    host = data.get("serve_host")
    if host is not None and not (
        isinstance(host, str)
        and host.strip()
        and re.fullmatch(r"[A-Za-z0-9.:\-\[\]]{1,253}", host.strip())
    ):
        take(
            "serve_host",
            (
                default("serve_host"),
                Problem(
                    var("serve_host"),
                    cut(host),
                    "not a host name or address",
                    "an address such as 127.0.0.1 or 0.0.0.0",
                ),
            ),
        )
    elif host is not None:
        data["serve_host"] = host.strip()
    take(
        "serve_port",
        parse_int(
            var("serve_port"),
            data.get("serve_port"),
            default=default("serve_port"),
            maximum=65535,
            valid="an integer from 1 to 65535",
        ),
    )
    for field in (
        "serve_workers",
        "serve_max_query_chars",
        "serve_max_body_bytes",
        "serve_max_concurrency",
        "serve_max_ranked_rows",
    ):
        take(
            field,
            parse_int(var(field), data.get(field), default=default(field), valid="an integer >= 1"),
        )
    take(
        "serve_allow_overrides",
        parse_bool(
            var("serve_allow_overrides"),
            data.get("serve_allow_overrides"),
            default("serve_allow_overrides"),
        ),
    )
    for field in ("serve_request_timeout_s", "serve_probe_interval_s", "serve_body_timeout_s"):
        take(field, parse_seconds(var(field), data.get(field), default(field)))
    take(
        "serve_api_keys_file",
        parse_field_name(var("serve_api_keys_file"), data.get("serve_api_keys_file")),
    )
    take(
        "profiles_file",
        parse_field_name(var("profiles_file"), data.get("profiles_file")),
    )
    take(
        "serve_cors_origins",
        parse_origins(var("serve_cors_origins"), data.get("serve_cors_origins")),
    )
