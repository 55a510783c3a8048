"""The HTTP source: a search is the template filled, page after page, each answer mapped.

What a search may change is the query text, the number of rows, the page and the query
vector, each a whole value (``template.py``); the URL, the method and the headers are
the sources file's. A page after the first that fails, for whatever reason (its own
deadline included), keeps the rows before it; hits that cannot be mapped are dropped
alone and counted, one warning a page (an engine answering a million bad hits is one
line, not a million); an answer of the wrong shape fails the source. Each of these is
in the response's ``sources_warned`` too (:class:`~nautilus_ranking.records.WarnedRows`),
as is a mapped path null in every hit (``watch.py``). A row whose id an earlier page
already gave is skipped: an index refreshed between two pages, or a cursor compared at
another precision than the engine's own scores, may hand a hit over twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from nautilus_ranking.embedders import Embedder
from nautilus_ranking.fanout.workers import in_worker
from nautilus_ranking.log import get_logger
from nautilus_ranking.records import SourceWarning, WarnedRows
from nautilus_ranking.sources.base import Row, SourceBase
from nautilus_ranking.sources.http.client import Client, Endpoint, HttpSourceError, http_loop
from nautilus_ranking.sources.http.mapping import MappedPage, ResponseMapping, ShapeError
from nautilus_ranking.sources.http.paging import Paging
from nautilus_ranking.sources.http.quoted import text_of
from nautilus_ranking.sources.http.template import RequestTemplate
from nautilus_ranking.sources.http.watch import MappingWatch

logger = get_logger("nautilus_ranking.sources.http")

#: Our own deadline ends this much (at most) before the broker's, so the error that
#: reaches the operator is ours, saying what the call was doing.
DEADLINE_MARGIN_S = 0.25


class HttpSource(SourceBase):
    """Any HTTP/JSON search API, as the sources file declares it."""

    ranked: bool | None = True  # an engine's order is its relevance
    no_hits = "nothing to check the mapping on; try words the engine's documents hold"

    def __init__(
        self,
        source_id: str,
        endpoint: Endpoint,
        template: RequestTemplate,
        mapping: ResponseMapping,
        paging: Paging | None = None,
        limit: int | None = None,
        timeout_s: float = 5.0,
        embedder: Embedder | None = None,
        health_url: str | None = None,
    ) -> None:
        self.id = source_id
        self.endpoint = endpoint
        self.template = template
        self.mapping = mapping
        self.paging = paging or Paging()
        self.limit = limit
        self.timeout_s = timeout_s
        self.embedder = embedder
        self.model_id = (
            None
            if embedder is None
            else str(getattr(embedder, "model_id", type(embedder).__name__))
        )
        self.health_url = health_url
        self.client = Client(endpoint)
        self.uses_vector = "vector" in template.uses
        self.watch = MappingWatch(source_id)

    def __repr__(self) -> str:
        return f"HttpSource(id={self.id!r}, {self.endpoint.shown!r})"

    def _budget(self) -> float:
        return self.timeout_s - min(DEADLINE_MARGIN_S, self.timeout_s * 0.1)

    async def search(self, query: str, context: Mapping[str, Any], limit: int) -> list[Row]:
        wanted = min(limit, self.limit) if self.limit else limit
        if not query.strip() or wanted < 1:
            return []
        extra: dict[str, Any] = {}
        if self.uses_vector:
            extra["vector"] = await self._vector(query, context)
        return await http_loop().run(self._pages(query, wanted, extra))

    async def _vector(self, query: str, context: Mapping[str, Any]) -> list[float]:
        """The query vector: the caller's when its model is this source's, else this
        source's embedder on the query (in a worker thread: it is CPU work)."""
        given = context.get("embedding")
        if given is not None and context.get("embedding_model") == self.model_id:
            return [float(x) for x in given]
        if self.embedder is None:  # the spec refuses {{vector}} without one
            raise HttpSourceError(f"{self.id}: {{{{vector}}}} needs an embedder")
        return [float(x) for x in await in_worker(self, self.embedder.embed, query)]

    async def _pages(self, query: str, wanted: int, extra: dict[str, Any]) -> list[Row]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._budget()
        walk = self.paging.walk(wanted)
        rows = WarnedRows()
        seen: set[object] = set()
        pages: list[MappedPage] = []
        while True:
            values = {**walk.values(query), **extra}
            try:
                body, params = self.template.render(values)
                answer = await self.client.call(deadline, params, body)
                page = self.mapping.page(answer.value, int(values["size"]))
            except Exception as exc:  # the source's failure, or this page's
                message = self._message(exc)
                if walk.asked == 0:
                    if isinstance(exc, HttpSourceError):
                        raise  # its own kind (unavailable, say) and message
                    raise HttpSourceError(message) from None
                self._page_failed(rows, walk.asked + 1, message)
                break
            pages.append(page)
            if page.dropped or page.extra:
                self._hits_dropped(page, walk.asked + 1)
            for row in page.rows:
                if row["id"] not in seen:
                    seen.add(row["id"])
                    rows.append(row)
            if not walk.advance(page.hits, len(rows), int(values["size"])):
                break
        dropped = sum(p.dropped for p in pages)
        if dropped:
            first = self.endpoint.masker(next(p.problems[0] for p in pages if p.problems))
            rows.warnings.append(
                SourceWarning(
                    self.id,
                    "hits_dropped",
                    f"{dropped} hit(s) of the engine's answer dropped: {first}",
                    dropped,
                )
            )
        self.watch.check(pages, rows)
        del rows[wanted:]
        return rows

    def _message(self, exc: Exception) -> str:
        """The error of a failed page, naming the source and the call, masked."""
        if isinstance(exc, HttpSourceError):
            return str(exc)
        e = self.endpoint
        said = "answered 200 but " if isinstance(exc, ShapeError) else f"{type(exc).__name__}: "
        return e.masker(f"{self.id}: {e.shown}: {said}{text_of(exc)}"[:500])

    def _page_failed(self, rows: WarnedRows, number: int, message: str) -> None:
        logger.warning(
            "http_source_page_failed",
            source_id=self.id,
            page=number,
            kept_rows=len(rows),
            error=message,
        )
        rows.warnings.append(
            SourceWarning(
                self.id,
                "page_failed",
                f"page {number} failed; the {len(rows)} row(s) of the pages before it are "
                f"kept: {message}",
            )
        )

    def _hits_dropped(self, page: MappedPage, number: int) -> None:
        """One warning for a page's dropped hits: how many, and the first problem."""
        mask = self.endpoint.masker
        logger.warning(
            "http_source_hits_dropped",
            source_id=self.id,
            url=self.endpoint.shown,
            page=number,
            count=page.dropped,
            first_problem=mask(page.problems[0]) if page.problems else "",
            not_read=page.extra,
            action="dropped; the page's other hits are used"
            + ("; hits past the size asked are not read" if page.extra else ""),
        )

    async def probe(self) -> None:
        """Readiness: a GET of ``health_url`` when the source names one (a paid or
        rate-limited API), else a one-row search; raises when the engine cannot answer."""
        if self.health_url is None:
            await self.search("readiness probe", {"query": "readiness probe"}, 1)
            return
        await http_loop().run(self._health())

    async def _health(self) -> None:
        loop = asyncio.get_running_loop()
        await self.client.call(  # any 2xx will do: a health page need not be JSON
            loop.time() + self._budget(), url=self.health_url, method="GET", expect_json=False
        )

    def close(self) -> None:
        """Close the pooled client (its connections) on the HTTP loop."""
        if self.client._client is None:
            return
        try:
            http_loop().submit(self.client.aclose()).result(timeout=3)
        except Exception as exc:  # closing must never fail a shutdown
            logger.debug(
                "http_source_close_failed", source_id=self.id, error_type=type(exc).__name__
            )
