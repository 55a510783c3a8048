"""``nautilus-ranking load``: from JSONL seeds to searchable PostgreSQL tables in one command.

For every PostgreSQL source with a ``seed``: create its table (columns typed
from the seed, ``id_field`` the primary key, in a column that holds every seed id
as itself; an existing one that cannot is refused), upsert every row (loading twice
never duplicates a row), then the type's index — a GIN index on the tsvector
(a stored generated column when ``tsvector_column`` is set, else the same
expression the source queries), an HNSW index (``vector_cosine_ops``) on the
embeddings, which are computed in batches with the configured embedder, and a
row in ``nautilus_vector_models`` saying which model made them. A table holding
another model's vectors is refused unless ``--replace`` rebuilds it.

With ``layout: nautilus-broker`` a pgvector table is written as the Nautilus broker's
``pgvector`` adapter reads it instead (``broker_layout.py``).

One concept, a load from seed to table, in the order it runs: read and check the
seeds, type and create the table, write the rows, prune, index. What a seed's values
become as columns is ``columns.py``; the index each type gets is ``indexes.py``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import numpy as np

from nautilus_ranking.embedders import Embedder, embed_texts
from nautilus_ranking.errors import NautilusError
from nautilus_ranking.sources.base import Row
from nautilus_ranking.sources.postgres.base import PostgresSpec, require_postgres, table_identifier
from nautilus_ranking.sources.postgres.columns import (
    column_type,
    id_column_type,
    id_key,
    id_param,
    id_problem,
    ids_refused,
    stored_type,
    stored_types,
    unstorable,
)
from nautilus_ranking.sources.postgres.dsn import mask_dsn, scrub
from nautilus_ranking.sources.postgres.indexes import build_index
from nautilus_ranking.sources.postgres.vector import (
    MODELS_TABLE,
    PgvectorSpec,
    model_id,
    vector_embedder,
)
from nautilus_ranking.sources.schema import SourceSpec
from nautilus_ranking.sources.seeds import read_jsonl

if TYPE_CHECKING:
    from psycopg import Connection
    from psycopg.sql import Composable

EMBED_BATCH = 64
WRITE_BATCH = 500


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


def postgres_specs(specs: Iterable[SourceSpec]) -> list[PostgresSpec]:
    """The PostgreSQL entries of a validated sources file."""
    return [spec for spec in specs if isinstance(spec, PostgresSpec)]


def load_postgres(
    specs: Sequence[PostgresSpec],
    base_dir: Path,
    embedder_name: str,
    replace: bool = False,
    cache_size: int = 10_000,
    progress: TextIO | None = None,
    prune: bool = False,
) -> list[LoadReport]:
    """Load every spec that has a seed; ``progress`` (a terminal) gets a bar per source.

    A load upserts: a row deleted from the seed stays in the table unless ``prune``
    (its delete runs in the same transaction as the upsert) or ``replace``."""
    require_postgres()
    reports = []
    for spec in specs:
        if spec.seed is None:
            continue
        seed = seed_path(spec.seed, base_dir)
        try:
            reports.append(
                _load_one(spec, seed, embedder_name, replace, cache_size, progress, prune)
            )
        except LoadError:
            raise
        except (OSError, ValueError) as exc:
            raise LoadError(f"source {spec.id!r}: {exc}") from exc
        except Exception as exc:
            import psycopg

            if isinstance(exc, psycopg.Error):
                raise LoadError(
                    f"source {spec.id!r} ({mask_dsn(spec.dsn.get_secret_value())}): "
                    f"{scrub(str(exc).strip(), spec.dsn.get_secret_value())}"
                ) from None
            raise
    return reports


def seed_path(seed: str, base_dir: Path) -> Path:
    """A seed's path: relative paths are beside the sources file."""
    path = Path(seed).expanduser()
    return path if path.is_absolute() else base_dir / path


def check_seeds(specs: Sequence[PostgresSpec], base_dir: Path) -> None:
    """What ``load`` checks before it connects — each seed readable, its rows with an
    ``id_field``, ``columns`` present — without a database (``nautilus-ranking config``)."""
    for spec in specs:
        if spec.seed is None:
            continue
        try:
            read_seed(spec, seed_path(spec.seed, base_dir))
        except (OSError, ValueError) as exc:
            raise LoadError(f"source {spec.id!r}: {exc}") from exc


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
    return docs, names


def _load_one(
    spec: PostgresSpec,
    seed: Path,
    embedder_name: str,
    replace: bool,
    cache_size: int,
    progress: TextIO | None,
    prune: bool = False,
) -> LoadReport:
    from psycopg import sql

    docs, names = read_seed(spec, seed)
    types = {name: column_type([doc.get(name) for doc in docs]) for name in names}
    ids = [doc[spec.id_field] for doc in docs]
    types[spec.id_field] = id_column_type(ids)  # holds every seed id distinctly
    table = table_identifier(spec.table)
    embedder: Embedder | None = None
    if isinstance(spec, PgvectorSpec):
        embedder = vector_embedder(embedder_name, spec.dim, cache_size)

    if embedder is not None and isinstance(spec, PgvectorSpec) and spec.layout != "columns":
        from nautilus_ranking.sources.postgres.broker_layout import load_broker_layout

        return load_broker_layout(spec, seed, embedder, replace, progress, prune)
    with _connect(spec) as conn:
        if replace:
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(table))
        columns = sql.SQL(", ").join(
            sql.SQL("{} {}").format(sql.Identifier(n), sql.SQL(types[n])) for n in names
        )
        conn.execute(
            sql.SQL("CREATE TABLE IF NOT EXISTS {} ({}, PRIMARY KEY ({}))").format(
                table, columns, sql.Identifier(spec.id_field)
            )
        )
        for name in names:  # a seed that gained a field since the last load
            conn.execute(
                sql.SQL("ALTER TABLE {} ADD COLUMN IF NOT EXISTS {} {}").format(
                    table, sql.Identifier(name), sql.SQL(types[name])
                )
            )
        types = stored_types(conn, table, types)
        # the id as the table holds it: refused unless every seed id is stored as itself
        types[spec.id_field] = stored_type(conn, table, spec.id_field)
        _check_ids(spec, types[spec.id_field], ids)
        vectors_column = None
        if isinstance(spec, PgvectorSpec) and embedder is not None:
            vectors_column = spec.embedding_column
            prepare_vectors(conn, spec, model_id(embedder), embedder, replace)
        _upsert(conn, spec, table, names, types, docs, embedder, vectors_column, progress)
        seen = _seed_ids(conn, spec, table, types[spec.id_field], ids)
        pruned = _prune(conn, spec, table, seen) if prune else 0
        (in_table_ids,) = conn.execute(
            sql.SQL("SELECT count(*) FROM {} AS t WHERE EXISTS ({})").format(
                table, _seed_id_match(spec, seen)
            )
        ).fetchone() or (0,)
        build_index(conn, spec, table)
        conn.commit()
        (count,) = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(table)).fetchone() or (0,)
    return LoadReport(
        spec.id,
        spec.type,
        spec.table,
        len(docs),
        int(count),
        pruned,
        distinct_ids=len({id_key(i) for i in ids}),
        ids_in_table=int(in_table_ids),
        id_type=types[spec.id_field],
        id_field=spec.id_field,
    )


def _check_ids(spec: PostgresSpec, column: str, ids: list[Any]) -> None:
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


def _seed_ids(
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


def _seed_id_match(spec: PostgresSpec, seen: Composable) -> Composable:
    from psycopg import sql

    return sql.SQL("SELECT 1 FROM {} AS s WHERE s.id = t.{}").format(
        seen, sql.Identifier(spec.id_field)
    )


def _prune(conn: Connection[Any], spec: PostgresSpec, table: Composable, seen: Composable) -> int:
    """Delete the rows whose id is not in the seed (:func:`_seed_ids`); how many went."""
    from psycopg import sql

    deleted = conn.execute(
        sql.SQL("DELETE FROM {} AS t WHERE NOT EXISTS ({})").format(
            table, _seed_id_match(spec, seen)
        )
    ).rowcount
    return max(deleted, 0)


def _connect(spec: PostgresSpec) -> Connection[Any]:
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


def _upsert(
    conn: Connection[Any],
    spec: PostgresSpec,
    table: Composable,
    names: list[str],
    types: dict[str, str],
    docs: list[Row],
    embedder: Embedder | None,
    vectors_column: str | None,
    progress: TextIO | None,
) -> None:
    from psycopg import sql
    from psycopg.types.json import Jsonb

    targets = [*names, *([vectors_column] if vectors_column else [])]
    updates = [n for n in targets if n != spec.id_field]
    statement = sql.SQL("INSERT INTO {} ({}) VALUES ({}) ON CONFLICT ({}) DO {}").format(
        table,
        sql.SQL(", ").join(map(sql.Identifier, targets)),
        sql.SQL(", ").join(sql.Placeholder() * len(targets)),
        sql.Identifier(spec.id_field),
        sql.SQL("UPDATE SET ")
        + sql.SQL(", ").join(
            sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(n)) for n in updates
        )
        if updates
        else sql.SQL("NOTHING"),
    )
    batch = EMBED_BATCH if embedder is not None else WRITE_BATCH
    bar = _Progress(spec.id, len(docs), progress)
    with conn.cursor() as cursor:
        for start in range(0, len(docs), batch):
            chunk = docs[start : start + batch]
            params = [
                [
                    id_param(d[n], types[n])
                    if n == spec.id_field
                    else Jsonb(d.get(n))
                    if types[n] == "jsonb" and d.get(n) is not None
                    else d.get(n)
                    for n in names
                ]
                for d in chunk
            ]
            if embedder is not None:
                texts = [" ".join(str(d.get(c) or "") for c in spec.columns) for d in chunk]
                vectors = embed_texts(embedder, texts).astype(np.float32)
                params = [[*p, v] for p, v in zip(params, vectors, strict=True)]
            cursor.executemany(statement, params)
            bar.update(len(chunk))
    bar.done()


class _Progress:
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


def default_progress() -> TextIO:
    return sys.stderr
