"""The engine's score is the row's ``engine_score`` (``distance`` when it runs ascending),
never ``score``, which is the ranking's own. An integer past 2**53 (Typesense's
``text_match``) reaches every client exactly, as its digits in a string; the row checks
and the score-order detection take it as the number it is; ``--explain`` shows it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from cli_process import run_nautilus
from http_support import DOCS, built, es_entry, search, write_sources
from plain_environment import plain_environment

from nautilus_ranking import Broker
from nautilus_ranking.sources.http.mapping import ResponseMapping
from nautilus_ranking.synthesis.detection import key_ordered, score_ordered
from tools.hostile_http import hostile_server
from tools.json_engine import json_engine

SAFE = 2**53  # the largest integer a JavaScript number holds exactly
TEXT_MATCH = 2314894167592927354  # a Typesense text_match, as the attack pass saw it


@pytest.mark.parametrize(
    ("score", "carried"),
    [
        (2.5, 2.5),
        (3, 3),
        (SAFE, SAFE),
        (-SAFE, -SAFE),
        (SAFE + 1, str(SAFE + 1)),
        (-SAFE - 1, str(-SAFE - 1)),
        (TEXT_MATCH, "2314894167592927354"),
        (10**400, "1" + "0" * 400),
    ],
)
def test_the_engines_score_is_engine_score_and_exact(score: object, carried: object) -> None:
    mapping = ResponseMapping(id="document.id", hits="hits", score="text_match")
    [row] = mapping.page({"hits": [{"document": {"id": "a"}, "text_match": score}]}).rows
    assert row == {"id": "a", "engine_score": carried}
    assert json.loads(json.dumps(row), parse_int=float) == row  # as a JavaScript client reads it


def test_an_ascending_score_is_a_distance() -> None:
    mapping = ResponseMapping(id="i", hits="h", score="d", score_key="distance")
    assert mapping.page({"h": [{"i": "a", "d": 0.25}]}).rows == [{"id": "a", "distance": 0.25}]


def test_score_is_a_field_name_no_mapping_takes() -> None:
    from nautilus_ranking.sources.http.mapping import MappingError

    for name in ("score", "engine_score", "distance"):
        with pytest.raises(MappingError, match="is a row key the mapping writes"):
            ResponseMapping(id="i", hits="h", fields={name: "x"})


def test_a_huge_score_reaches_the_response_exactly(tmp_path: Path) -> None:
    entry = {
        "id": "bad",
        "type": "http",
        "url": "",
        "body": {"q": "{{query}}", "size": "{{size}}"},
        "response": {"hits": "hits.hits", "id": "_id", "score": "_score"},
    }
    with hostile_server() as hostile:
        entry["url"] = f"{hostile.url}/body/huge-score"
        broker = Broker.from_config(write_sources(tmp_path, entry))
        try:
            response = broker.request("disk")
        finally:
            broker.close()
    assert response.sources_errored == []
    rows = {r["id"]: r for r in response.data["bad"]}
    assert rows["big"]["engine_score"] == "1" + "0" * 400
    assert rows["a"]["engine_score"] == 2.0
    text = json.dumps(response.to_dict())
    assert '"engine_score": "1' + "0" * 400 + '"' in text


def _rows(scores: list[object]) -> list[dict[str, object]]:
    ids = [f"d{j}" for j in (3, 0, 7, 1, 9, 2, 8, 4, 6, 5)]  # in no order of their own
    return [{"id": ident, "engine_score": s} for ident, s in zip(ids, scores, strict=True)]


def test_score_order_detection_takes_an_engine_score_of_any_size() -> None:
    falling = [str(TEXT_MATCH - i * 1_000_003) for i in range(10)]
    assert score_ordered(_rows(falling))
    assert score_ordered(_rows([TEXT_MATCH >> i for i in range(10)]))  # ints past 2**53
    assert score_ordered(_rows([10.0 - i for i in range(10)]))
    assert not score_ordered(_rows([falling[i] for i in (0, 2, 1, 3, 4, 5, 6, 7, 8, 9)]))
    # a falling score is relevance, not a table's key order
    assert not key_ordered(_rows(falling))
    assert not key_ordered(_rows([TEXT_MATCH >> i for i in range(10)]))


def test_explain_shows_the_engines_score(tmp_path: Path) -> None:
    with json_engine(DOCS) as engine:
        write_sources(tmp_path, es_entry(engine.url))
        env = plain_environment()
        env["NAUTILUS_DATA_DIR"] = str(tmp_path / "data")
        out = run_nautilus(
            "query",
            "orders-db disk",
            "--explain",
            "--top-k",
            "3",
            env={**env, "NAUTILUS_CONFIG": str(tmp_path / "nautilus.yaml")},
            cwd=tmp_path,
        )
    assert out.returncode == 0, out.stderr
    head, first = out.stdout.splitlines()[2:4]
    assert " engine " in head
    assert re.search(r" 3  d00 orders-db disk full", first), first  # its _score: 3 words
    table = out.stdout.split("\nresponse_hash:")[0].splitlines()
    assert max(len(line) for line in table) <= 120  # the table still fits


def test_rows_of_a_preset_carry_engine_score(tmp_path: Path) -> None:
    with json_engine(DOCS) as engine, built(tmp_path, es_entry(engine.url)) as [source]:
        rows = search(source, "orders-db disk", 3)
    assert rows[0]["engine_score"] == 3.0 and "score" not in rows[0]
