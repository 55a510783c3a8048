"""``nautilus-ranking load`` keeps every seed id as the seed writes it, against the real
embedded PostgreSQL: numbers by value, strings by their text, and a string is never the
same id as a number (``"01"``, ``"1"`` and ``1`` are three ids). A new table's id column
holds every seed id distinctly; an existing one that cannot is refused, naming the ids;
and a report never shows fewer rows in the table than distinct seed ids without saying
why."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cli_process import run_nautilus
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from plain_environment import plain_environment
from postgres_fixtures import execute

from nautilus_ranking.sources.factory import load_sources
from nautilus_ranking.sources.postgres.columns import id_key
from nautilus_ranking.sources.postgres.load import (
    LoadError,
    load_postgres,
    postgres_specs,
)

BIG = 2**53  # the first integer past which a double cannot tell n from n + 1

IDS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.integers(min_value=BIG - 2, max_value=BIG + 2),
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(min_value=-3, max_value=3).map(float),  # integral floats: 1.0
    st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=6),
    st.sampled_from(["01", "1", "1.0", "true"]),
    st.booleans(),
)


def sources(folder: Path, dsn: str, table: str) -> Path:
    path = folder / "sources.yaml"
    path.write_text(
        f"sources:\n  - {{id: kb, type: postgres_table, dsn: {json.dumps(dsn)}, "
        f"table: {table}, columns: [title], seed: kb.jsonl}}\n",
        encoding="utf-8",
    )
    return path


def write_seed(folder: Path, ids: list[Any], tag: str = "row") -> None:
    with (folder / "kb.jsonl").open("w", encoding="utf-8") as handle:
        for i, ident in enumerate(ids):
            handle.write(json.dumps({"id": ident, "title": f"{tag} {i}"}) + "\n")


def load(folder: Path, dsn: str, table: str, **options: Any) -> Any:
    specs = postgres_specs(load_sources(sources(folder, dsn, table)).specs)
    return load_postgres(specs, folder, "hashing", **options)[0]


def test_ids_compare_as_the_seed_writes_them() -> None:
    assert len({id_key(i) for i in ["01", "1", 1, 1.0, True, "true", 2.5, "2.5"]}) == 7
    assert id_key(BIG + 1) != id_key(float(BIG)) and id_key(1) == id_key(1.0)


def stored(dsn: str, table: str) -> dict[Any, str]:
    """``{id key: title}`` of every row of the table, ids as psycopg reads them."""
    return {id_key(i): t for i, t in execute(dsn, f"SELECT id, title FROM {table}")}


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ids=st.lists(IDS, min_size=1, max_size=8))
@example(ids=[BIG, BIG + 1, 0.5])  # shared one double precision value
@example(ids=["01", "1", 1])
@example(ids=[1, 1.0, True, "1"])
def test_a_new_table_holds_every_seed_id_distinctly(
    pg_dsn: str, tmp_path_factory: Any, ids: list[Any]
) -> None:
    folder = tmp_path_factory.mktemp("ids")
    write_seed(folder, ids)
    report = load(folder, pg_dsn, "ids_property", replace=True)
    last = {id_key(i): f"row {n}" for n, i in enumerate(ids)}  # a later row updates
    assert report.loaded == len(ids) and report.distinct_ids == len(last)
    assert report.in_table == len(last), (ids, stored(pg_dsn, "ids_property"))
    assert stored(pg_dsn, "ids_property") == last, ids
    again = load(folder, pg_dsn, "ids_property", prune=True)
    assert (again.pruned, again.in_table) == (0, len(last))


def test_ids_past_2_53_beside_a_float_keep_their_values(pg_dsn: str, tmp_path: Path) -> None:
    write_seed(tmp_path, [BIG, BIG + 1, 0.5])
    report = load(tmp_path, pg_dsn, "ids_big", replace=True)
    assert (report.loaded, report.in_table) == (3, 3)  # before: 2 in the table
    values = sorted((i for (i,) in execute(pg_dsn, "SELECT id FROM ids_big")), key=float)
    assert values == [0.5, BIG, BIG + 1] and all(type(v) is not str for v in values)


def test_a_bigint_table_given_a_fraction_is_refused_naming_it(pg_dsn: str, tmp_path: Path) -> None:
    write_seed(tmp_path, [1, 2, 3], tag="first")
    load(tmp_path, pg_dsn, "ids_bigint", replace=True)
    write_seed(tmp_path, [1, 2, 2.5, 3], tag="second")
    with pytest.raises(LoadError) as refused:  # before: row 2 overwritten by 2.5
        load(tmp_path, pg_dsn, "ids_bigint")
    message = str(refused.value)
    assert "'id' column is bigint" in message and "2.5" in message and "--replace" in message
    assert stored(pg_dsn, "ids_bigint") == {1: "first 0", 2: "first 1", 3: "first 2"}


def test_a_text_table_given_numbers_is_refused_and_prune_keeps_its_rows(
    pg_dsn: str, tmp_path: Path
) -> None:
    write_seed(tmp_path, ["01", "02"], tag="first")
    load(tmp_path, pg_dsn, "ids_text", replace=True)
    write_seed(tmp_path, ["01", 1, "02"], tag="second")
    with pytest.raises(LoadError) as refused:  # before: '"01"' stored, then 01 pruned
        load(tmp_path, pg_dsn, "ids_text", prune=True)
    assert "'id' column is text" in str(refused.value) and "1 (a number)" in str(refused.value)
    assert stored(pg_dsn, "ids_text") == {("text", "01"): "first 0", ("text", "02"): "first 1"}
    run = run_nautilus("load", "--prune", "--config", str(tmp_path / "sources.yaml"))
    assert run.returncode == 1 and "1 (a number)" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr
    assert stored(pg_dsn, "ids_text") == {("text", "01"): "first 0", ("text", "02"): "first 1"}


def test_the_report_says_why_the_table_has_fewer_rows(pg_dsn: str, tmp_path: Path) -> None:
    """Repeated ids are one row; ids the table's own column holds as one (a uuid column
    reads upper and lower case alike) are said, and the load exits 1."""
    env = plain_environment()
    config = str(sources(tmp_path, pg_dsn, "ids_report"))

    def cli() -> subprocess.CompletedProcess[str]:
        return run_nautilus("load", "--config", config, env=env)

    write_seed(tmp_path, [1, 1.0, "1"])
    execute(pg_dsn, "DROP TABLE IF EXISTS ids_report")
    run = cli()
    assert run.returncode == 0, run.stderr
    assert "3 rows loaded into ids_report (2 distinct ids; 2 in the table)" in run.stdout

    execute(pg_dsn, "DROP TABLE ids_report")
    execute(pg_dsn, "CREATE TABLE ids_report (id uuid PRIMARY KEY, title text)")
    upper = "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11"
    write_seed(tmp_path, [upper, upper.lower()])
    run = cli()
    assert run.returncode == 1, run.stdout + run.stderr
    assert "2 distinct ids" in run.stdout and "1 in the table" in run.stdout
    assert "its 'id' column (uuid) holds 2 of the seed's distinct ids as 1 row" in run.stderr
