"""Every pattern the package matches against a caller's or an operator's text is linear,
and every text field of a request is bounded before anything parses it.

Each input below is a million characters of the shape that made a pattern backtrack
over a run (digits in a cut, an unclosed ``${`` in a sources file, spaces in a DSN): a
quadratic pattern takes hours on it, a linear one milliseconds. No test measures time;
a regression shows as a run that does not end.
"""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from nautilus_ranking.request.errors import ProblemError
from nautilus_ranking.request.model import (
    MAX_CUT_CHARS,
    MAX_LEVEL_CHARS,
    MAX_SOURCE_ID_CHARS,
    MAX_SOURCE_ITEMS,
    parse_request,
)
from nautilus_ranking.request.pages import MAX_CURSOR_CHARS
from nautilus_ranking.selection.cut import parse_cut
from nautilus_ranking.settings.model import NautilusSettings
from nautilus_ranking.sources.postgres.dsn import mask_dsn
from nautilus_ranking.sources.yaml_file import expand_variables

RUN = 1_000_000


@pytest.mark.parametrize(
    "raw",
    [
        "relative:" + "1" * RUN + "x",
        "gap:" + "1" * RUN + ".",
        "floor:." + "5" * RUN + ".5",
        "a" * RUN + ":",
        "relative:" + " " * RUN,
    ],
)
def test_a_long_malformed_cut_is_refused(raw: str) -> None:
    value, problem = parse_cut("NAUTILUS_RANKING_CUT", raw)
    assert value is None and problem is not None
    assert problem.reason == "not a cut setting"


def test_the_cut_still_reads_every_number_it_read() -> None:
    for raw, expected in [
        ("relative:0.8", "relative:0.8"),
        ("gap:.1", "gap:0.1"),
        ("floor : +1", "floor:1"),
        ("relative:" + "0" * 1000 + "1", "relative:1"),
    ]:
        value, problem = parse_cut("C", raw)
        assert problem is None and str(value) == expected
    for raw in ["relative:1.", "relative:.", "relative:1..2", "relative:-0.5", "relative:1e-3"]:
        assert parse_cut("C", raw)[0] is None


def test_a_long_malformed_cut_setting_is_one_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NAUTILUS_RANKING_CUT", "relative:" + "9" * RUN + "x")
    with capture_logs() as logs:
        settings = NautilusSettings()
    assert settings.ranking_cut is None
    skipped = [e for e in logs if e.get("variable") == "NAUTILUS_RANKING_CUT"]
    assert len(skipped) == 1 and len(str(skipped[0])) < 1000


def test_an_unclosed_variable_in_a_sources_file_is_kept_as_written() -> None:
    text = "${A:-" * (RUN // 5)
    assert expand_variables({"dsn": text}) == {"dsn": text}
    text = "${A:" * (RUN // 4) + "}"
    assert expand_variables(text) == text


def test_variables_expand_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SET", "v")
    monkeypatch.delenv("UNSET", raising=False)
    cases = {
        "${SET}": "v",
        "a${SET}b${UNSET:-d}c": "avbdc",
        "${UNSET:-}": "",
        "${UNSET:-x${SET}}": "x${SET}",  # the default runs to the first '}'
        "$${SET}": "$v",
        "${1A}${SET": "${1A}${SET",
        "${UNSET:-a:-b}${SET}": "a:-bv",
        "${SET:x}": "${SET:x}",
    }
    for text, expected in cases.items():
        assert expand_variables(text) == expected, text


def test_a_dsn_with_a_long_run_of_spaces_is_masked() -> None:
    dsn = "password=x" + " " * RUN + "y dbname=d" + " \t" * RUN + "user=u"
    masked = mask_dsn(dsn)
    assert masked.startswith("password=*** dbname=d") and "y" not in masked[:20]
    assert mask_dsn("user=u" + " " * RUN + "password=S") == "user=u" + " " * RUN + "password=***"


@pytest.mark.parametrize(
    ("field", "value", "bound"),
    [
        ("cut", "relative:" + "1" * 16_000 + "x", f"at most {MAX_CUT_CHARS} characters"),
        ("cursor", "A" * 16_000, f"at most {MAX_CURSOR_CHARS} characters"),
        ("sources", ["s" * 16_000], f"at most {MAX_SOURCE_ID_CHARS} characters"),
        ("sources", ["s"] * (MAX_SOURCE_ITEMS + 1), f"at most {MAX_SOURCE_ITEMS} items"),
        ("boosts", {"s" * 16_000: "high"}, f"at most {MAX_SOURCE_ID_CHARS} characters"),
        ("boosts", {"s": "h" * 16_000}, f"at most {MAX_LEVEL_CHARS} characters"),
        (
            "boosts",
            {f"s{i}": "high" for i in range(MAX_SOURCE_ITEMS + 1)},
            f"at most {MAX_SOURCE_ITEMS} items",
        ),
    ],
)
def test_every_text_field_of_a_request_is_bounded(field: str, value: object, bound: str) -> None:
    """A request is read on the server's event loop before it takes a concurrency slot:
    a field past its bound is refused by its length, before its text is parsed."""
    with pytest.raises(ProblemError) as refused:
        parse_request({"query": "disk", field: value})
    assert refused.value.status == 422
    (error,) = refused.value.extra["errors"]
    assert error["field"].split(".")[0] == field and bound in error["reason"]
    assert len(refused.value.detail) < 1000  # the bad value is cut, the field name too


def test_a_request_at_every_bound_is_accepted() -> None:
    parsed = parse_request(
        {
            "query": "disk",
            "cut": "relative:0." + "8" * (MAX_CUT_CHARS - 11),
            "sources": ["s" * MAX_SOURCE_ID_CHARS] * MAX_SOURCE_ITEMS,
            "boosts": {f"s{i}": "-medium" for i in range(MAX_SOURCE_ITEMS)},
        }
    )
    assert parsed.cut is not None and len(parsed.cut) == MAX_CUT_CHARS
