"""The sources file: a typed schema, validated when the broker is built.

Each test reproduces one reported break with a real file on disk and checks the
error names the file, the source and the option."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from cli_process import run_nautilus
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from nautilus_ranking import Broker
from nautilus_ranking.sources.factory import (
    SOURCE_TYPES,
    SourceConfigError,
    build_sources,
    sources_json_schema,
)
from nautilus_ranking.sources.schema import BuildContext, SourceSpec

FAQS = [
    {"id": "f1", "question": "How do I reset my password?", "answer": "Use the reset link."},
    {"id": "f2", "question": "Where is my disk quota?", "answer": "Settings, then storage."},
]


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def config(tmp_path: Path, text: str, faqs: list[dict[str, Any]] | None = None) -> Path:
    write_jsonl(tmp_path / "faqs.jsonl", FAQS if faqs is None else faqs)
    path = tmp_path / "shop.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def broken(tmp_path: Path, text: str, message: str) -> str:
    with pytest.raises(SourceConfigError) as info:
        Broker.from_config(config(tmp_path, text))
    assert message in str(info.value)
    return str(info.value)


FTS = "{id: faqs, type: sqlite_fts, path: faqs.db, seed: faqs.jsonl, columns: %s}"
TABLE = (
    "{id: faqs, type: sqlite_table, path: faqs.db, seed: faqs.jsonl, table: faqs, "
    "search_columns: %s}"
)
VECTOR = "{id: faqs, type: sqlite_vector, path: faqs.db, seed: faqs.jsonl, text_fields: %s}"


# --- item 3: typos pass silently --------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (FTS % "[questoin, answer]", "has no field 'questoin' — did you mean 'question'?"),
        (TABLE % "[questoin]", "has no field 'questoin' — did you mean 'question'?"),
        (VECTOR % "[questoin]", "has no field 'questoin' — did you mean 'question'?"),
        (
            FTS.replace("}", ", timout_s: 0.5}") % "[question]",
            "unknown option 'timout_s' — did you mean 'timeout_s'?",
        ),
        (
            VECTOR.replace("}", ", dimm: 64}") % "[question]",
            "unknown option 'dimm' — did you mean 'dim'?",
        ),
        (
            FTS.replace("columns", "search_columns") % "[question]",
            "unknown option 'search_columns'",
        ),
    ],
)
def test_typos_in_the_sources_file_are_errors_with_a_suggestion(
    tmp_path: Path, entry: str, message: str
) -> None:
    text = broken(tmp_path, f"sources:\n  - {entry}\n", message)
    assert "shop.yaml" in text and "faqs" in text


def test_an_unknown_top_level_key_is_an_error_with_a_suggestion(tmp_path: Path) -> None:
    broken(tmp_path, "limt: 5\nsources: []\n", "unknown option 'limt' — did you mean 'limit'?")


# --- item 11: a missing type ------------------------------------------------------------


def test_a_missing_type_is_reported_as_missing(tmp_path: Path) -> None:
    text = broken(
        tmp_path,
        "sources:\n  - {id: faqs, path: a.db, seed: faqs.jsonl}\n",
        "sources[0] (faqs): missing 'type' (valid: ",
    )
    assert "None" not in text


def test_an_unknown_type_suggests_the_closest(tmp_path: Path) -> None:
    broken(
        tmp_path,
        "sources:\n  - {id: faqs, type: sqlite_tabel}\n",
        "unknown type 'sqlite_tabel' — did you mean 'sqlite_table'?",
    )


# --- item 4 and 10: seeds are checked at start-up ---------------------------------------


@pytest.mark.parametrize("entry", [FTS % "[question]", TABLE % "[question]", VECTOR % "[question]"])
def test_an_empty_seed_is_reported(tmp_path: Path, entry: str) -> None:
    broken_text = f"sources:\n  - {entry}\n"
    with pytest.raises(SourceConfigError, match=r"faqs.jsonl has no rows"):
        Broker.from_config(config(tmp_path, broken_text, faqs=[]))


def test_a_csv_seed_is_a_clear_start_up_error(tmp_path: Path) -> None:
    (tmp_path / "faqs.csv").write_text("id,question\nf1,reset\n", encoding="utf-8")
    broken(
        tmp_path,
        "sources:\n  - {id: faqs, type: sqlite_fts, path: f.db, seed: faqs.csv, "
        "columns: [question]}\n",
        "seeds are JSON lines (one JSON object a line), not CSV",
    )


def test_a_missing_seed_is_a_start_up_error(tmp_path: Path) -> None:
    broken(
        tmp_path,
        "sources:\n  - {id: faqs, type: sqlite_fts, path: f.db, seed: nope.jsonl, "
        "columns: [question]}\n",
        "nope.jsonl not found",
    )


def test_a_seed_that_is_not_json_names_the_line(tmp_path: Path) -> None:
    (tmp_path / "bad.jsonl").write_text('{"id": 1, "q": "a"}\nid,q\n', encoding="utf-8")
    broken(
        tmp_path,
        "sources:\n  - {id: faqs, type: sqlite_fts, path: f.db, seed: bad.jsonl, columns: [q]}\n",
        "bad.jsonl:2: not valid JSON",
    )


def test_graph_edges_need_their_fields(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "e.jsonl", [{"id": "a"}])
    write_jsonl(tmp_path / "g.jsonl", [{"src": "a", "dst": "b"}])
    broken(
        tmp_path,
        "sources:\n  - {id: g, type: sqlite_graph, path: g.db, entities: e.jsonl, "
        "edges: g.jsonl}\n",
        "row 1 has no 'relation'",
    )


# --- item 14: search_columns ------------------------------------------------------------


def test_a_misspelt_search_column_is_rejected_not_matched_as_a_string(tmp_path: Path) -> None:
    broken(tmp_path, f"sources:\n  - {TABLE % '[disk_title]'}\n", "has no field 'disk_title'")


def test_empty_search_columns_are_rejected(tmp_path: Path) -> None:
    broken(
        tmp_path,
        f"sources:\n  - {TABLE % '[]'}\n",
        "search_columns: List should have at least 1 item",
    )


# --- item 16: values that validated but broke later -------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            f"sources:\n  - {FTS.replace('}', ', timeout_s: .nan}') % '[question]'}\n",
            "timeout_s: Input should be a finite number, got nan",
        ),
        (
            f"sources:\n  - {FTS.replace('}', ', timeout_s: .inf}') % '[question]'}\n",
            "timeout_s: Input should be a finite number, got inf",
        ),
        ("limit: 9223372036854775808\nsources: []\n", "limit: Input should be less than or equal"),
        (
            "sources:\n  - {id: faqs, type: sqlite_table, path: f.db, seed: faqs.jsonl, table: 5, "
            "search_columns: [question]}\n",
            "table: Input should be a valid string, got 5",
        ),
        ("sources: " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
        (
            "sources: [{id: faqs, type: sqlite_fts, path: f.db, seed: faqs.jsonl, columns: [q]}]"
            "\n# \udcff\n",
            "not valid UTF-8",
        ),
    ],
)
def test_bad_values_are_clear_validation_errors(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "shop.yaml"
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    write_jsonl(tmp_path / "faqs.jsonl", FAQS)
    with pytest.raises(SourceConfigError) as info:
        Broker.from_config(path)
    assert message in str(info.value)
    assert "unexpected" not in str(info.value)


def test_a_variable_default_in_a_number_field_validates_as_a_number(tmp_path: Path) -> None:
    path = config(
        tmp_path,
        "limit: ${LIM:-3}\nsources:\n  - "
        + FTS.replace("}", ", timeout_s: '${T:-2.5}'}") % "[question]"
        + "\n",
    )
    broker = Broker.from_config(path)
    assert broker.limit == 3 and broker.sources[0].timeout_s == 2.5


# --- item 12: paths may not leave the data dir ------------------------------------------


@pytest.mark.parametrize(
    "db_path",
    ["../../victim.txt", "../outside.db", "/tmp/elsewhere.db", "${ESCAPE}/victim.txt", "."],
)
def test_paths_may_not_leave_the_data_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, db_path: str
) -> None:
    monkeypatch.setenv("ESCAPE", "..")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n", encoding="utf-8")
    text = (
        f"sources:\n  - {{id: v, type: sqlite_vector, path: '{db_path}', "
        "seed: faqs.jsonl, text_fields: [question]}\n"
    )
    broken(tmp_path, text, "is outside NAUTILUS_DATA_DIR")
    assert victim.read_text(encoding="utf-8") == "precious\n"


def test_an_existing_file_nautilus_did_not_build_is_never_overwritten(tmp_path: Path) -> None:
    data = Path(os.environ["NAUTILUS_DATA_DIR"])
    data.mkdir(parents=True)
    (data / "faqs.db").write_text("not a database\n", encoding="utf-8")
    broker = Broker.from_config(config(tmp_path, f"sources:\n  - {FTS % '[question]'}\n"))
    [error] = broker.request("password").sources_errored
    assert error.error_type == "ForeignFileError" and "refusing to replace" in error.message
    assert (data / "faqs.db").read_text(encoding="utf-8") == "not a database\n"


def test_an_empty_data_dir_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from nautilus_ranking import NautilusSettings

    monkeypatch.setenv("NAUTILUS_DATA_DIR", "")
    settings = NautilusSettings()
    assert [p.variable for p in settings.problems] == ["NAUTILUS_DATA_DIR"]
    assert settings.data_dir == Path("~/.cache/nautilus")  # the default, never the cwd


# --- item 13: YAML alias bombs ----------------------------------------------------------


def test_a_billion_laughs_document_is_refused_quickly(tmp_path: Path) -> None:
    """9 levels of 9 aliases: 387 million strings if expanded (the report: 60 s, 2.4 GB)."""
    levels = ["&l0 [" + ", ".join(["lol"] * 9) + "]"]
    levels += [f"&l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, 10)]
    path = tmp_path / "bomb.yaml"
    path.write_text("sources: [" + ", ".join(levels) + "]\n", encoding="utf-8")
    assert path.stat().st_size < 700
    with pytest.raises(SourceConfigError, match="more than 100000 values once YAML aliases"):
        Broker.from_config(path)


def _variable_bomb(path: Path, default_chars: int = 12 * 1024, levels: int = 8) -> Path:
    """3**levels aliased copies of one ``${VAR:-default}``: each expands to a fresh copy."""
    lines = [f'a0: &a0 "${{NAUTILUS_TEST_UNSET:-{"x" * default_chars}}}"']
    lines += [f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}]" for i in range(1, levels + 1)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_aliased_variable_defaults_are_bounded_in_characters_not_only_values(
    tmp_path: Path,
) -> None:
    """6,561 values (far under the values' bound) of 12 KB each: 80 MB once expanded
    (a 100 KB file of these took 2.1 GB in ``config --strict``)."""
    import tracemalloc

    from nautilus_ranking.sources.yaml_file import expand_variables, read_yaml

    path = _variable_bomb(tmp_path / "bomb.yaml")
    assert path.stat().st_size < 16 * 1024
    document = read_yaml(path)
    tracemalloc.start()
    try:
        with pytest.raises(SourceConfigError, match="characters once YAML aliases and"):
            expand_variables(document, str(path))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 24 * 2**20, peak  # the bound (8 Mi characters) plus one value, not 80 MB


def test_config_strict_names_the_profiles_file_of_a_variable_bomb(tmp_path: Path) -> None:
    path = _variable_bomb(tmp_path / "profiles.yaml")
    run = run_nautilus(
        "config",
        "--strict",
        env={"NAUTILUS_PROFILES_FILE": str(path), "NAUTILUS_DATA_DIR": str(tmp_path)},
        cwd=tmp_path,
    )
    assert run.returncode == 1, run.stderr
    assert "NAUTILUS_PROFILES_FILE" in run.stderr and "characters once YAML" in run.stderr
    assert "Traceback" not in run.stderr


# --- the schema -------------------------------------------------------------------------


def test_every_type_is_in_the_published_schema() -> None:
    schema = sources_json_schema()
    text = json.dumps(schema)
    for name in SOURCE_TYPES:
        assert f'"{name}"' in text
    assert schema["properties"]["limit"]["maximum"] == 10_000


def test_a_new_type_registers_and_builds(tmp_path: Path) -> None:
    from typing import Literal

    from nautilus_ranking.sources.schema import register_source_type

    class Echo:
        def __init__(self, source_id: str) -> None:
            self.id, self.timeout_s = source_id, 1.0

        async def search(self, query: str, context: Any, limit: int) -> list[dict[str, Any]]:
            return [{"id": "e", "text": query}]

        def close(self) -> None:
            pass

    class EchoSpec(SourceSpec):
        type: Literal["echo_test"]

        def build(self, ctx: BuildContext) -> Any:
            return Echo(self.id)

    register_source_type(EchoSpec)
    try:
        path = config(tmp_path, "sources:\n  - {id: e, type: echo_test, ranked: true}\n")
        broker = Broker.from_config(path)
        assert broker.request("hello").data == {"e": [{"id": "e", "text": "hello"}]}
        assert broker.sources[0].ranked is True  # type: ignore[attr-defined]
    finally:
        SOURCE_TYPES.pop("echo_test")


# --- fuzzing: any file is a SourcesFile or a SourceConfigError, never anything else ------

_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=12),
    st.sampled_from(["faqs.jsonl", "../x", "${HOME}", "${NOPE:-7}", "question"]),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
_ENTRY = st.fixed_dictionaries(
    {
        "id": st.one_of(st.just("faqs"), _SCALARS),
        "type": st.one_of(st.sampled_from(sorted(SOURCE_TYPES)), _SCALARS),
    },
    optional={
        "path": st.one_of(st.just("f.db"), _SCALARS),
        "seed": st.one_of(st.just("faqs.jsonl"), _SCALARS),
        "columns": st.one_of(st.just(["question"]), _VALUES),
        "search_columns": st.one_of(st.just(["question"]), _VALUES),
        "text_fields": st.one_of(st.just(["question"]), _VALUES),
        "table": _SCALARS,
        "timeout_s": _SCALARS,
        "dim": _SCALARS,
        "entities": _SCALARS,
        "edges": _SCALARS,
        "ranked": _SCALARS,
    },
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    document=st.one_of(
        _VALUES,
        st.fixed_dictionaries(
            {"sources": st.lists(_ENTRY, max_size=3)}, optional={"limit": _SCALARS}
        ),
    )
)
@example(
    document={
        "sources": [
            {
                "id": "faqs",
                "type": "sqlite_table",
                "path": "f.db",
                "seed": "faqs.jsonl",
                "table": 5,
                "search_columns": ["question"],
            }
        ]
    }
)
@example(document={"limit": float("nan"), "sources": []})
def test_any_document_validates_or_is_a_source_config_error(tmp_path: Path, document: Any) -> None:
    write_jsonl(tmp_path / "faqs.jsonl", FAQS)
    path = tmp_path / "fuzz.yaml"
    path.write_text(json.dumps(document, allow_nan=True), encoding="utf-8")  # JSON is YAML
    try:
        sources, limit = build_sources(path, tmp_path / "data", "hashing")
    except SourceConfigError as exc:
        assert str(exc) and "Traceback" not in str(exc)
        return
    assert 1 <= limit <= 10_000
    for source in sources:
        assert 0 < source.timeout_s <= 3600
        source.close()


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=st.text(max_size=200))
@example(text="sources: [&a [1, 2], *a, *b]")
@example(text="sources:\n  - !!python/name:os.system")
def test_any_text_validates_or_is_a_source_config_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "fuzz.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        sources, limit = build_sources(path, tmp_path / "data", "hashing")
    except SourceConfigError as exc:
        assert str(exc).startswith(str(path)) or "cannot read" in str(exc)
        return
    assert sources == [] and 1 <= limit <= 10_000  # no seed exists: only an empty list builds
