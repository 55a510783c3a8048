"""``layout: nautilus-broker``: a pgvector table as the Nautilus broker's ``pgvector``
adapter reads it.

That adapter (nautilus-rkm 0.3) runs ``SELECT id, metadata, embedding FROM t ORDER BY
embedding <=> $E LIMIT $L``: a column named ``id``, the row's fields in one
``metadata`` column (it hands them on as JSON text), and the vectors. The column
layout ``load`` writes otherwise (a column per seed field) has no ``metadata``, so the
broker's rows would carry nothing to read. This layout writes:

- ``id``: the seed's ``id_field`` (typed as ``load`` types an id: ``bigint``, ``text``...),
  the primary key;
- ``metadata`` (``jsonb``): every other field of the seed row, as the seed has it;
- ``embedding_column`` (``vector(N)``): ``columns``' text embedded by
  ``NAUTILUS_EMBEDDER`` at ``dim`` dimensions (the hashing embedder; ``dim`` at most
  2,000, so the HNSW index ``vector_cosine_ops`` that ``<=>`` uses can be built),
  recorded in ``nautilus_vector_models`` as every vector table ``load`` writes is.

The query vector the adapter compares with is the attachment's
(``nautilus_ranking.upstream.query_vectors``), made by the same embedder at
``NAUTILUS_UPSTREAM_VECTOR_DIM``. Upsert, ``--prune`` and ``--replace`` behave as for
the column layout.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import numpy as np

from nautilus_ranking.embedders import Embedder, embed_texts
from nautilus_ranking.sources.postgres.base import table_identifier
from nautilus_ranking.sources.postgres.columns import id_column_type, id_param, stored_type
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
from nautilus_ranking.sources.postgres.vector import PgvectorSpec, model_id

if TYPE_CHECKING:
    from psycopg import Connection
    from psycopg.sql import Composable

#: The layout's value in a sources file.
BROKER_LAYOUT = "nautilus-broker"
#: The column names the broker's adapter selects (its ``metadata_column`` default).
ID_COLUMN = "id"
METADATA_COLUMN = "metadata"


def load_broker_layout(
    spec: PgvectorSpec,
    seed: Path,
    embedder: Embedder,
    replace: bool,
    progress: TextIO | None,
    prune: bool = False,
) -> LoadReport:
    """Load ``seed`` into ``spec.table`` in the broker's layout (created if missing)."""
    from psycopg import sql

    docs, _ = read_seed(spec, seed)
    ids = [doc[spec.id_field] for doc in docs]
    table = table_identifier(spec.table)
    keyed = spec.model_copy(update={"id_field": ID_COLUMN})  # the table's id column
    with connect(spec) as conn:
        if replace:
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(table))
        conn.execute(
            sql.SQL("CREATE TABLE IF NOT EXISTS {} ({} {} PRIMARY KEY, {} jsonb NOT NULL)").format(
                table,
                sql.Identifier(ID_COLUMN),
                sql.SQL(id_column_type(ids)),
                sql.Identifier(METADATA_COLUMN),
            )
        )
        _check_layout(conn, spec, table)
        id_type = stored_type(conn, table, ID_COLUMN)
        check_ids(keyed, id_type, ids)
        prepare_vectors(conn, spec, model_id(embedder), embedder, replace)
        _upsert(conn, spec, table, id_type, docs, embedder, progress)
        return finish_load(conn, spec, keyed, table, id_type, ids, len(docs), prune)


def _check_layout(conn: Connection[Any], spec: PgvectorSpec, table: Composable) -> None:
    """Refuse a table that exists in another layout (it has no ``id`` or ``metadata``)."""
    from psycopg import sql

    cursor = conn.execute(sql.SQL("SELECT * FROM {} LIMIT 0").format(table))
    present = {column.name for column in cursor.description or ()}
    missing = [c for c in (ID_COLUMN, METADATA_COLUMN) if c not in present]
    if missing:
        raise LoadError(
            f"source {spec.id!r}: table {spec.table} exists without the column(s) "
            f"{', '.join(missing)} of layout {BROKER_LAYOUT} (it has: "
            f"{', '.join(sorted(present)) or 'none'}); load into a new table, or "
            "--replace to rebuild this one"
        )


def _upsert(
    conn: Connection[Any],
    spec: PgvectorSpec,
    table: Composable,
    id_type: str,
    docs: list[dict[str, Any]],
    embedder: Embedder,
    progress: TextIO | None,
) -> None:
    from psycopg import sql
    from psycopg.types.json import Jsonb

    targets = [ID_COLUMN, METADATA_COLUMN, spec.embedding_column]
    statement = sql.SQL(
        "INSERT INTO {} ({}) VALUES (%s, %s, %s) ON CONFLICT ({}) DO UPDATE SET "
        "{} = EXCLUDED.{}, {} = EXCLUDED.{}"
    ).format(
        table,
        sql.SQL(", ").join(map(sql.Identifier, targets)),
        sql.Identifier(ID_COLUMN),
        *(sql.Identifier(targets[1]),) * 2,
        *(sql.Identifier(targets[2]),) * 2,
    )
    bar = Progress(spec.id, len(docs), progress)
    with conn.cursor() as cursor:
        for start in range(0, len(docs), EMBED_BATCH):
            chunk = docs[start : start + EMBED_BATCH]
            texts = [" ".join(str(d.get(c) or "") for c in spec.columns) for d in chunk]
            vectors = embed_texts(embedder, texts).astype(np.float32)
            cursor.executemany(
                statement,
                [
                    [
                        id_param(d[spec.id_field], id_type),
                        Jsonb({k: v for k, v in d.items() if k != spec.id_field}),
                        vector,
                    ]
                    for d, vector in zip(chunk, vectors, strict=True)
                ],
            )
            bar.update(len(chunk))
    bar.done()
