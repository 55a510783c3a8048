"""What a setting's declaration says: how its value is parsed, and for a ranking knob
everything the rest of the package derives from it.

A setting is one field of the settings model with a :class:`Setting` (a process
setting) or a :class:`Knob` (a ranking knob or the embedder) in its ``Annotated``
metadata: the field gives its name, type and default, the metadata its parser and
what it may do. As pydantic-settings keeps a field and its validator together, a
knob's field and this one object are the whole of it. The settings' parse
(``settings/model.py``), a profile's parse (``profiles/``), the request model and
its overrides (``request/model.py``, ``request/plan.py``), ``explain``, a cursor's
ranking key (``request/pages.py``), the ranker's arguments (``synthesis/ranking.py``),
the sources-named check (``broker.py``) and the docs' tables (``tools/knob_tables``)
all read the declarations; none lists the knobs again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, StringConstraints

from nautilus_ranking.errors import Problem

#: ``(variable, raw, default) -> (value, problems)``: a value from the environment, a
#: file or a caller, parsed; a bad one is the fallback and the problem(s) naming it.
Parser = Callable[[str, object, Any], tuple[Any, "Problem | Sequence[Problem] | None"]]


@dataclass(frozen=True)
class Setting:
    """A setting's parser (see :data:`Parser`); ``field`` is filled in from the model."""

    parse: Parser
    field: str = ""

    @property
    def variable(self) -> str:
        return "NAUTILUS_" + self.field.upper()


@dataclass(frozen=True)
class Arg:
    """How a request field is given on the command line (``flag``; the query is the
    positional argument) and what a valid value is, for every way in's messages.
    ``repeat``: a mapping or list field given one ``flag`` a value."""

    flag: str
    valid: str
    metavar: str | None = None
    repeat: bool = False


@dataclass(frozen=True)
class Override:
    """A request field that replaces a knob for one request: its type (optional, with
    any check of its own), its flag and what the schema says about it. The value is
    parsed by the knob's own parser, so it means what the variable means; with
    ``source_ids``, each source it names must be one the request's broker has."""

    annotation: Any
    arg: Arg
    description: str
    max_length: int | None = None
    source_ids: Callable[[Any], Iterable[str]] | None = None


KnobKind = Literal["ranking", "embedder"]
#: When a knob enters a cursor's ranking key: always, only when set (so a key made
#: before the knob existed is the same key), or as a function of the settings says.
KeyRule = Literal["always", "set"] | Callable[[Any], bool]


@dataclass(frozen=True)
class Knob(Setting):
    """A setting that changes which rows an agent reads, or in what order.

    ``short``: its name in a request, ``explain`` and a cursor's key (the field
    without ``ranking_`` unless given). ``turns_ranking_on``: setting it ranks.
    ``per_profile``: a ranking profile may set it. ``in_broker``: what it does inside
    the Nautilus broker (None: not applied there). ``restricts``: it narrows what a
    caller is handed, so a profile's value that does not parse is refused.
    ``override``: the request field that replaces it. ``in_key``: whether and when it
    enters a cursor's ranking key; ``in_explain``: it is shown in ``explain``.
    ``resolve``: the value in force from the settings (IDF and the embedder resolve
    ``auto``); ``show``: the value as ``explain`` and the key write it; ``key_form``:
    as the key writes it, where that differs. ``ranker``: the ``RankingSynthesizer``
    argument it sets. ``names_sources``: the source ids a value names (checked against
    the sources file). ``by_time``: it ranks by time (``as_of`` then shapes a ranking).
    """

    summary: str = ""
    in_broker: str | None = None
    kind: KnobKind = "ranking"
    turns_ranking_on: bool = False
    per_profile: bool = True
    restricts: bool = False
    short: str = ""
    override: Override | None = None
    in_key: KeyRule | None = None
    in_explain: bool = False
    resolve: Callable[[Any], Any] | None = None
    show: Callable[[Any], Any] | None = None
    key_form: Callable[[Any], Any] | None = None
    ranker: str | None = None
    names_sources: Callable[[Any], Iterable[str]] | None = None
    by_time: bool = False

    @property
    def flag(self) -> str | None:
        """The ``nautilus-ranking query`` flag that overrides it."""
        return self.override.arg.flag if self.override is not None else None

    @property
    def request_field(self) -> str | None:
        """The request field (POST /v1/query, MCP) that overrides it."""
        return self.short if self.override is not None else None

    def value(self, settings: Any) -> Any:
        """Its value in force under ``settings`` (typed, parsed once)."""
        return self.resolve(settings) if self.resolve else getattr(settings, self.field)

    def shown(self, settings: Any) -> Any:
        """Its value as ``explain`` shows it (JSON-able)."""
        value = self.value(settings)
        return self.show(value) if self.show else value

    def keyed(self, settings: Any) -> Any:
        """Its value as a cursor's ranking key writes it."""
        value = self.value(settings)
        return self.key_form(value) if self.key_form else self.shown(settings)


# --- what a request may carry for a knob --------------------------------------------
# Every text field is bounded, and checked against its bound before anything parses
# it: a request is read on the server's event loop before it takes a concurrency slot,
# so what reading it costs must not grow with what a caller sends.

#: The largest count a request may carry (as the settings' integers, 18 digits).
MAX_COUNT = 10**18 - 1
#: The longest source id in ``sources`` and ``boosts`` (a sources file allows 100).
MAX_SOURCE_ID_CHARS = 256
#: The longest boost level (``-medium`` is 7 characters).
MAX_LEVEL_CHARS = 16
#: The most source ids in ``sources``, and entries in ``boosts``.
MAX_SOURCE_ITEMS = 1000

SourceId = Annotated[str, StringConstraints(max_length=MAX_SOURCE_ID_CHARS)]
Level = Annotated[str, StringConstraints(max_length=MAX_LEVEL_CHARS)]


def plain_count(value: object) -> object:
    """A request's count as JSON gives it: a boolean is no number, nor 19 digits."""
    if isinstance(value, bool):  # JSON true is not the number 1
        raise ValueError("a boolean is not a number")
    if isinstance(value, int) and abs(value) > MAX_COUNT:
        raise ValueError(f"more than {len(str(MAX_COUNT))} digits")
    return value


def plain_fraction(value: object) -> object:
    """A request's fraction as JSON gives it: a boolean is neither "on" nor 1."""
    if isinstance(value, bool):
        raise ValueError("a boolean is not a number")
    return value


#: A request's count (``top_k``, ``max_tokens``, ``page``): an integer, or none given.
RequestCount = Annotated[int | None, BeforeValidator(plain_count)]
#: A request's fraction or word (``near_duplicates: "on"`` or ``0.6``), or none given.
RequestFraction = Annotated[str | float | None, BeforeValidator(plain_fraction)]
