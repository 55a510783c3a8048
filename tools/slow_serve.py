"""``nautilus-ranking serve`` with one source made slow (or given a bad row, or a request made
to fail), for the load benchmark and the service and CLI tests.

    python tools/slow_serve.py --slow runbooks --delay 3 -- serve --port 8123
    python tools/slow_serve.py --slow runbooks --delay 30 --timeout 60 -- serve
    python tools/slow_serve.py --bad-row runbooks -- query "disk full" --json
    python tools/slow_serve.py --cancel runbooks -- serve --port 8123
    python tools/slow_serve.py --odd-rows runbooks -- mcp
    python tools/slow_serve.py --slow-ranking-on "slow ranking" --delay 2 -- serve

It also registers a source type, ``raising_test``, whose calls raise what its
``raises`` option names (``SystemExit``, ``KeyboardInterrupt``, ``CancelledError``,
``BaseException``, ``GeneratorExit``), in ``search`` (the default), in a worker thread or in
``prepare`` (``where``): a registered type that raises what a source should not.

Everything else is the real command: this only wraps the named source's
``search`` in a sleep (or puts a row that is not an object second in its answer,
or makes its search raise ``CancelledError`` as a hostile source may, or makes
``Broker.arequest`` raise for one query, to prove that an unexpected error becomes
a clean 500, or makes the ranking of one query hold the broker's loop for ``--delay``
seconds, as a costly ranking does) before calling ``nautilus_ranking.cli.main``.
Single worker only: the patch lives in this process.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Mapping
from typing import Any, Literal

from nautilus_ranking import cli
from nautilus_ranking.broker import Broker
from nautilus_ranking.fanout.workers import in_worker
from nautilus_ranking.sources.base import ForwardingSource, SourceBase
from nautilus_ranking.sources.schema import BuildContext, SourceSpec, register_source_type
from nautilus_ranking.synthesis import rank_pass

RAISED: dict[str, Any] = {
    "SystemExit": lambda: SystemExit(3),
    "KeyboardInterrupt": KeyboardInterrupt,
    "CancelledError": asyncio.CancelledError,
    "BaseException": lambda: BaseException("a source's own BaseException"),
    "GeneratorExit": lambda: GeneratorExit("a source's own GeneratorExit"),
    "RuntimeError": lambda: RuntimeError("internal detail that must not reach the client"),
}


@register_source_type
class RaisingSpec(SourceSpec):
    type: Literal["raising_test"]
    raises: Literal[
        "SystemExit", "KeyboardInterrupt", "CancelledError", "BaseException", "GeneratorExit"
    ]
    where: Literal["search", "worker", "prepare"] = "search"

    def build(self, ctx: BuildContext) -> Any:
        return RaisingSource(self)


def _raise(name: str) -> None:
    raise RAISED[name]()


class RaisingSource(SourceBase):
    def __init__(self, spec: RaisingSpec) -> None:
        self.id, self.timeout_s, self.spec = spec.id, spec.timeout_s, spec

    async def prepare(self) -> None:
        if self.spec.where == "prepare":
            _raise(self.spec.raises)

    async def search(self, query: str, context: Mapping[str, Any], limit: int) -> Any:
        if self.spec.where == "worker":
            await in_worker(self, _raise, self.spec.raises)
        _raise(self.spec.raises)


class SlowSource:
    def __init__(self, inner: Any, delay: float, timeout_s: float | None = None) -> None:
        self.inner, self.delay = inner, delay
        self.id = inner.id
        self.timeout_s = inner.timeout_s if timeout_s is None else timeout_s

    async def search(self, query: str, context: Mapping[str, Any], limit: int) -> Any:
        await asyncio.sleep(self.delay)
        return await self.inner.search(query, context, limit)

    def close(self) -> None:
        self.inner.close()


class BadRowSource(ForwardingSource):
    """The source's own answer with ``None`` put second: a bad row in the middle."""

    async def search(self, query: str, context: Mapping[str, Any], limit: int) -> Any:
        rows = await self.inner.search(query, context, limit)
        return [*rows[:1], None, *rows[1:]]


class OddRowsSource(ForwardingSource):
    """The source's own answer with two rows JSON does not know first: one holding bytes
    that are not UTF-8, one holding an arbitrary object (the broker keeps both)."""

    async def search(self, query: str, context: Mapping[str, Any], limit: int) -> Any:
        rows = await self.inner.search(query, context, limit)
        odd = [
            {"id": "odd-bytes", "title": "disk bytes", "blob": b"\xff\xfe\x00"},
            {"id": "odd-object", "title": "disk object", "thing": Opaque()},
        ]
        return [*odd, *rows]


class Opaque:
    def __str__(self) -> str:
        return "<an opaque object>"


class CancellingSource:
    """A source whose search raises ``CancelledError`` itself (nobody cancelled it)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.id, self.timeout_s = inner.id, inner.timeout_s

    async def search(self, query: str, context: Mapping[str, Any], limit: int) -> Any:
        raise asyncio.CancelledError

    def close(self) -> None:
        self.inner.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slow", help="id of the source to slow down")
    parser.add_argument("--delay", type=float, default=1.0, help="seconds added to each search")
    parser.add_argument("--bad-row", help="id of the source whose answer gets a bad row second")
    parser.add_argument("--cancel", help="id of the source whose search raises CancelledError")
    parser.add_argument("--odd-rows", help="id of the source whose answer gets two odd rows first")
    parser.add_argument("--explode-on", help="a query for which Broker.arequest raises")
    parser.add_argument(
        "--explode-with", default="RuntimeError", choices=sorted(RAISED), help="what it raises"
    )
    parser.add_argument(
        "--slow-ranking-on", help="a query whose ranking holds the loop for --delay seconds"
    )
    parser.add_argument(
        "--timeout", type=float, help="the slow source's timeout_s (default: its own)"
    )
    parser.add_argument("rest", nargs=argparse.REMAINDER, help="-- the nautilus arguments")
    args = parser.parse_args()
    original_from_config = Broker.from_config.__func__  # type: ignore[attr-defined]
    original_arequest = Broker.arequest

    def from_config(cls: type[Broker], *a: Any, **k: Any) -> Broker:
        broker: Broker = original_from_config(cls, *a, **k)
        broker.sources = [BadRowSource(s) if s.id == args.bad_row else s for s in broker.sources]
        broker.sources = [
            SlowSource(s, args.delay, args.timeout) if s.id == args.slow else s
            for s in broker.sources
        ]
        broker.sources = [CancellingSource(s) if s.id == args.cancel else s for s in broker.sources]
        broker.sources = [OddRowsSource(s) if s.id == args.odd_rows else s for s in broker.sources]
        return broker

    async def arequest(self: Broker, query: str, context: Any = None) -> Any:
        if args.explode_on is not None and query == args.explode_on:
            raise RAISED[args.explode_with]()
        return await original_arequest(self, query, context)

    original_query_vector = rank_pass.query_vector

    def query_vector(embedder: Any, idf: bool, ctx: Any, warnings: Any) -> Any:
        if args.slow_ranking_on is not None and ctx.get("query") == args.slow_ranking_on:
            time.sleep(args.delay)  # CPU work as the loop sees it: nothing else runs
        return original_query_vector(embedder, idf, ctx, warnings)

    rank_pass.query_vector = query_vector  # type: ignore[assignment]
    Broker.from_config = classmethod(from_config)  # type: ignore[assignment]
    Broker.arequest = arequest  # type: ignore[method-assign]
    rest = args.rest[1:] if args.rest[:1] == ["--"] else args.rest
    return cli.main(rest)


if __name__ == "__main__":
    sys.exit(main())
