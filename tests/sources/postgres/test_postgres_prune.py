"""``nautilus-ranking load --prune`` removes exactly the rows whose id left the seed, whatever
the ids' JSON types: against the real embedded PostgreSQL, as a property over generated
id sets (ints, integral and other floats, strings, booleans, mixed) and through the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cli_process import run_nautilus
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from plain_environment import plain_environment
from postgres_fixtures import execute

from nautilus_ranking.sources.factory import load_sources
from nautilus_ranking.sources.postgres.load import load_postgres, postgres_specs

IDS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(min_value=-1000, max_value=1000).map(float),  # integral floats: 1.0
    st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=12),
    st.booleans(),
)


def sources(folder: Path, dsn: str, table: str) -> Path:
    path = folder / "sources.yaml"
    path.write_text(
        f"""sources:
  - {{id: kb, type: postgres_table, dsn: "{dsn}", table: {table}, columns: [title],
     seed: kb.jsonl}}
""",
        encoding="utf-8",
    )
    return path


def write_seed(folder: Path, ids: list[Any]) -> None:
    with (folder / "kb.jsonl").open("w", encoding="utf-8") as handle:
        for i, ident in enumerate(ids):
            handle.write(json.dumps({"id": ident, "title": f"row {i}"}) + "\n")


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ids=st.lists(IDS, min_size=1, max_size=8), drop=st.integers(min_value=0))
def test_prune_on_an_unchanged_seed_prunes_nothing(
    pg_dsn: str, tmp_path_factory: Any, ids: list[Any], drop: int
) -> None:
    folder = tmp_path_factory.mktemp("prune")
    path = sources(folder, pg_dsn, "prune_property")
    specs = postgres_specs(load_sources(path).specs)
    write_seed(folder, ids)
    first = load_postgres(specs, folder, "hashing", replace=True, prune=True)[0]
    again = load_postgres(specs, folder, "hashing", prune=True)[0]
    assert again.pruned == 0, ids
    assert again.in_table == first.in_table
    # A row the seed lost (and that no other seed row stored onto) is the one pruned.
    gone = ids[drop % len(ids)]
    kept = [i for i in ids if i is not gone]
    write_seed(folder, kept)
    if kept:
        after = load_postgres(specs, folder, "hashing", prune=True)[0]
        assert after.pruned <= 1 and after.in_table == again.in_table - after.pruned
        assert load_postgres(specs, folder, "hashing", prune=True)[0].pruned == 0


def test_the_cli_prunes_nothing_on_a_mixed_id_seed_it_just_loaded(
    pg_dsn: str, tmp_path: Path
) -> None:
    path = sources(tmp_path, pg_dsn, "prune_mixed")
    write_seed(tmp_path, [1, "A-7", 2.0])
    env = plain_environment()
    for _ in range(2):
        run = run_nautilus("load", "--config", str(path), "--prune", env=env)
        assert run.returncode == 0, run.stderr
        assert "3 rows loaded into prune_mixed (3 in the table, 0 pruned)" in run.stdout, run.stdout
    assert execute(pg_dsn, "SELECT count(*) FROM prune_mixed") == [(3,)]
