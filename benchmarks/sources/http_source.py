"""What an HTTP source costs: its own work per answer against a bare ``json.loads``, the
connections it opens, and three engines answering concurrent requests.

python -m benchmarks.sources.http_source [--out docs/benchmarks.md]

- *Own cost*: for an Elasticsearch-shaped answer of 30 hits of about 1 kB, the source's
  own work — the request built from its template, the body parsed with its bounds
  (``json.loads`` and the depth walk), the hits mapped and counted, the mapped paths
  checked for a wrong mapping — against ``json.loads`` alone of
  the same bytes, timed back to back in each repeat (the median of the ratios). The
  engine's time is not in it.
- *Connections*: sequential and 8-way concurrent searches of one source against a JSON
  engine on loopback that counts the TCP connections it accepts.
- *Concurrency*: a broker over three HTTP sources whose engines take 50, 100 and 200 ms
  answers 8 concurrent requests; the wall time against the slowest engine's and the sum.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import yaml

from benchmarks.sections import markers, write_section
from nautilus_ranking import Broker
from nautilus_ranking.records import WarnedRows
from nautilus_ranking.sources.factory import build_sources
from nautilus_ranking.sources.http.mapping import MappedPage
from nautilus_ranking.sources.http.source import HttpSource
from tools.json_engine import json_engine

ROOT = Path(__file__).resolve().parents[2]
BEGIN, END = markers("http-source")
HITS = 30
DELAYS_S = (0.05, 0.1, 0.2)
CONCURRENT = 8


def es_answer(hits: int = HITS, size: int = 1000) -> bytes:
    """An Elasticsearch answer of ``hits`` hits of about ``size`` bytes each."""
    words = "disk full replica lag broker audit topic certificate expiry latency".split()
    out = []
    for i in range(hits):
        body = " ".join(words[(i + j) % len(words)] for j in range(size // 8))[: size - 120]
        out.append(
            {
                "_index": "kb",
                "_id": f"doc-{i:04d}",
                "_score": 30.0 - i,
                "_source": {
                    "title": f"runbook {i} for the orders database",
                    "body": body,
                    "service": "orders-db",
                },
            }
        )
    return json.dumps(
        {
            "took": 3,
            "timed_out": False,
            "hits": {"total": {"value": hits}, "max_score": 30.0, "hits": out},
        }
    ).encode()


def paired(
    base: Callable[[], object], ours: Callable[[], object], repeats: int, loops: int
) -> tuple[float, float, float]:
    """(median seconds of ``base``, of ``ours``, median of the per-repeat ratios): the two
    are timed back to back in each repeat, so a noisy neighbour weighs on both."""
    bases, mine, ratios = [], [], []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(loops):
            base()
        middle = time.perf_counter()
        for _ in range(loops):
            ours()
        end = time.perf_counter()
        bases.append((middle - start) / loops)
        mine.append((end - middle) / loops)
        ratios.append((end - middle) / (middle - start))
    return statistics.median(bases), statistics.median(mine), statistics.median(ratios)


def entry(url: str, source_id: str = "es") -> dict[str, Any]:
    return {
        "id": source_id,
        "type": "elasticsearch",
        "url": url,
        "index": "kb",
        "fields": ["title", "body", "service"],
    }


def write(folder: Path, *entries: dict[str, Any]) -> Path:
    path = folder / "nautilus.yaml"
    path.write_text(yaml.safe_dump({"sources": list(entries)}), "utf-8")
    return path


def own_cost(folder: Path, repeats: int) -> dict[str, float]:
    raw = es_answer()
    sources, _ = build_sources(write(folder, entry("http://127.0.0.1:9")), folder, "hashing")
    source = sources[0]
    assert isinstance(source, HttpSource)
    headers = httpx.Headers({"content-type": "application/json"})
    walk_values = {"query": "orders-db disk full", "size": HITS, "offset": 0, "page": 1}

    def ours() -> object:
        source.template.render(walk_values)
        value = source.client._parse(200, headers, raw, True)
        page = source.mapping.page(value, HITS)  # the hits mapped, the drops counted
        source.watch.check([page], WarnedRows())  # every mapped path checked for nulls
        return page

    page = ours()
    assert isinstance(page, MappedPage) and len(page.rows) == HITS and not page.dropped
    bare, mine, ratio = paired(lambda: json.loads(raw), ours, repeats, 100)
    source.close()
    return {
        "bytes": len(raw),
        "json_loads_us": bare * 1e6,
        "source_us": mine * 1e6,
        "ratio": ratio,
    }


def connections(folder: Path) -> dict[str, int]:
    docs = [{"id": f"d{i}", "title": f"disk {i}"} for i in range(40)]
    with json_engine(docs) as engine:
        sources, _ = build_sources(write(folder, entry(engine.url)), folder, "hashing")
        source = sources[0]
        for _ in range(50):
            asyncio.run(source.search("disk", {}, 10))
        sequential = engine.connections

        async def burst() -> None:
            await asyncio.gather(*(source.search("disk", {}, 10) for _ in range(CONCURRENT)))

        for _ in range(5):
            asyncio.run(burst())
        source.close()
        return {
            "sequential_requests": 50,
            "sequential_connections": sequential,
            "concurrent_requests": 50 + 5 * CONCURRENT,
            "all_connections": engine.connections,
            "requests_seen": len(engine.requests),
        }


def concurrency(folder: Path) -> dict[str, float]:
    docs = [{"id": f"d{i}", "title": f"disk {i}"} for i in range(40)]
    with (
        json_engine(docs, DELAYS_S[0]) as a,
        json_engine(docs, DELAYS_S[1]) as b,
        json_engine(docs, DELAYS_S[2]) as c,
    ):
        path = write(folder, entry(a.url, "a"), entry(b.url, "b"), entry(c.url, "c"))
        broker = Broker.from_config(path)

        async def eight() -> float:
            start = time.perf_counter()
            answers = await asyncio.gather(
                *(broker.arequest(f"disk {i}") for i in range(CONCURRENT))
            )
            assert all(not r.sources_errored and len(r.data) == 3 for r in answers)
            return time.perf_counter() - start

        async def direct() -> float:
            """The same 24 calls with httpx alone, one pooled client per engine."""
            clients = [httpx.AsyncClient(base_url=e.url) for e in (a, b, c)]
            body = {"query": {"multi_match": {"query": "disk"}}, "size": 30, "from": 0}
            try:
                await asyncio.gather(*(x.post("/kb/_search", json=body) for x in clients))
                start = time.perf_counter()
                await asyncio.gather(
                    *(x.post("/kb/_search", json=body) for x in clients for _ in range(CONCURRENT))
                )
                return time.perf_counter() - start
            finally:
                for x in clients:
                    await x.aclose()

        asyncio.run(eight())  # connections opened, embedder warm
        walls, bare = [], []
        for _ in range(5):
            walls.append(asyncio.run(eight()))
            bare.append(asyncio.run(direct()))
        for source in broker.sources:
            source.close()
    return {
        "wall_s": statistics.median(walls),
        "httpx_s": statistics.median(bare),
        "slowest_s": max(DELAYS_S),
        "sum_s": sum(DELAYS_S),
    }


def section(
    cost: dict[str, float], conn: dict[str, int], conc: dict[str, float], repeats: int
) -> str:
    load = os.getloadavg()[0]
    lines = [
        BEGIN,
        "## HTTP sources (`benchmarks/sources/http_source.py`)",
        "",
        f"`python -m benchmarks.sources.http_source --repeats {repeats}` on "
        f"{time.strftime('%Y-%m-%d')}: "
        f"{platform.machine()}, {os.cpu_count()} cores shared with other work, Python "
        f"{platform.python_version()}, load average {load:.1f} at the start. Engines are "
        "`tools/json_engine.py` on loopback (Elasticsearch's answer shape).",
        "",
        "| measure | value | target |",
        "|---|---|---|",
        f"| own cost: build the request, parse with its bounds, map {HITS} hits "
        f"({cost['bytes']:,} bytes) | {cost['source_us']:.0f} µs | |",
        f"| bare `json.loads` of the same bytes | {cost['json_loads_us']:.0f} µs | |",
        f"| own cost ÷ `json.loads` (median of {repeats} paired runs of 100) "
        f"| **{cost['ratio']:.2f}×** "
        "| ≤ 3× |",
        f"| TCP connections for {conn['sequential_requests']} sequential searches "
        f"(counted by the server) | **{conn['sequential_connections']}** | 1 |",
        f"| TCP connections for those and 5 bursts of {CONCURRENT} concurrent "
        f"({conn['requests_seen']} requests) | {conn['all_connections']} | ≤ pool_size (8) |",
        f"| {CONCURRENT} concurrent requests over 3 engines taking "
        f"{', '.join(f'{d * 1000:.0f}' for d in DELAYS_S)} ms (median of 5) "
        f"| **{conc['wall_s'] * 1000:.0f} ms** | about {conc['slowest_s'] * 1000:.0f} ms "
        f"(the slowest), not {conc['sum_s'] * 1000:.0f} (the sum) |",
        f"| the same {3 * CONCURRENT} calls with httpx alone, one client per engine "
        f"(median of 5, same run) | {conc['httpx_s'] * 1000:.0f} ms | |",
        END,
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks.md")
    parser.add_argument("--repeats", type=int, default=31)
    parser.add_argument("--print-only", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        cost = own_cost(folder, args.repeats)
        conn = connections(folder)
        conc = concurrency(folder)
    text = section(cost, conn, conc, args.repeats)
    print(text)
    if not args.print_only:
        write_section(args.out, text, "http-source")
        print(f"wrote the http-source section of {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
