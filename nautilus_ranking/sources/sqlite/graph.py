"""A service graph in SQLite: entities matched by name, returned with their neighbours."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from nautilus_ranking.sources.base import Row
from nautilus_ranking.sources.mapped_fields import check_mapped_fields, fields_of
from nautilus_ranking.sources.schema import (
    BuildContext,
    SqliteSpec,
    register_source_type,
    resolve_data_path,
    resolve_seed_path,
)
from nautilus_ranking.sources.seeds import load_seed, sqlite_value
from nautilus_ranking.sources.sqlite.base import SqliteSource
from nautilus_ranking.text.tokens import tokenize

_EDGE_FIELDS = ("src", "dst", "relation")


class SqliteGraphSource(SqliteSource):
    """Entities (each with an ``id``; ``name`` defaults to the id; every other field
    is kept as written) and edges (``src``, ``dst``, ``relation``). A search
    matches entity names against the query's words; it returns the matched
    entities, best match first, then each one's neighbours with the edge that
    connects them: ``relation`` (the edge's label), ``direction`` (``out`` from
    the matched entity, or ``in``), ``via`` (the matched entity) and ``edge``
    (``"checkout-api writes_to orders-db"``)."""

    legacy_tables = frozenset({"entities", "edges"})

    #: Name matches come first, then neighbours in id order: partly an order of
    #: relevance, so the ranking judges it per batch (None) rather than trust it.
    ranked: bool | None = None
    no_hits = (
        "no entity's name holds a word of the query (a graph matches names, then adds "
        "their neighbours); try an entity's name"
    )

    def __init__(
        self,
        source_id: str,
        path: Path,
        entities: Path,
        edges: Path,
        timeout_s: float = 5.0,
        id_field: str = "id",
    ) -> None:
        super().__init__(source_id, path, timeout_s)
        self.id_field = id_field
        self.entities = entities
        self.edges = edges
        self._cache: tuple[Any, dict[str, str], list[tuple[str, frozenset[str]]]] | None = None

    def seeds(self) -> list[Path]:
        return [self.entities, self.edges]

    def options(self) -> dict[str, Any]:
        return {} if self.id_field == "id" else {"id_field": self.id_field}

    def build(self, connection: sqlite3.Connection) -> None:
        key = self.id_field
        entities = load_seed(self.entities, every_row=(key,))
        edges = load_seed(self.edges, every_row=_EDGE_FIELDS, allow_empty=True)
        connection.execute(
            "CREATE TABLE entities (id TEXT PRIMARY KEY, name TEXT NOT NULL, doc TEXT NOT NULL)"
        )
        connection.execute("CREATE TABLE edges (src TEXT, dst TEXT, relation TEXT)")
        connection.executemany(
            "INSERT OR REPLACE INTO entities VALUES (?, ?, ?)",
            (
                (
                    _text(e[key]),
                    _text(e.get("name") or e[key]),
                    _text(json.dumps(e, ensure_ascii=False)),
                )
                for e in entities
            ),
        )
        connection.executemany(
            "INSERT INTO edges VALUES (?, ?, ?)",
            ((_text(e["src"]), _text(e["dst"]), _text(e["relation"])) for e in edges),
        )
        connection.execute("CREATE INDEX edges_src ON edges (src)")
        connection.execute("CREATE INDEX edges_dst ON edges (dst)")

    def query_rows(
        self, connection: sqlite3.Connection, query: str, context: Mapping[str, Any], limit: int
    ) -> list[Row]:
        words = set(tokenize(query))
        if not words:
            return []
        entities, names = self._load(connection)
        scored = []
        for key, name_words in names:
            hits = len(words & name_words)
            if hits:
                scored.append((-hits / len(name_words), key))
        scored.sort()
        rows: list[Row] = [
            {
                **json.loads(entities[key]),
                "relation": "matched",
                "direction": None,
                "via": None,
                "edge": None,
            }
            for _, key in scored
        ]
        seen = {key for _, key in scored}
        for _, key in scored:
            neighbours = connection.execute(
                "SELECT dst AS other, relation, 'out' FROM edges WHERE src = ? "
                "UNION ALL SELECT src AS other, relation, 'in' FROM edges WHERE dst = ? "
                "ORDER BY 1, 3",
                (key, key),
            )
            for other, relation, direction in neighbours:
                if other in seen or other not in entities:
                    continue
                seen.add(other)
                src, dst = (key, other) if direction == "out" else (other, key)
                rows.append(
                    {
                        **json.loads(entities[other]),
                        "relation": relation,
                        "direction": direction,
                        "via": key,
                        "edge": f"{src} {relation} {dst}",
                    }
                )
        return rows[:limit]

    def _load(
        self,
        connection: sqlite3.Connection,
    ) -> tuple[dict[str, str], list[tuple[str, frozenset[str]]]]:
        """Each entity's JSON by id, and the words of each name (in id order), read and
        tokenised once per database file version; rows are parsed afresh from the JSON,
        so no two answers share an object."""
        stat = self.path.stat()
        stamp = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
        cached = self._cache
        if cached is not None and cached[0] == stamp:
            return cached[1], cached[2]
        records = connection.execute("SELECT id, name, doc FROM entities ORDER BY id").fetchall()
        entities = {key: doc for key, _, doc in records}
        names = [(key, frozenset(tokenize(name.replace("-", " ")))) for key, name, _ in records]
        self._cache = (stamp, entities, names)
        return entities, names


def _text(value: object) -> str:
    return str(sqlite_value(str(value)))


@register_source_type
class SqliteGraphSpec(SqliteSpec):
    """``sqlite_graph``: entities and edges from two JSONL seeds, matched by name."""

    type: Literal["sqlite_graph"]
    entities: str = Field(
        description="JSONL seed of entities (each with its id_field, "
        "'id' unless set; 'name' optional), relative to the "
        "sources file"
    )
    edges: str = Field(
        description="JSONL seed of edges ('src', 'dst', 'relation'), relative to the sources file"
    )

    def build(self, ctx: BuildContext) -> SqliteGraphSource:
        entities = resolve_seed_path(ctx, self.entities)
        edges = resolve_seed_path(ctx, self.edges)
        rows = load_seed(entities, every_row=(self.id_field,))
        answered = {"id", "relation", "direction", "via", "edge"}  # beside each entity's own
        check_mapped_fields(self, fields_of(rows) | answered, f"seed file {entities}")
        load_seed(edges, every_row=_EDGE_FIELDS, allow_empty=True)
        return SqliteGraphSource(
            self.id,
            resolve_data_path(ctx, self.path),
            entities,
            edges,
            self.timeout_s,
            self.id_field,
        )
