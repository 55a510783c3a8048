"""How nautilus tells an operator what is wrong.

:class:`NautilusError` is the base of every exception nautilus raises on purpose, so
``except nautilus_ranking.NautilusError`` catches them all, and each of them is importable from
this module. Each also keeps the built-in base
it had (``ValueError``, ``OSError``, ``ConnectionError``, ``RuntimeError``), so an
``except`` written for that still catches it.

:class:`Problem` is one bad value — a setting, a command-line flag, a field of an
HTTP request — with what an operator or a caller needs to fix it: where it was
given, the value as shown, why it is refused and the valid choices. The settings
log it and skip the value (or list it in a ``ConfigError``); the service returns it
in a problem+json body; the command line prints it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from nautilus_ranking.lazy import lazy_getattr

_MAX_SHOWN = 60

#: Every exception nautilus raises on purpose, by the module that raises it: each is
#: importable from here (``from nautilus_ranking.errors import SeedError``), loaded on first use
#: so that this module stays free of what they need (a database driver, the model).
_RAISED_BY = {
    "ChartsUnavailable": "nautilus_ranking.report.charts",
    "ConfigError": "nautilus_ranking.settings.model",
    "SourceConfigError": "nautilus_ranking.sources.yaml_file",
    "SeedError": "nautilus_ranking.sources.seeds",
    "FileRefusedError": "nautilus_ranking.sources.seeds",
    "OpenToOthersError": "nautilus_ranking.sources.seeds",
    "ForeignFileError": "nautilus_ranking.sources.sqlite.base",
    "NoSpaceError": "nautilus_ranking.sources.sqlite.base",
    "PostgresUnavailableError": "nautilus_ranking.sources.postgres.base",
    "PostgresSourceError": "nautilus_ranking.sources.postgres.base",
    "VectorModelMismatchError": "nautilus_ranking.sources.postgres.vector",
    "LoadError": "nautilus_ranking.sources.postgres.load",
    "SourceStuckError": "nautilus_ranking.fanout.workers",
    "SourceRaisedError": "nautilus_ranking.fanout.contain",
    "NoCanonicalFormError": "nautilus_ranking.response_hash",
    "EmbeddingUnavailableError": "nautilus_ranking.embedders.base",
    "ModelFileError": "nautilus_ranking.embedders.onnx",
    "ForeignCacheFileError": "nautilus_ranking.embedders.vector_cache_file",
    "EarlierCacheFormatError": "nautilus_ranking.embedders.vector_cache_file",
    "GraphRewriteError": "nautilus_ranking.embedders.onnx_graph",
    "PageError": "nautilus_ranking.request.pages",
    "ProblemError": "nautilus_ranking.request.errors",
    "CiteError": "nautilus_ranking.feedback.cites",
    "EvalInputError": "nautilus_ranking.evaluation.judgments",
    "CollectionError": "nautilus_ranking.evaluation.collection",
    "UnknownProfileError": "nautilus_ranking.evaluation.command",
    "FitFileError": "nautilus_ranking.selection.local_fit",
    "NullQueriesError": "nautilus_ranking.calibration.null_queries",
    "CalibrateError": "nautilus_ranking.calibration.collect",
    "FeedbackInputError": "nautilus_ranking.cli.feedback",
    "ServiceError": "nautilus_ranking.retrievers.source",
    "IncompatibleBrokerError": "nautilus_ranking.upstream.attach",
    "NoRequestScopeError": "nautilus_ranking.upstream.synthesizer",
    "CallerNotCheckedError": "nautilus_ranking.upstream.ranked_feedback",
    "CallerChecked": "nautilus_ranking.upstream.request_scope",
    "HttpSourceError": "nautilus_ranking.sources.http.client",
    "HttpTimeoutError": "nautilus_ranking.sources.http.client",
    "HttpUnavailableError": "nautilus_ranking.sources.http.client",
    "BodyError": "nautilus_ranking.sources.http.bounded",
    "TooLargeError": "nautilus_ranking.sources.http.bounded",
    "EncodingError": "nautilus_ranking.sources.http.bounded",
    "TemplateError": "nautilus_ranking.sources.http.template",
    "MappingError": "nautilus_ranking.sources.http.mapping",
    "ShapeError": "nautilus_ranking.sources.http.mapping",
}

__all__ = ["NautilusError", "Problem", *sorted(_RAISED_BY), "cut", "shown"]


#: ``nautilus_ranking.errors.<Name>``: the exception from the module that raises it.
__getattr__ = lazy_getattr(__name__, _RAISED_BY, globals())


class NautilusError(Exception):
    """The base of nautilus' own exceptions; the message names what to fix."""


#: A :attr:`Problem.profile` for a problem of the profiles not tied to one (a profile
#: variable misnamed, a name that is not a profile's): shown to no caller with a key.
ANY_PROFILE = "*"


@dataclass(frozen=True)
class Problem:
    """One refused value: ``name`` is the variable, flag or request field it was given in;
    ``profile``: the ranking profile it belongs to (:data:`ANY_PROFILE`: to the profiles
    but to no one of them), so a server shows it only to a caller whose key may name it."""

    name: str
    value: str
    reason: str
    valid: str
    profile: str | None = field(default=None, compare=False)

    @property
    def variable(self) -> str:
        """The name, as the settings call it (an environment variable or a flag)."""
        return self.name

    @property
    def shown_value(self) -> str:
        """The value as a log line, a message or an answer may show it (:func:`masked`)."""
        return str(masked(self.name, self.value))

    @property
    def message(self) -> str:
        return f"{self.name}: {self.shown_value!r}: {self.reason} (valid: {self.valid})"


def cut(value: object) -> str:
    """A value as it may appear in a log or message: text, cut if long."""
    text = value if isinstance(value, str) else repr(value)
    return text[:_MAX_SHOWN] + "…" if len(text) > _MAX_SHOWN else text


def shown(value: object) -> str:
    """A value quoted for a reason string."""
    return repr(cut(value))


#: A variable whose whole value is a secret: a word of its name says so (``…_API_KEY``;
#: not ``…_MAX_TOKENS`` or ``…_KEYWORDS``; a ``…_FILE`` names a path).
_SECRET_WORDS = frozenset({"KEY", "SECRET", "TOKEN", "PASSWORD", "PASSWD", "DSN"})
_VARIABLE = re.compile(r"[A-Za-z0-9_]+")
#: A URL's ``user:password@`` — or its start, when the value was cut before the ``@``.
_URL_CREDENTIALS = re.compile(r"(?<=://)[^/@\s]+(@|…$)")


def masked(name: str, value: object) -> object:
    """``value`` with no secret in it, wherever it is shown (a log line, ``config``,
    ``/v1/config``): a secret-named variable's value hidden, a URL's credentials cut."""
    if value is None:
        return None
    variable = name.split(" (", 1)[0].upper()  # "NAUTILUS_…_FILE (path:3)": a file's line
    secret = _VARIABLE.fullmatch(variable) and _SECRET_WORDS & set(variable.split("_"))
    if secret and not variable.endswith("_FILE"):
        return "***"
    if isinstance(value, str):
        return _URL_CREDENTIALS.sub(r"***\1", value)
    return value
