"""``nautilus-ranking query``: one request through the request core, shown to a person or as JSON.

Its flags are the request model's fields (:class:`~nautilus_ranking.request.model.QueryRequest`),
so the command takes what ``POST /v1/query`` and the MCP tool take.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from nautilus_ranking.cli.args import CONFIG_HELP, boost_entry, count

if TYPE_CHECKING:
    from nautilus_ranking.request.errors import ProblemError
    from nautilus_ranking.request.model import QueryRequest


def add_parser(commands: Any, argv: Sequence[str] = ()) -> None:
    """The command's parser. The request's flags come from the request model (pydantic),
    so they are added only when ``argv`` runs ``query``: ``--version``, ``--help`` and the
    other commands parse without loading it."""
    query = commands.add_parser("query", help="ask every source and show the ranked answer")
    query.add_argument("--config", help=CONFIG_HELP)
    query.add_argument(
        "--json",
        action="store_true",
        help="the answer as one JSON object (what POST /v1/query returns)",
    )
    query.add_argument(
        "--wide",
        action="store_true",
        help="every source id whole and, with --explain, every score component, lines "
        "as long as they need (by default the table fits in 120 columns; an id past 32 "
        "characters ends in '…')",
    )
    query.add_argument(
        "--profile",
        metavar="NAME",
        help="rank with this ranking profile (NAUTILUS_PROFILES__<NAME>__*, "
        "or NAUTILUS_PROFILES_FILE)",
    )
    if next((a for a in argv if not a.startswith("-")), None) == "query":
        add_request_flags(query)
    query.set_defaults(run=run)


def add_request_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per :class:`QueryRequest` field (the query is the positional argument),
    named, explained and checked as the request model declares it."""
    from nautilus_ranking.request.model import QueryRequest, arg_of

    paged = parser.add_mutually_exclusive_group()
    for name, info in QueryRequest.model_fields.items():
        arg = arg_of(name)
        kind = _kind(info.annotation)
        help_text = info.description or name
        if not arg.flag:
            parser.add_argument("text", metavar=arg.metavar, help=help_text)
            continue
        target = paged if name in ("page", "cursor") else parser
        if kind is bool:
            target.add_argument(
                arg.flag, dest=name, action="store_true", default=None, help=help_text
            )
        elif arg.repeat:
            target.add_argument(
                arg.flag,
                dest=name,
                action="append",
                metavar=arg.metavar,
                type=boost_entry if kind is dict else str,
                help=help_text + " (repeatable)",
            )
        else:
            target.add_argument(
                arg.flag,
                dest=name,
                metavar=arg.metavar,
                help=help_text,
                type=count if kind is int else str,
            )


def _kind(annotation: Any) -> type:
    """The plain type of an optional request field (``int | None`` is ``int``)."""
    for option in (*getattr(annotation, "__args__", ()), annotation):
        origin = getattr(option, "__origin__", option)
        if origin in (bool, int, str, dict, list):
            return origin  # type: ignore[no-any-return]
    raise TypeError(f"no command-line form for {annotation!r}")


def request_of(args: argparse.Namespace) -> QueryRequest:
    """The flags as a request; a value the model refuses is a ProblemError (exit 2). A
    byte of the query that is not UTF-8 (a lone surrogate here) becomes U+FFFD."""
    from nautilus_ranking.request.model import QueryRequest, parse_request

    payload: dict[str, Any] = {"query": os.fsencode(args.text).decode("utf-8", "replace")}
    for name in QueryRequest.model_fields:
        value = getattr(args, name, None)
        if name == "query" or value is None:
            continue
        if name == "boosts":
            value = dict(entry.partition(":")[::2] for entry in value)
        payload[name] = value
    return parse_request(payload)


def run(args: argparse.Namespace) -> int:
    import json

    from nautilus_ranking.cli.output import answer_text
    from nautilus_ranking.request.answer import answer_sync
    from nautilus_ranking.request.engine import Engine
    from nautilus_ranking.request.errors import ProblemError
    from nautilus_ranking.response_hash import json_default
    from nautilus_ranking.settings.model import NautilusSettings

    try:
        request = request_of(args)
        engine = Engine.assemble(NautilusSettings(), args.config)
    except ProblemError as exc:
        return _refused(exc)
    try:
        result = answer_sync(engine, request, profile=args.profile)
    except ProblemError as exc:
        return _refused(exc)
    finally:
        engine.broker.close()
    response = result.response
    sources = result.plan.broker.sources
    all_failed = bool(sources) and len(response.sources_errored) == len(sources)
    if args.json:
        print(json.dumps(result.to_json(), default=json_default))
    else:
        print(answer_text(result, getattr(args, "argv", None), args.wide))
    if all_failed:
        print("nautilus-ranking: every source failed (see the errors above)", file=sys.stderr)
        return 1
    return 0


def _refused(exc: ProblemError) -> int:
    """A refused request: each problem on stderr, named by its flag; 2 for a bad flag,
    1 for a request that could not be answered as asked (a stale cursor)."""
    from nautilus_ranking.cli.output import printable
    from nautilus_ranking.request.model import QueryRequest, arg_of

    errors = exc.extra.get("errors") or ([exc.extra] if exc.extra.get("field") else [])
    for error in errors:
        field = str(error.get("field", ""))
        flag = (
            (arg_of(field).flag or "query")
            if field in QueryRequest.model_fields
            else "--profile"
            if field == "profile"
            else field
        )
        reason = error.get("reason") or exc.detail
        print(
            printable(
                f"nautilus-ranking: {flag}: {error.get('value')!r}: {reason}"
                f" (valid: {error.get('valid')})"
            ),
            file=sys.stderr,
        )
    if not errors:
        print(printable(f"nautilus-ranking: {exc.detail}"), file=sys.stderr)
    return 2 if exc.status in (403, 422) else 1
