"""The steps of ``nautilus-ranking load`` that every table layout shares: read and check
a seed, connect, check the ids against the table's id column, the seed's ids for
``--prune``, the vector column and its model record, the progress bar, and the report.

``load.py`` writes a column per seed field; ``broker_layout.py`` the Nautilus broker's
pgvector table. Both run these steps, so a seed, an id or a model is refused alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from nautilus_ranking.embedders import Embedder
from nautilus_ranking.errors import NautilusError
from nautilus_ranking.sources.base import Row
from nautilus_ranking.sources.mapped_fields import check_mapped_fields
from nautilus_ranking.sources.postgres.base import PostgresSpec, table_identifier
from nautilus_ranking.sources.postgres.columns import (
    column_type,
    id_key,
    id_param,
    id_problem,
    ids_refused,
    unstorable,
)
from nautilus_ranking.sources.postgres.dsn import mask_dsn, scrub
from nautilus_ranking.sources.postgres.indexes import build_index
from nautilus_ranking.sources.postgres.vector import MODELS_TABLE, PgvectorSpec
from nautilus_ranking.sources.seeds import read_jsonl

if TYPE_CHECKING:
    from psycopg import Connection
    from psycopg.sql import Composable

#: Rows embedded (and written) at a time.
EMBED_BATCH = 64


class LoadError(NautilusError):
    """A seed or a table cannot be loaded (the message names the source and the reason)."""


@dataclass(frozen=True)
class LoadReport:
    source_id: str
    kind: str
    table: str
    loaded: int  # rows upserted from the seed
    in_table: int  # rows in the table afterwards
    pruned: int = 0  # rows removed because the seed no longer has their id (--prune)
    distinct_ids: int = 0  # the seed's ids, each once (numbers by value, strings by text)
    ids_in_table: int = 0  # table rows whose id is one of the seed's
    id_type: str = ""  # the table's id column, as PostgreSQL names its type
    id_field: str = "id"

    @property
    def ids_merged(self) -> str:
        """Why the table holds fewer rows for the seed's ids than it has distinct ids
        ("" when it does not): its id column holds some of them as one."""
        if self.ids_in_table >= self.distinct_ids:
            return ""
        return (
            f"its {self.id_field!r} column ({self.id_type}) holds {self.distinct_ids} of the "
            f"seed's distinct ids as {self.ids_in_table} row"
            + ("s" if self.ids_in_table != 1 else "")
            + "; load into a new table, or --replace to rebuild this one"
        )


def read_seed(spec: PostgresSpec, seed: Path) -> tuple[list[Row], list[str]]:
    """The seed's rows and field names, checked against the source's options."""
    docs = list(read_jsonl(seed))
    names = list(dict.fromkeys(k for doc in docs for k in doc))
    for i, doc in enumerate(docs, start=1):
        if doc.get(spec.id_field) is None:
            raise LoadError(
                f"source {spec.id!r}: {seed}: row {i} has no {spec.id_field!r} (the id_field)"
            )
        problem = id_problem(doc[spec.id_field])
        if problem:
            raise LoadError(
                f"source {spec.id!r}: {seed}: row {i}, field {spec.id_field!r}: {problem}"
            )
    for name in names:
        json_column = column_type([doc.get(name) for doc in docs]) == "jsonb"
        for i, doc in enumerate(docs, start=1):
            problem = unstorable(doc.get(name), json_column)
            if problem:
                raise LoadError(f"source {spec.id!r}: {seed}: row {i}, field {name!r}: {problem}")
    missing = [c for c in spec.columns if c not in names]
    if missing:
        raise LoadError(
            f"source {spec.id!r}: columns {missing} are in no row of {seed} "
            f"(fields: {', '.join(names)})"
        )
    try:
        check_mapped_fields(spec, answered_fields(spec, names), f"{seed}")
    except ValueError as exc:
        raise LoadError(f"source {spec.id!r}: {exc}") from None
    return docs, names


#: What a PostgreSQL source's rows have beside its table's columns (each type's own).
_ANSWERED = frozenset({"id", "rank", "embedding", "embedding_model", "distance"})


def answered_fields(spec: PostgresSpec, names: list[str]) -> set[str]:
    """The fields a source's rows have once its seed is loaded: a column per seed field,
    or (the broker's layout) ``id`` and a ``metadata`` object of the seed's fields."""
    if isinstance(spec, PgvectorSpec) and spec.layout != "columns":
        return {*_ANSWERED, "metadata", *(f"metadata.{name}" for name in names)}
    return {*_ANSWERED, *names}


def check_ids(spec: PostgresSpec, column: str, ids: list[Any]) -> None:
    """Refuse, naming them, the seed ids the table's id column would not store as
    themselves (a fraction in a bigint column, a number in a text one)."""
    refused = ids_refused(column, ids)
    if refused:
        raise LoadError(
            f"source {spec.id!r}: table {spec.table}'s {spec.id_field!r} column is {column}, "
            f"which cannot hold every seed id as itself: {refused} would be stored as "
            "another value or another id; write them as the column's other ids are "
            "written, load into a new table, or --replace to rebuild this one with a "
            "column that holds them"
        )


def seed_ids(
    conn: Connection[Any], spec: PostgresSpec, table: Composable, column: str, ids: list[Any]
) -> Composable:
    """The seed's ids in a temporary table (dropped at commit), in a column of the id
    column's own type and sent as the upsert sent them, so each matches the row it wrote."""
    from psycopg import sql

    seen = sql.Identifier("nautilus_seed_ids")
    conn.execute(
        sql.SQL(
            "CREATE TEMPORARY TABLE {} ON COMMIT DROP AS SELECT {} AS id FROM {} WITH NO DATA"
        ).format(seen, sql.Identifier(spec.id_field), table)
    )
    with conn.cursor() as cursor:
        cursor.executemany(
            sql.SQL("INSERT INTO {} VALUES (%s)").format(seen),
            [[id_param(i, column)] for i in ids],
        )
    return seen


def seed_id_match(spec: PostgresSpec, seen: Composable) -> Composable:
    from psycopg import sql

    return sql.SQL("SELECT 1 FROM {} AS s WHERE s.id = t.{}").format(
        seen, sql.Identifier(spec.id_field)
    )


def prune_rows(
    conn: Connection[Any], spec: PostgresSpec, table: Composable, seen: Composable
) -> int:
    """Delete the rows whose id is not in the seed (:func:`seed_ids`); how many went."""
    from psycopg import sql

    deleted = conn.execute(
        sql.SQL("DELETE FROM {} AS t WHERE NOT EXISTS ({})").format(
            table, seed_id_match(spec, seen)
        )
    ).rowcount
    return max(deleted, 0)


def finish_load(
    conn: Connection[Any],
    spec: PostgresSpec,
    keyed: PostgresSpec,
    table: Composable,
    id_type: str,
    ids: list[Any],
    rows_read: int,
    prune: bool,
) -> LoadReport:
    """The end every layout shares: the seed's ids found in the table, ``--prune``, the
    index, the commit, and the report (``keyed``: ``spec`` with the table's id column as
    its ``id_field``)."""
    from psycopg import sql

    seen = seed_ids(conn, keyed, table, id_type, ids)
    pruned = prune_rows(conn, keyed, table, seen) if prune else 0
    (in_table_ids,) = conn.execute(
        sql.SQL("SELECT count(*) FROM {} AS t WHERE EXISTS ({})").format(
            table, seed_id_match(keyed, seen)
        )
    ).fetchone() or (0,)
    build_index(conn, spec, table)
    conn.commit()
    (count,) = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(table)).fetchone() or (0,)
    return LoadReport(
        spec.id,
        spec.type,
        spec.table,
        rows_read,
        int(count),
        pruned,
        distinct_ids=len({id_key(i) for i in ids}),
        ids_in_table=int(in_table_ids),
        id_type=id_type,
        id_field=keyed.id_field,
    )


def connect(spec: PostgresSpec) -> Connection[Any]:
    """The load's connection; a failure names the DSN masked and its reason scrubbed
    (host names are resolved in Python: a misread DSN's host may fail as UnicodeError)."""
    import psycopg

    dsn = spec.dsn.get_secret_value()
    try:
        return psycopg.connect(dsn, connect_timeout=10)
    except (psycopg.Error, OSError, ValueError) as exc:
        raise LoadError(
            f"source {spec.id!r} ({mask_dsn(dsn)}): "
            f"{scrub(str(exc).strip() or type(exc).__name__, dsn)}"
        ) from None


def prepare_vectors(
    conn: Connection[Any], spec: PgvectorSpec, model: str, embedder: Embedder, replace: bool
) -> None:
    from pgvector.psycopg import register_vector
    from psycopg import sql

    conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    register_vector(conn)
    dim = len(embedder.embed("dimension probe"))
    conn.execute(
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (table_name text, column_name text, "
            "model text NOT NULL, dim integer NOT NULL, "
            "PRIMARY KEY (table_name, column_name))"
        ).format(sql.Identifier(MODELS_TABLE))
    )
    row = conn.execute(
        sql.SQL("SELECT model FROM {} WHERE table_name = %s AND column_name = %s").format(
            sql.Identifier(MODELS_TABLE)
        ),
        (spec.table, spec.embedding_column),
    ).fetchone()
    if row is not None and row[0] != model and not replace:
        raise LoadError(
            f"source {spec.id!r}: {spec.table}.{spec.embedding_column} holds vectors "
            f"made by {row[0]!r}, this load would embed with {model!r}; vectors of "
            f"different models are never mixed (add --replace to rebuild the table)"
        )
    conn.execute(
        sql.SQL("ALTER TABLE {} ADD COLUMN IF NOT EXISTS {} vector({})").format(
            table_identifier(spec.table), sql.Identifier(spec.embedding_column), sql.Literal(dim)
        )
    )
    conn.execute(
        sql.SQL(
            "INSERT INTO {} VALUES (%s, %s, %s, %s) ON CONFLICT (table_name, "
            "column_name) DO UPDATE SET model = EXCLUDED.model, dim = EXCLUDED.dim"
        ).format(sql.Identifier(MODELS_TABLE)),
        (spec.table, spec.embedding_column, model, dim),
    )


class Progress:
    """``id: [#####.....] 120/500 rows`` redrawn in place on a terminal; silent otherwise."""

    def __init__(self, label: str, total: int, stream: TextIO | None) -> None:
        self.label, self.total, self.done_count = label, total, 0
        self.stream = stream if stream is not None and stream.isatty() else None

    def update(self, count: int) -> None:
        self.done_count += count
        if self.stream is None:
            return
        width = 30
        filled = width * self.done_count // max(self.total, 1)
        self.stream.write(
            f"\r  {self.label}: [{'#' * filled}{'.' * (width - filled)}] "
            f"{self.done_count}/{self.total} rows"
        )
        self.stream.flush()

    def done(self) -> None:
        if self.stream is not None:
            self.stream.write("\n")
            self.stream.flush()
