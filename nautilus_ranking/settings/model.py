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
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, ModelWrapValidatorHandler, PrivateAttr, model_validator
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
)

from nautilus_ranking.embedders.default import (
    idf_default,
    resolve_embedder,
    vector_embedder_name,
)
from nautilus_ranking.errors import NautilusError, Problem, cut
from nautilus_ranking.log import VALID_LOG_FORMATS, VALID_LOG_LEVELS, LogSettings, get_logger
from nautilus_ranking.settings.boost_entries import BOOSTS_VAR, collect_source_boosts
from nautilus_ranking.settings.declaration import Setting
from nautilus_ranking.settings.knobs import (
    DEFAULTS,
    RANKING_SWITCHES,
    RankingKnobs,
    boolean,
    counted,
    one_of,
    parse_declared,
    ranking_on,
    unset_or,
)
from nautilus_ranking.settings.parsing import (
    REQUEST_TOOLS,
    parse_cursor_keys,
    parse_field_name,
    parse_int,
    parse_origins,
    parse_seconds,
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


def _host(var: str, raw: object, default: Any) -> tuple[Any, Problem | None]:
    """A host name or address (stripped); anything else is the default, and why."""
    if raw is None:
        return default, None
    if (
        isinstance(raw, str)
        and raw.strip()
        and re.fullmatch(r"[A-Za-z0-9.:\-\[\]]{1,253}", raw.strip())
    ):
        return raw.strip(), None
    problem = Problem(
        var, cut(raw), "not a host name or address", "an address such as 127.0.0.1 or 0.0.0.0"
    )
    return default, problem


def _port(var: str, raw: object, default: Any) -> tuple[int | None, Problem | None]:
    return parse_int(var, raw, default=default, maximum=65535, valid="an integer from 1 to 65535")


def _vector_dim(var: str, raw: object, default: Any) -> tuple[int | None, Problem | None]:
    return parse_int(
        var,
        raw,
        minimum=0,
        maximum=2000,
        default=default,
        valid="an integer from 0 to 2000 (the vectors' dimension, as nautilus-ranking load "
        "wrote them; HNSW indexes at most 2000; 0: no query vectors)",
    )


def _seconds(var: str, raw: object, default: Any) -> tuple[float, Problem | None]:
    return parse_seconds(var, raw, default)


def _one_cursor_key(var: str, raw: object, default: Any) -> tuple[str | None, Problem | None]:
    """One key signs cursors; the ones it replaces are the other setting's."""
    keys, problem = parse_cursor_keys(var, raw)
    if len(keys) > 1:
        return None, Problem(
            var,
            f"({len(keys)} keys)",
            "one key signs cursors",
            "one key; the keys it replaces in NAUTILUS_CURSOR_PREVIOUS_KEYS",
        )
    return (keys[0] if keys else None), problem


def _folder(var: str, raw: object, default: Any) -> tuple[Any, Problem | None]:
    """A folder; blank would build databases in the working directory: the default."""
    if isinstance(raw, str) and not raw.strip():
        return default, Problem(
            var,
            raw,
            "empty (databases would be built in the working directory)",
            f"a folder, e.g. {default} (the default)",
        )
    return raw if raw is not None else default, None


def _plain(var: str, raw: object, default: Any) -> tuple[Any, None]:
    """A value pydantic checks by the field's type alone."""
    return (raw if raw is not None else default), None


def _http_url(var: str, raw: object, default: Any) -> tuple[str | None, Problem | None]:
    """An http(s) base URL (stripped; blank: none)."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None, None
    if isinstance(raw, str) and re.fullmatch(r"https?://[^\s/]+(/[^\s]*)?", raw.strip()):
        return raw.strip(), None
    problem = Problem(
        var,
        cut(raw),
        "not an http(s) URL",
        "the OpenSearch base URL, such as http://127.0.0.1:9200",
    )
    return None, problem


_COUNT = Setting(counted(valid="an integer >= 1"))
_FLAG = Setting(boolean)
_SECONDS = Setting(_seconds)
_NAME = Setting(unset_or(parse_field_name))


class NautilusSettings(RankingKnobs, LogSettings):
    """Every ``NAUTILUS_*`` variable: the ranking knobs (:class:`RankingKnobs`, each
    declared once in ``knobs.py``) and the process's settings below, each with its
    parser. All ranking knobs unset means: change nothing."""

    log_level: Annotated[str, Setting(one_of(VALID_LOG_LEVELS))] = "info"
    log_format: Annotated[str, Setting(one_of(VALID_LOG_FORMATS))] = "auto"
    config_strict: Annotated[bool, _FLAG] = False
    config: Annotated[str | None, Setting(_plain)] = None
    data_dir: Annotated[Path, Setting(_folder)] = Path("~/.cache/nautilus")
    # The key that signs cursors (nautilus_ranking/request/cursor_keys.py): unset, a key
    # file in data_dir; replicas share one here, with the keys it replaces beside it.
    cursor_key: Annotated[str | None, Setting(_one_cursor_key)] = None
    cursor_previous_keys: Annotated[list[str], NoDecode, Setting(unset_or(parse_cursor_keys))] = (
        Field(default_factory=list)
    )
    # `nautilus-ranking serve` (nautilus_ranking/service/): read once at start-up by each worker.
    serve_host: Annotated[str, Setting(_host)] = "127.0.0.1"
    serve_port: Annotated[int, Setting(_port)] = 8000
    serve_workers: Annotated[int, _COUNT] = 1
    serve_allow_overrides: Annotated[bool, _FLAG] = True
    serve_max_query_chars: Annotated[int, _COUNT] = 1000
    serve_max_body_bytes: Annotated[int, _COUNT] = 16_384
    serve_max_concurrency: Annotated[int, _COUNT] = 64
    serve_max_ranked_rows: Annotated[int, _COUNT] = 10_000
    serve_request_timeout_s: Annotated[float, _SECONDS] = 10.0
    serve_body_timeout_s: Annotated[float, _SECONDS] = 5.0
    serve_probe_interval_s: Annotated[float, _SECONDS] = 10.0
    serve_api_keys_file: Annotated[str | None, _NAME] = None
    serve_cors_origins: Annotated[list[str], NoDecode, Setting(unset_or(parse_origins))] = Field(
        default_factory=list
    )
    # Ranking profiles (nautilus_ranking/profiles/): the YAML file of many; each one's
    # knobs are NAUTILUS_PROFILES__<NAME>__<KNOB>, read beside these settings.
    profiles_file: Annotated[str | None, _NAME] = None
    # Inside the Nautilus broker (nautilus_ranking/upstream/): the accessor's memory.
    upstream_rankings_max_bytes: Annotated[
        int, Setting(counted(0, "an integer >= 0 (bytes of compact JSON; 0: keep none)"))
    ] = 64 * 1024 * 1024
    # Inside the Nautilus broker: the query vectors its pgvector adapters get (0: none).
    upstream_vector_dim: Annotated[int, Setting(_vector_dim)] = 1024
    # Inside the Nautilus broker: the ranked MCP tool's attestation in _meta, not its text.
    upstream_attestation_in_meta: Annotated[bool, _FLAG] = False
    # Inside the Nautilus broker: the request tools its MCP server lists (both, ranked).
    upstream_request_tools: Annotated[str, Setting(one_of(REQUEST_TOOLS))] = "both"
    # Traces (nautilus_ranking/tracing/): on only when an OpenTelemetry SDK is set up.
    trace_query_text: Annotated[bool, _FLAG] = False
    trace_propagate: Annotated[bool, _FLAG] = True
    trace_baggage: Annotated[bool, _FLAG] = False
    # Feedback (nautilus_ranking/feedback/, docs/feedback.md): citable answers and the
    # UBI-shaped log of what was handed over and used. Off: answers as without it.
    feedback: Annotated[bool, _FLAG] = False
    feedback_cite_lifetime_days: Annotated[
        int, Setting(counted(valid="an integer >= 1 (days a cite is accepted)"))
    ] = 7
    feedback_retention_days: Annotated[
        int, Setting(counted(valid="an integer >= 1 (days a log file is kept)"))
    ] = 30
    feedback_max_mb: Annotated[
        int, Setting(counted(valid="an integer >= 1 (MB the feedback folder may hold)"))
    ] = 256
    feedback_text: Annotated[bool, _FLAG] = False
    feedback_opensearch_url: Annotated[str | None, Setting(_http_url)] = None
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

    @model_validator(mode="wrap")
    @classmethod
    def _skip_bad_values(cls, data: Any, handler: ModelWrapValidatorHandler[Any]) -> Any:
        if not isinstance(data, dict):
            return handler(data)
        data = dict(data)
        # A profile's knobs are parsed by these same parsers (nautilus_ranking/profiles/):
        # its problems are the profile's, reported (or refused) where it is loaded.
        of_profile = bool(data.pop(PROFILE_VALUES, False))
        # every field given, through its declared parser; no environment or file is read
        data, found = parse_declared(data, _SETTINGS.values(), _defaults())
        strict = bool(data.get("config_strict", False))
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
        return ranking_on({k.field: getattr(self, k.field) for k in RANKING_SWITCHES}, DEFAULTS)

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


def _declared_settings() -> dict[str, Setting]:
    """Each field's declared parser, named for its field."""
    found: dict[str, Setting] = {}
    for name, info in NautilusSettings.model_fields.items():
        setting = next((m for m in info.metadata if isinstance(m, Setting)), None)
        if setting is not None:
            found[name] = replace(setting, field=name)
    return found


#: Every setting's parser by field (a field without one is checked by its type alone).
_SETTINGS: dict[str, Setting] = _declared_settings()


@functools.cache
def _defaults() -> dict[str, Any]:
    """Each setting's default, by field: what a value that does not parse falls back to."""
    return {
        name: info.get_default(call_default_factory=True)
        for name, info in NautilusSettings.model_fields.items()
    }
