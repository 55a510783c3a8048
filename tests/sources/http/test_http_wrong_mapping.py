"""A wrong mapping is loud: ``sources probe`` fails on a mapped ``id``, ``title`` or
``text`` path null in every hit (naming the path and showing what the first hit has),
warns on a ``fields`` path, and hints when nothing matched; ``query`` and the server warn
once (and again when a path that worked breaks, at most every 10 minutes), and a metric
counts every such answer."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
from cli_process import run_nautilus
from http_support import DOCS, write_sources
from plain_environment import plain_environment
from structlog.testing import capture_logs

from nautilus_ranking.records import WarnedRows
from nautilus_ranking.sources.http.mapping import MappedPage
from nautilus_ranking.sources.http.watch import REWARN_S, MappingWatch
from tools.json_engine import json_engine
from tools.servers import running


def mapped(engine_url: str, source_id: str = "kb", **response: Any) -> dict[str, Any]:
    """An ``http`` source over the engine's ``docs`` index with this response mapping."""
    return {
        "id": source_id,
        "type": "http",
        "url": f"{engine_url}/docs/_search",
        "body": {"query": {"multi_match": {"query": "{{query}}"}}, "size": "{{size}}"},
        "response": {"hits": "hits.hits", "id": "_id", "score": "_score", **response},
    }


def cli(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = plain_environment()
    env["NAUTILUS_DATA_DIR"] = str(folder / "data")
    return run_nautilus(*args, "--config", "nautilus.yaml", env=env, cwd=folder)


PROBES = {
    "title": (
        {"title": "_source.name", "text": "_source.body"},
        1,
        "ERROR response.title '_source.name' was null in every hit (5); "
        "_source has keys: body, id, title",
    ),
    "text": (
        {"title": "_source.title", "text": "_source.text"},
        1,
        "ERROR response.text '_source.text' was null in every hit (5); "
        "_source has keys: body, id, title",
    ),
    "id": (
        {"id": "_source.doc_id", "title": "_source.title"},
        1,
        "ERROR response.id '_source.doc_id' was null in every hit (5); "
        "_source has keys: body, id, title",
    ),
    "field": (
        {"title": "_source.title", "fields": {"team": "_source.team"}},
        0,
        "warning: response.fields.team '_source.team' was null in every hit (5); "
        "_source has keys: body, id, title",
    ),
}


@pytest.mark.parametrize("case", list(PROBES))
def test_probe_fails_on_a_path_null_in_every_hit_and_warns_on_a_field(
    tmp_path: Path, case: str
) -> None:
    response, code, said = PROBES[case]
    with json_engine(DOCS) as engine:
        write_sources(tmp_path, mapped(engine.url, **response))
        out = cli(tmp_path, "sources", "probe", "disk")
        as_json = cli(tmp_path, "sources", "probe", "disk", "--json")
    assert out.returncode == code, out.stdout + out.stderr
    assert said in out.stdout, out.stdout
    assert "Traceback" not in out.stderr
    [probe] = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert as_json.returncode == code
    assert probe["unmapped"][0]["path"] in said
    assert probe["unmapped"][0]["first_hit"] == "_source has keys: body, id, title"


def test_probe_with_no_hits_exits_0_with_a_hint(tmp_path: Path) -> None:
    with json_engine(DOCS) as engine:
        write_sources(tmp_path, mapped(engine.url, title="_source.name"))
        out = cli(tmp_path, "sources", "probe", "zebra")
    assert out.returncode == 0
    assert re.search(r"^kb +\d+\.\d ms  \(no hits: nothing to check the mapping on; ", out.stdout)


def test_probe_of_a_right_mapping_shows_its_first_row(tmp_path: Path) -> None:
    with json_engine(DOCS) as engine:
        write_sources(tmp_path, mapped(engine.url, title="_source.title", text="_source.body"))
        out = cli(tmp_path, "sources", "probe", "replica lag")
    assert out.returncode == 0
    assert re.match(r"^kb +\d+\.\d ms  id=d01  score=2  replication lag after", out.stdout)


def _page(unmapped: list[tuple[str, str]], hits: int = 3) -> MappedPage:
    first = {"_id": "a", "_source": {"title": "x", "body": "y"}}
    return MappedPage(rows=[], hits=[first] * hits, unmapped=unmapped)


def test_the_watch_warns_once_then_again_when_a_path_that_worked_breaks() -> None:
    now = [1000.0]
    watch = MappingWatch("kb", clock=lambda: now[0])
    broken = [("response.title", "_source.name")]

    def answer(unmapped: list[tuple[str, str]], hits: int = 3) -> tuple[WarnedRows, int]:
        rows = WarnedRows()
        with capture_logs() as logs:
            watch.check([_page(unmapped, hits)], rows)
        lines = [e for e in logs if e["event"] == "http_source_mapping_null"]
        return rows, len(lines)

    rows, logged = answer(broken)
    assert logged == 1  # the first time
    [warning] = rows.warnings
    assert warning.warning_type == "mapping_null" and warning.count == 3
    assert rows.unmapped == [("response.title", "_source.name", "_source has keys: body, title")]
    assert answer(broken)[1] == 0  # still broken: said already
    assert len(answer(broken)[0].warnings) == 1  # but every answer reports it
    assert answer([])[1] == 0  # it works again
    now[0] += 60
    assert answer(broken)[1] == 0  # broke again within 10 minutes: not again
    assert answer([])[1] == 0
    now[0] += REWARN_S
    assert answer(broken)[1] == 1  # broke again, 10 minutes on: said again
    assert answer([], hits=0)[1] == 0  # no hits: nothing to judge
    assert answer(broken, hits=0)[0].warnings == []


def test_a_path_null_on_one_page_only_is_not_null_in_every_hit() -> None:
    watch = MappingWatch("kb")
    rows = WarnedRows()
    watch.check([_page([("response.title", "t")]), _page([])], rows)
    assert rows.warnings == []


def test_query_warns_about_a_wrong_mapping_on_stderr(tmp_path: Path) -> None:
    with json_engine(DOCS) as engine:
        write_sources(tmp_path, mapped(engine.url, title="_source.name", text="_source.body"))
        out = cli(tmp_path, "query", "disk")
    assert out.returncode == 0
    assert out.stderr.count("http_source_mapping_null") == 1, out.stderr
    assert "_source.name" in out.stderr


def test_the_server_warns_once_and_counts_every_answer(tmp_path: Path) -> None:
    with json_engine(DOCS) as engine:
        config = write_sources(
            tmp_path,
            mapped(engine.url, title="_source.name", text="_source.body"),
        )
        with running(tmp_path, {"NAUTILUS_CONFIG": str(config)}) as server:
            for _ in range(3):
                answer = httpx.post(server.url + "/v1/query", json={"query": "disk"}, timeout=30)
                assert answer.status_code == 200, answer.text
                warned = answer.json()["sources_warned"]
                assert [w["warning_type"] for w in warned] == ["mapping_null"]
            metrics = httpx.get(server.url + "/metrics", timeout=10).text
            logs = server.logs()
    assert 'nautilus_source_warnings_total{source="kb",warning_type="mapping_null"} 3.0' in metrics
    assert logs.count('"http_source_mapping_null"') == 1, logs[-2000:]
