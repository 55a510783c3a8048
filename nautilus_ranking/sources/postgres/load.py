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

One concept, a load from seed to table (the steps every layout shares are
``load_steps.py``), in the order it runs: read and check the
seeds, type and create the table, write the rows, prune, index. What a seed's values
become as columns is ``columns.py``; the index each type gets is ``indexes.py``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import numpy as np

from nautilus_ranking.embedders import Embedder, embed_texts
from nautilus_ranking.sources.base import Row
from nautilus_ranking.sources.postgres.base import PostgresSpec, require_postgres, table_identifier
from nautilus_ranking.sources.postgres.broker_layout import load_broker_layout
from nautilus_ranking.sources.postgres.columns import (
    column_type,
    id_column_type,
    id_param,
    stored_type,
    stored_types,
)
from nautilus_ranking.sources.postgres.dsn import mask_dsn, scrub
from nautilus_ranking.sources.postgres.load_steps import (
    EMBED_BATCH,
    LoadError,
    LoadReport,
    Progress,
    check_ids,
    connect,
    finish_load,
    prepare_vectors,
    read_seed,
)
from nautilus_ranking.sources.postgres.vector import (
    PgvectorSpec,
    model_id,
    vector_embedder,
)
from nautilus_ranking.sources.schema import SourceSpec

if TYPE_CHECKING:
    from psycopg import Connection
    from psycopg.sql import Composable

WRITE_BATCH = 500


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
        return load_broker_layout(spec, seed, embedder, replace, progress, prune)
    with connect(spec) as conn:
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
        check_ids(spec, types[spec.id_field], ids)
        vectors_column = None
        if isinstance(spec, PgvectorSpec) and embedder is not None:
            vectors_column = spec.embedding_column
            prepare_vectors(conn, spec, model_id(embedder), embedder, replace)
        _upsert(conn, spec, table, names, types, docs, embedder, vectors_column, progress)
        return finish_load(conn, spec, spec, table, types[spec.id_field], ids, len(docs), prune)


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
    bar = Progress(spec.id, len(docs), progress)
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


def default_progress() -> TextIO:
    return sys.stderr
