"""PostgreSQL full text: ``websearch_to_tsquery`` over a ``tsvector``, best ``ts_rank_cd`` first.

The ``tsvector`` is either a column (``tsvector_column``, e.g. a generated
column that ``nautilus-ranking load`` creates, GIN-indexed) or the expression
``to_tsvector(language, col1 || ' ' || col2 …)`` over ``columns`` (which a GIN
expression index over the same expression serves). Each row carries its
``rank`` (``ts_rank_cd``, length-normalised) so the ranker can use it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator

from nautilus_ranking.sources.base import Row, Source
from nautilus_ranking.sources.postgres.base import PostgresSource, PostgresSpec, finish, spec_kwargs
from nautilus_ranking.sources.schema import BuildContext, register_source_type
from nautilus_ranking.text.tokens import plain_tokens

if TYPE_CHECKING:
    from psycopg.sql import Composable, Composed

#: At most this many words of a query become OR-ed terms (each one bound parameter).
MAX_TERMS = 32
#: ``ts_rank_cd`` normalisation 1: divide by 1 + log(document length), so long
#: documents do not win by repeating words. Chosen on the shared collections (nDCG@10 of
#: this source alone, options 0/1/2/4/8/32): 1 is best on adi (.320) and cisi (.217) and
#: near-best on cranfield (.276; 4 gives .285); 0, the default, gives .316/.188/.238.
RANK_NORMALIZATION = 1
_LANGUAGE = re.compile(r"^[a-z_]+$")
_UNSENDABLE = re.compile("[\x00\ud800-\udfff]")


def tsvector_expression(
    columns: Sequence[str], language: str, alias: str | None = None
) -> Composable:
    """``to_tsvector('language', coalesce(c1, '') || ' ' || …)`` — the same text for the
    query and for the GIN expression index, so the planner can match them."""
    from psycopg import sql

    parts = [
        sql.SQL("coalesce({}::text, '')").format(
            sql.Identifier(alias, c) if alias else sql.Identifier(c)
        )
        for c in columns
    ]
    return sql.SQL("to_tsvector({}::regconfig, {})").format(
        sql.Literal(language), sql.SQL(" || ' ' || ").join(parts)
    )


class PostgresFtsSource(PostgresSource):
    """Rows whose text matches the query (any word, or ``match: all``: web-search syntax)."""

    def __init__(
        self,
        source_id: str,
        dsn: str,
        table: str,
        columns: Sequence[str],
        id_field: str = "id",
        limit: int | None = None,
        timeout_s: float = 5.0,
        pool_size: int = 4,
        tsvector_column: str | None = None,
        language: str = "english",
        match: str = "any",
    ) -> None:
        super().__init__(source_id, dsn, table, columns, id_field, limit, timeout_s, pool_size)
        if not _LANGUAGE.match(language):
            raise ValueError(
                f"language must be a text search configuration name such as "
                f"'english' or 'simple', got {language!r}"
            )
        if match not in ("any", "all"):
            raise ValueError(f"match must be 'any' or 'all', got {match!r}")
        self.tsvector_column = tsvector_column
        self.language = language
        self.match = match

    def statement(self, query: str, limit: int) -> tuple[Composed, Sequence[Any]] | None:
        from psycopg import sql

        to_query = sql.SQL("websearch_to_tsquery({}::regconfig, %s)").format(
            sql.Literal(self.language)
        )
        if self.match == "all":
            # PostgreSQL text holds no NUL and the driver encodes no lone surrogate:
            # both become spaces; the first MAX_TERMS words count, as for "any".
            text = " ".join(_UNSENDABLE.sub(" ", query).split()[:MAX_TERMS])
            if not text:
                return None
            terms: list[str] = [text]
        else:
            # Unstemmed words: PostgreSQL stems them by its text search configuration.
            terms = list(dict.fromkeys(plain_tokens(query)))[:MAX_TERMS]
            if not terms:
                return None
        tsquery = sql.SQL(" || ").join([to_query] * len(terms))
        if self.tsvector_column:
            vector: Composable = sql.Identifier("t", self.tsvector_column)
            hidden = [self.tsvector_column]
        else:
            vector = tsvector_expression(self.columns, self.language, alias="t")
            hidden = []
        statement = sql.SQL(
            "SELECT to_jsonb(t) - %s::text[], ts_rank_cd({vector}, q.query, {norm}) AS rank "
            "FROM {table} AS t, (SELECT {tsquery} AS query) AS q "
            "WHERE {vector} @@ q.query "
            "ORDER BY rank DESC, t.{id} LIMIT %s"
        ).format(
            vector=vector,
            norm=sql.Literal(RANK_NORMALIZATION),
            table=self.table,
            tsquery=tsquery,
            id=self.id_column,
        )
        return statement, [hidden, *terms, limit]

    def to_row(self, record: Sequence[Any]) -> Row:
        return {**super().to_row(record), "rank": float(record[1])}


@register_source_type
class PostgresFtsSpec(PostgresSpec):
    type: Literal["postgres_fts"]
    tsvector_column: str | None = Field(default=None, min_length=1)
    language: str = "english"
    match: Literal["any", "all"] = "any"

    @field_validator("language")
    @classmethod
    def _language(cls, value: str) -> str:
        if not _LANGUAGE.match(value):
            raise ValueError(
                f"must be a text search configuration name such as 'english' "
                f"or 'simple', got {value!r}"
            )
        return value

    def build(self, ctx: BuildContext) -> Source:
        return finish(
            self,
            PostgresFtsSource(
                **spec_kwargs(self),
                tsvector_column=self.tsvector_column,
                language=self.language,
                match=self.match,
            ),
        )
