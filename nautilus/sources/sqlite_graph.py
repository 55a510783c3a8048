"""A service graph in SQLite: entities matched by name, returned with their neighbours."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nautilus.sources.base import Row, SqliteSource, read_jsonl
from nautilus.text import tokenize


class SqliteGraphSource(SqliteSource):
    """Entities (``id``, ``name``, ``kind``, ``description``, …) and edges (``src``,
    ``dst``, ``relation``). A search matches entity names against the query's
    words; it returns the matched entities, best match first, then each one's
    neighbours with the edge that connects them: ``relation`` (the edge's label),
    ``direction`` (``out`` from the matched entity, or ``in``), ``via`` (the
    matched entity) and ``edge`` (``"checkout-api writes_to orders-db"``)."""

    #: Name matches come first, then neighbours in id order: partly an order of
    #: relevance, so the ranking judges it per batch (None) rather than trust it.
    ranked: bool | None = None

    def __init__(self, source_id: str, path: Path, entities: Path, edges: Path,
                 timeout_s: float = 5.0) -> None:
        super().__init__(source_id, path, timeout_s)
        self.entities = entities
        self.edges = edges

    def build(self, connection: sqlite3.Connection) -> None:
        connection.execute("CREATE TABLE entities (id TEXT PRIMARY KEY, name TEXT NOT NULL, "
                           "kind TEXT, team TEXT, description TEXT)")
        connection.execute("CREATE TABLE edges (src TEXT, dst TEXT, relation TEXT)")
        connection.executemany(
            "INSERT INTO entities VALUES (?, ?, ?, ?, ?)",
            ((e["id"], e.get("name", e["id"]), e.get("kind"), e.get("team"), e.get("description"))
             for e in read_jsonl(self.entities)))
        connection.executemany(
            "INSERT INTO edges VALUES (?, ?, ?)",
            ((e["src"], e["dst"], e["relation"]) for e in read_jsonl(self.edges)))
        connection.execute("CREATE INDEX edges_src ON edges (src)")
        connection.execute("CREATE INDEX edges_dst ON edges (dst)")

    def query_rows(self, connection: sqlite3.Connection, query: str,
                   context: Mapping[str, Any], limit: int) -> list[Row]:
        words = set(tokenize(query))
        if not words:
            return []
        entities = [dict(r) for r in connection.execute("SELECT * FROM entities ORDER BY id")]
        scored = []
        for entity in entities:
            name_words = set(tokenize(entity["name"].replace("-", " ")))
            hits = len(words & name_words)
            if hits:
                scored.append((-hits / len(name_words), entity["id"], entity))
        scored.sort(key=lambda item: (item[0], item[1]))
        matched = [entity for _, _, entity in scored]
        rows: list[Row] = [{**e, "relation": "matched", "direction": None, "via": None,
                            "edge": None} for e in matched]
        seen = {e["id"] for e in matched}
        by_id = {e["id"]: e for e in entities}
        for entity in matched:
            neighbours = connection.execute(
                "SELECT dst AS other, relation, 'out' FROM edges WHERE src = ? "
                "UNION ALL SELECT src AS other, relation, 'in' FROM edges WHERE dst = ? "
                "ORDER BY 1, 3", (entity["id"], entity["id"]))
            for other, relation, direction in neighbours:
                if other in seen or other not in by_id:
                    continue
                seen.add(other)
                src, dst = (entity["id"], other) if direction == "out" else (other, entity["id"])
                rows.append({**by_id[other], "relation": relation, "direction": direction,
                             "via": entity["id"], "edge": f"{src} {relation} {dst}"})
        return rows[:limit]
