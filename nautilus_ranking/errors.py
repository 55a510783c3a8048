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

from dataclasses import dataclass

from nautilus_ranking.lazy import lazy_getattr

_MAX_SHOWN = 60

#: Every exception nautilus raises on purpose, by the module that raises it: each is
#: importable from here (``from nautilus_ranking.errors import SeedError``), loaded on first use
#: so that this module stays free of what they need (a database driver, the model).
_RAISED_BY = {
    "ConfigError": "nautilus_ranking.settings.model",
    "SourceConfigError": "nautilus_ranking.sources.yaml_file",
    "SeedError": "nautilus_ranking.sources.seeds",
    "FileRefusedError": "nautilus_ranking.sources.seeds",
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
    "GraphRewriteError": "nautilus_ranking.embedders.onnx_graph",
    "PageError": "nautilus_ranking.request.pages",
    "ProblemError": "nautilus_ranking.request.errors",
    "EvalInputError": "nautilus_ranking.evaluation.judgments",
    "CollectionError": "nautilus_ranking.evaluation.collection",
    "UnknownProfileError": "nautilus_ranking.evaluation.command",
    "ServiceError": "nautilus_ranking.retrievers.source",
    "IncompatibleBrokerError": "nautilus_ranking.upstream.attach",
    "NoRequestScopeError": "nautilus_ranking.upstream.synthesizer",
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


@dataclass(frozen=True)
class Problem:
    """One refused value: ``name`` is the variable, flag or request field it was given in."""

    name: str
    value: str
    reason: str
    valid: str

    @property
    def variable(self) -> str:
        """The name, as the settings call it (an environment variable or a flag)."""
        return self.name

    @property
    def message(self) -> str:
        return f"{self.name}: {self.value!r}: {self.reason} (valid: {self.valid})"


def cut(value: object) -> str:
    """A value as it may appear in a log or message: text, cut if long."""
    text = value if isinstance(value, str) else repr(value)
    return text[:_MAX_SHOWN] + "…" if len(text) > _MAX_SHOWN else text


def shown(value: object) -> str:
    """A value quoted for a reason string."""
    return repr(cut(value))
