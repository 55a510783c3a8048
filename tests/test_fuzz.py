"""A standing fuzz suite: whatever rows, contexts, settings or sources-file values come in,
nothing raises, nothing is mutated, the output has the promised size, and the same input
gives the same bytes — in this process and in another one.

By default the examples are derandomized (tests/conftest.py). Explore with more:

    NAUTILUS_FUZZ_EXAMPLES=5000 .venv/bin/pytest tests/test_fuzz.py

Every failure found that way is kept below as an ``@example``.
"""

from __future__ import annotations

import json
import math
import os
import pickle
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from fakes import FakeSource
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from nautilus_ranking import (
    AdapterResult,
    BasicSynthesizer,
    Broker,
    ErrorRecord,
    NautilusSettings,
    RankingSynthesizer,
    compute_response_hash,
)
from nautilus_ranking.response_hash import NoCanonicalFormError, canonical_json, json_default
from nautilus_ranking.rows import mapping_problem
from nautilus_ranking.sources.factory import SourceConfigError, build_sources

#: Examples per property: small under CI (the suite adds seconds), larger when exploring.
EXAMPLES = int(os.environ.get("NAUTILUS_FUZZ_EXAMPLES", "60"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
#: For the properties whose examples cost the most (whole settings objects).
FUZZ_FEWER = settings(FUZZ, max_examples=max(10, EXAMPLES // 3))

SOURCE_IDS = ("tickets", "graph", "runbooks", "postmortems")
WORDS = (
    "disk",
    "full",
    "orders",
    "database",
    "standby",
    "ms",
    "lag",
    "cpu",
    "é",
    "日本",
    "",
    " ",
    "\x00",
    "DISK",
    "disk-full",
    "ümlaut",
)


class RaisingStr:
    def __str__(self) -> str:
        raise RuntimeError("no text")

    __repr__ = __str__


class GetRaises(dict[str, Any]):
    def get(self, key: Any, default: Any = None) -> Any:
        raise KeyError(key)


class ItemsRaises(dict[str, Any]):
    def items(self) -> Any:
        raise RuntimeError("items")

    def values(self) -> Any:
        raise RuntimeError("values")


# --- strategies -----------------------------------------------------------------------------

text = st.one_of(
    st.lists(st.sampled_from(WORDS), max_size=8).map(" ".join),
    st.text(max_size=40),
    st.sampled_from(["disk " * 6000, "x" * 25_000]),  # longer than the 20,000-char cut
)
floats = st.floats(allow_nan=True, allow_infinity=True)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    floats,
    text,
    st.sampled_from([10**400, 0.0, -0.0, 1e308]),
    st.builds(lambda: -(10**4301)),  # built, not listed: hypothesis cannot repr it
    st.binary(max_size=8),
)
hashables = st.one_of(st.none(), st.booleans(), st.integers(-99, 99), st.text(max_size=6))
values = st.recursive(
    st.one_of(scalars, st.frozensets(hashables, max_size=4), st.sets(hashables, max_size=4)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(st.text(max_size=6), inner, max_size=4),
    ),
    max_leaves=12,
)


@st.composite
def vectors(draw: st.DrawFn) -> Any:
    """An embedding field: right-size, wrong-size, odd shape, odd numbers, not a vector."""
    dim = draw(st.sampled_from([0, 1, 3, 4, 8]))
    numbers = st.one_of(
        st.floats(-1e6, 1e6), floats, st.integers(-5, 5), st.sampled_from([10**400, 1e308])
    )
    kind = draw(st.sampled_from(["list", "array", "tuple", "0d", "2d", "text", "nested"]))
    items = draw(st.lists(numbers, min_size=dim, max_size=dim))
    if kind == "list":
        return items
    if kind == "tuple":
        return tuple(items)
    if kind == "array":
        finite = [x for x in items if isinstance(x, float)]
        return np.array(finite, dtype=np.float64)
    if kind == "0d":
        return np.array(1.0)
    if kind == "2d":
        return np.ones((2, max(dim, 1)))
    if kind == "nested":
        return [items, items]
    return draw(text)


@st.composite
def rows(draw: st.DrawFn) -> Any:
    kind = draw(
        st.sampled_from(
            ["plain"] * 6
            + [
                "odd",
                "cycle",
                "mixed_keys",
                "get_raises",
                "items_raises",
                "str_raises",
                "not_a_dict",
            ]
        )
    )
    row: dict[Any, Any] = draw(
        st.dictionaries(
            st.sampled_from(["id", "t", "title", "body", "score", "k", "tags"]), values, max_size=5
        )
    )
    if draw(st.booleans()):
        row["t"] = draw(text)
    if draw(st.booleans()):
        row["embedding"] = draw(vectors())
        if draw(st.booleans()):
            row["embedding_model"] = draw(st.sampled_from(["hashing-v1-4", "other", None, 3]))
    if kind == "odd":
        odd = draw(st.sampled_from(["huge", float("nan"), b"\xff", {1, "a"}, (1, [2]), RaisingStr]))
        row[draw(st.sampled_from(["n", "v"]))] = 10**5000 if odd == "huge" else odd
    elif kind == "cycle":
        row["self"] = row
    elif kind == "mixed_keys":
        row[1] = "one"
    elif kind == "get_raises":
        return GetRaises(row)
    elif kind == "items_raises":
        return ItemsRaises(row)
    elif kind == "str_raises":
        row["v"] = RaisingStr()
    elif kind == "not_a_dict":
        return draw(st.one_of(scalars, st.lists(scalars, max_size=2)))
    return row


@st.composite
def results(draw: st.DrawFn) -> list[AdapterResult]:
    out = []
    for sid in draw(
        st.lists(st.one_of(st.sampled_from(SOURCE_IDS), st.integers(0, 2)), max_size=4)
    ):
        if draw(st.integers(0, 9)) == 0:
            out.append(AdapterResult(sid, [], error=ErrorRecord(str(sid), "timeout", "slow")))
            continue
        source_rows = draw(
            st.one_of(st.lists(rows(), max_size=8), st.sampled_from([None, "garbage", ()]))
        )
        out.append(AdapterResult(sid, source_rows))
    return out


contexts = st.one_of(
    st.none(),
    st.sampled_from([[], "query as a string", 5]),
    st.fixed_dictionaries({}, optional={"query": st.one_of(text, scalars), "embedding": vectors()}),
)


@st.composite
def synthesizers(draw: st.DrawFn) -> RankingSynthesizer:
    boosts = draw(
        st.dictionaries(
            st.sampled_from([*SOURCE_IDS, "nope"]),
            st.sampled_from(["-high", "-low", "low", "medium", "high"]),
            max_size=3,
        )
    )
    return RankingSynthesizer(
        top_k=draw(st.none() | st.integers(1, 12)),
        idf=draw(st.booleans()),
        source_boosts=boosts,
        max_candidates=draw(st.none() | st.integers(1, 20)),
        dedup_key=draw(st.sampled_from([None, "id", "t", "k", "tags", "embedding"])),
    )


# --- helpers --------------------------------------------------------------------------------


def snapshot(value: Any) -> Any:
    """What a row looks like now, comparable later even when it has no canonical form."""
    try:
        return canonical_json(value)
    except NoCanonicalFormError:
        if isinstance(value, dict):
            return (type(value), [(id(k), id(v)) for k, v in dict.items(value)])
        return (type(value), id(value))


def rankable(result: AdapterResult) -> list[Any]:
    if result.error is not None or not isinstance(result.rows, list):
        return []
    return [
        r
        for r in result.rows
        if type(r) is dict or (isinstance(r, dict) and mapping_problem(r) is None)
    ]


def fingerprint(merged: Mapping[Any, list[Any]], ranking: list[Any]) -> Any:
    return (
        [(sid, [id(r) for r in rs]) for sid, rs in merged.items()],
        [(r.source_id, id(r.row), r.rank, r.source_rank, r.score) for r in ranking],
    )


# --- properties -----------------------------------------------------------------------------


@FUZZ
@given(synth=synthesizers(), results=results(), context=contexts)
@example(
    synth=RankingSynthesizer(dedup_key="k"),
    results=[AdapterResult("s", [{"t": "disk", "k": {1: "a", "b": 2}}])],
    context={"query": "disk"},
)
@example(
    synth=RankingSynthesizer(),
    results=[AdapterResult("s", None)],  # type: ignore[arg-type]
    context=None,
)
@example(
    synth=RankingSynthesizer(),
    results=[AdapterResult("s", [{"t": "disk", "embedding": np.array(1.0)}])],
    context={"embedding": [10**400, 1.0]},
)
@example(
    synth=RankingSynthesizer(top_k=1),  # |q|² overflowed: a RuntimeWarning, zero scores
    results=[AdapterResult("s", [{"embedding": [1.0]}, {"t": "disk"}])],
    context={"embedding": [1.3407807929942597e154]},
)
@example(
    synth=RankingSynthesizer(top_k=1), results=[AdapterResult("s", [{}, {}])], context=None
)  # passthrough is never trimmed
def test_rank_never_raises_keeps_rows_and_is_deterministic(
    synth: RankingSynthesizer, results: list[AdapterResult], context: Any
) -> None:
    before = [
        [snapshot(r) for r in res.rows] if isinstance(res.rows, list) else res.rows
        for res in results
    ]
    with capture_logs() as logs:
        found = synth.merge_ranked(results, context)
    merged, ranking = found.data, found.ranking
    passthrough = any(e.get("action") == "passthrough" for e in logs)
    again = synth.merge_ranked(results, context)
    assert fingerprint(merged, ranking) == fingerprint(again.data, again.ranking)
    after = [
        [snapshot(r) for r in res.rows] if isinstance(res.rows, list) else res.rows
        for res in results
    ]
    assert before == after  # rows never mutated
    assert [r.rank for r in ranking] == list(range(1, len(ranking) + 1))
    assert all(math.isfinite(r.score) for r in ranking)
    eligible = sum(len(rankable(r)) for r in results)
    if passthrough:  # no query vector: exactly BasicSynthesizer, no trim (docs/design.md)
        assert fingerprint(merged, []) == fingerprint(BasicSynthesizer().merge(results), [])
        assert len(ranking) == eligible
    elif synth.top_k is not None:
        assert len(ranking) <= synth.top_k
    if synth.top_k is None and synth.max_candidates is None and synth.dedup_key is None:
        # no trim: every rankable row once, as itself or as a copy its document's row
        # names in also_from (copies collapse by identical text without a dedup_key)
        assert len(ranking) + sum(len(r.also_from) for r in ranking) == eligible
    else:
        assert len(ranking) <= eligible
    successful = {r.source_id for r in results if r.error is None}
    assert set(merged) == successful
    ranked_ids = {id(r.row) for r in ranking}
    assert len(ranked_ids) == len(ranking)


@FUZZ
@given(
    source_rows=st.lists(
        st.one_of(st.lists(rows(), max_size=6), st.sampled_from(["x", 3, ()])),
        min_size=1,
        max_size=3,
    ),
    query=text,
    ranking=st.booleans(),
)
def test_broker_answers_every_source_and_hashes_what_it_returns(
    source_rows: list[Any], query: str, ranking: bool
) -> None:
    sources = [FakeSource(f"s{i}", rs) for i, rs in enumerate(source_rows)]
    broker = Broker(sources, RankingSynthesizer(top_k=5, idf=True) if ranking else None)
    response = broker.request(query)
    errored = {e.source_id for e in response.sources_errored}
    assert errored == {f"s{i}" for i, rs in enumerate(source_rows) if not isinstance(rs, list)}
    warned = {w.source_id: w for w in response.sources_warned}
    for i, rs in enumerate(source_rows):
        if not isinstance(rs, list):
            continue
        good = [
            r
            for r in rs
            if snapshot(r).__class__ is str and isinstance(r, dict) and mapping_problem(r) is None
        ]
        dropped = len(rs) - len(good)
        assert (warned[f"s{i}"].count if f"s{i}" in warned else 0) == dropped
        if not ranking:
            assert response.data[f"s{i}"] == good
    assert response.response_hash == compute_response_hash(response.data)
    json.dumps(response.to_dict(), default=json_default)  # the whole response can be printed


# --- the hash is the same in another process ------------------------------------------------

hash_data = st.dictionaries(
    st.sampled_from(SOURCE_IDS),
    st.lists(st.dictionaries(st.text(max_size=5), values, max_size=4), max_size=3),
    max_size=3,
)

_HASH_CHILD = """
import pickle, sys
from nautilus_ranking.response_hash import NoCanonicalFormError, compute_response_hash
out = []
for data in pickle.load(open(sys.argv[1], "rb")):
    try:
        out.append(compute_response_hash(data))
    except NoCanonicalFormError:
        out.append(None)
print("\\n".join(map(str, out)))
"""


def test_the_hash_of_fuzzed_data_is_the_same_in_another_process(tmp_path: Path) -> None:
    collected: list[Any] = []

    @FUZZ
    @given(data=hash_data)
    def collect(data: Any) -> None:
        collected.append(data)

    collect()
    mine = []
    for data in collected:
        try:
            mine.append(compute_response_hash(data))
        except NoCanonicalFormError:
            mine.append(None)
    dump = tmp_path / "data.pickle"
    dump.write_bytes(pickle.dumps(collected))
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    done = subprocess.run(
        [sys.executable, "-c", _HASH_CHILD, str(dump)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    assert done.stdout.split("\n")[: len(mine)] == [str(h) for h in mine]
    assert any(h is not None for h in mine)


# --- settings and sources-file values --------------------------------------------------------


@FUZZ_FEWER
@given(
    top_k=st.none() | st.integers(1, 50),
    idf=st.booleans(),
    boosts=st.text(alphabet="graphtickets:,highlowmedium ", max_size=30),
    cap=st.none() | st.integers(1, 50),
    results=results(),
    query=text,
)
@example(
    top_k=1,
    idf=False,
    boosts="",
    cap=None,
    query="",  # blank query: passthrough
    results=[AdapterResult("tickets", [{}, {}])],
)
def test_settings_from_any_values_rank_without_raising(
    top_k: int | None,
    idf: bool,
    boosts: str,
    cap: int | None,
    results: list[AdapterResult],
    query: str,
) -> None:
    settings_ = NautilusSettings(
        ranking_top_k=top_k, ranking_idf=idf, source_boosts=boosts, ranking_max_candidates=cap
    )
    with capture_logs() as logs:
        ranking = (
            RankingSynthesizer.from_settings(settings_)
            .merge_ranked(results, {"query": query})
            .ranking
        )
    passthrough = any(e.get("action") == "passthrough" for e in logs)  # a blank query
    assert top_k is None or passthrough or len(ranking) <= top_k
    assert [r.rank for r in ranking] == list(range(1, len(ranking) + 1))


source_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 10**6),
    floats,
    st.text(max_size=12),
    st.lists(st.text(max_size=5), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@FUZZ
@given(
    kind=st.sampled_from(
        ["sqlite_table", "sqlite_fts", "sqlite_graph", "sqlite_vector", "nope", 3]
    ),
    field=st.sampled_from(
        [
            "timeout_s",
            "table",
            "search_columns",
            "columns",
            "dim",
            "path",
            "seed",
            "limit",
            "id",
            "text_fields",
            "entities",
        ]
    ),
    value=source_values,
)
@example(kind="sqlite_table", field="table", value=None)  # was an AttributeError
def test_sources_file_values_are_a_clear_error_or_a_broker(
    kind: Any, field: str, value: Any, tmp_path_factory: Any
) -> None:
    root = tmp_path_factory.mktemp("cfg")
    spec: dict[str, Any] = {
        "id": "s",
        "type": kind,
        "path": "s.db",
        "seed": "s.jsonl",
        "table": "t",
        "search_columns": ["title"],
        "columns": ["title"],
        "entities": "e.jsonl",
        "edges": "d.jsonl",
        "text_fields": ["title"],
    }
    document: dict[str, Any] = {"sources": [spec]}
    if field == "limit":
        document["limit"] = value
    else:
        spec[field] = value
    config = root / "nautilus.yaml"
    config.write_text(yaml.safe_dump(document))
    try:
        sources, limit = build_sources(config, root / "data", "hashing", 0)
    except SourceConfigError as exc:
        assert str(exc)
        return
    assert [s.id for s in sources] == [spec["id"]] and limit >= 1


# --- hostile input: request bodies, answers, DSNs, seed lines, query words ----------------


def nested(depth: int, inner: str = "1") -> str:
    return "[" * depth + inner + "]" * depth


json_fragments = st.one_of(
    st.binary(max_size=120),
    st.builds(lambda d: nested(d).encode(), st.integers(0, 3000)),  # past the recursion limit
    st.builds(
        lambda n: ('{"query": "x", "top_k": 1' + "0" * n + "}").encode(), st.integers(0, 6000)
    ),  # past Python's 4300-digit limit
    st.builds(
        lambda c, f: f'{{"query": "x", "{f}": {c}}}'.encode(),
        st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "-0", "true", "null"]),
        st.sampled_from(["top_k", "idf", "explain", "boosts", "sources"]),
    ),
    st.builds(
        lambda d, f: f'{{"query": "x", "{f}": {nested(d)}}}'.encode(),
        st.integers(0, 1200),
        st.sampled_from(["boosts", "sources", "query", "top_k"]),
    ),
    st.builds(lambda t: json.dumps({"query": t}).encode(), text),
)


@FUZZ
@given(body=json_fragments)
@example(body=nested(5000).encode())  # was a 500 (RecursionError)
@example(body=b'{"query": "x", "top_k": 1' + b"0" * 5000 + b"}")  # was a 500 (digit limit)
@example(body=b'{"query": "x", "top_k": NaN}')  # NaN was accepted as a number
def test_any_request_body_is_a_request_or_a_422(body: bytes) -> None:
    from nautilus_ranking.request.errors import ProblemError
    from nautilus_ranking.request.model import parse_request
    from nautilus_ranking.service.limits import parse_json_body

    try:
        parse_request(parse_json_body(body))
    except ProblemError as exc:
        assert exc.status == 422 and exc.extra["field"], exc


answer_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=30,
)


@FUZZ
@given(value=answer_values)
@example(value={"peak": math.inf, "rows": [math.nan, -math.inf, 1.5]})
def test_every_answer_body_is_strict_json(value: Any) -> None:
    from nautilus_ranking.service.problems import strict_json

    def refuse(name: str) -> Any:
        raise AssertionError(f"bare {name}")

    def finite(v: Any) -> Any:
        if isinstance(v, float):
            return v if math.isfinite(v) else None
        if isinstance(v, dict):
            return {k: finite(x) for k, x in v.items()}
        if isinstance(v, list):
            return [finite(x) for x in v]
        return v

    assert json.loads(strict_json(value), parse_constant=refuse) == finite(value)


def bare(password: str) -> str:
    """libpq's unquoted value: a backslash escapes the next character."""
    return "".join("\\" + c if c in " '\\\t\n" else c for c in password)


def quoted(password: str) -> str:
    return "'" + password.replace("\\", "\\\\").replace("'", "\\'") + "'"


@FUZZ
@given(
    password=st.text(alphabet="aZ9 '\\=\t@:/", min_size=1, max_size=24),
    form=st.sampled_from([bare, quoted]),
)
@example(password="Hunter TWO", form=bare)  # was masked only up to the backslash
@example(password="://", form=bare)  # was taken for a URL, and not masked at all
def test_mask_dsn_hides_any_keyword_password(password: str, form: Any) -> None:
    from psycopg.conninfo import conninfo_to_dict

    from nautilus_ranking.sources.postgres.dsn import mask_dsn

    dsn = f"host=db password={form(password)} dbname=kb"
    assert conninfo_to_dict(dsn)["password"] == password  # the DSN says what libpq reads
    assert conninfo_to_dict(mask_dsn(dsn)) == {"host": "db", "password": "***", "dbname": "kb"}


@FUZZ
@given(password=st.text(min_size=1, max_size=24), in_query=st.booleans())
def test_mask_dsn_hides_any_url_password(password: str, in_query: bool) -> None:
    from urllib.parse import quote

    from psycopg.conninfo import conninfo_to_dict

    from nautilus_ranking.sources.postgres.dsn import mask_dsn

    secret = quote(password.encode("utf-8", "surrogatepass"), safe="")
    dsn = (
        f"postgresql://app@db/kb?password={secret}&sslmode=require"
        if in_query
        else f"postgresql://app:{secret}@db/kb?sslmode=require"
    )
    assert conninfo_to_dict(mask_dsn(dsn)) == {
        "user": "app",
        "password": "***",
        "host": "db",
        "dbname": "kb",
        "sslmode": "require",
    }


seed_lines = st.one_of(
    st.binary(max_size=80),
    st.builds(lambda d: ('{"id": "a", "v": ' + nested(d) + "}").encode(), st.integers(0, 3000)),
    st.builds(lambda n: ('{"id": "a", "v": 1' + "0" * n + "}").encode(), st.integers(0, 6000)),
    st.sampled_from(
        [
            b'{"id": "a", "v": NaN}',
            b'{"id": "a", "v": -Infinity}',
            b"[1]",
            b"7",
            b'"text"',
            b"\xff\xfe",
            b"{}",
        ]
    ),
)


@FUZZ
@given(lines=st.lists(seed_lines, max_size=4))
@example(lines=[b'{"id": "a", "v": 1' + b"0" * 5000 + b"}"])  # was a bare ValueError
def test_any_seed_line_is_a_row_or_a_seed_error(lines: list[bytes], tmp_path_factory: Any) -> None:
    from nautilus_ranking.sources.seeds import SeedError, read_jsonl

    seed = tmp_path_factory.mktemp("seed") / "rows.jsonl"
    seed.write_bytes(b"\n".join(line.replace(b"\n", b" ") for line in lines))
    try:
        rows = list(read_jsonl(seed))
    except SeedError as exc:
        assert str(seed) in str(exc)
        return
    assert all(isinstance(row, dict) for row in rows)


@FUZZ
@given(words=st.lists(text, max_size=300), repeat=st.integers(1, 400))
@example(words=["disk"], repeat=120_000)  # a 120,000-word query timed out
def test_any_query_costs_at_most_32_terms(words: list[str], repeat: int) -> None:
    import sqlite3

    from nautilus_ranking.sources.postgres.fts import MAX_TERMS, PostgresFtsSource
    from nautilus_ranking.sources.sqlite.fts import fts_match_expression

    query = " ".join(words + [f"w{i}" for i in range(repeat)])
    expression = fts_match_expression(query)
    assert expression.count(" OR ") < 32
    with sqlite3.connect(":memory:") as connection:  # FTS5 accepts every expression
        connection.execute("CREATE VIRTUAL TABLE docs USING fts5(title)")
        if expression:
            connection.execute("SELECT * FROM docs WHERE docs MATCH ?", (expression,))
    source = PostgresFtsSource("web", "postgresql://localhost/kb", "docs", ["title"], match="all")
    planned = source.statement(query, 10)
    if planned is not None:
        text_term = planned[1][1]
        assert "\x00" not in text_term and len(text_term.split()) <= MAX_TERMS
        text_term.encode("utf-8")  # no lone surrogate: the driver can send it
