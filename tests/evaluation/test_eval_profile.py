"""``eval --profile NAME`` measures a ranking profile: the global knobs resolved with the
profile as the servers resolve them, each knob's origin named (a profile variable, the
profiles file, global), and ``--recommend`` writing its lines as that profile's
variables. The command run in-process on the two-table notes of ``test_eval_knobs_in_force``."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from test_eval_knobs_in_force import cli, notes

from nautilus_ranking.evaluation.recommend import as_profile_lines

ASSIGNMENT = re.compile(r"^(# )?NAUTILUS_\w+=")


def report(folder: Path, *flags: str, **variables: str) -> dict[str, Any]:
    run = cli(folder, *notes(folder), "--json", *flags, **variables)
    assert run.returncode == 0, run.stderr
    out: dict[str, Any] = json.loads(run.stdout)
    return out


def test_the_run_names_the_profile_and_where_each_knob_came_from(tmp_path: Path) -> None:
    (tmp_path / "profiles.yaml").write_text("support:\n  ranking_near_duplicates: 'on'\n")
    variables = {
        "NAUTILUS_PROFILES_FILE": "profiles.yaml",
        "NAUTILUS_PROFILES__SUPPORT__RANKING_TOP_K": "7",
        "NAUTILUS_RANKING_DIVERSITY": "0.3",
    }
    shown = report(tmp_path, "--profile", "support", **variables)
    assert shown["profile"] == "support"
    knobs = shown["current_settings"]
    assert knobs["NAUTILUS_RANKING_TOP_K"] == {
        "value": 7,
        "origin": "NAUTILUS_PROFILES__SUPPORT__RANKING_TOP_K",
        "set": True,
    }
    assert knobs["NAUTILUS_RANKING_NEAR_DUPLICATES"]["origin"] == (
        "profiles.yaml: support.ranking_near_duplicates"
    )
    assert knobs["NAUTILUS_RANKING_DIVERSITY"]["origin"] == "global environment"
    assert knobs["NAUTILUS_RANKING_IDF"]["origin"] == "default"

    run = cli(tmp_path, *notes(tmp_path), "--profile", "support", **variables)
    assert run.returncode == 0, run.stderr
    header = next(x for x in run.stdout.splitlines() if x.startswith("sources:"))
    assert "current settings: profile support: " in header, header
    assert "NAUTILUS_RANKING_TOP_K=7 (NAUTILUS_PROFILES__SUPPORT__RANKING_TOP_K)" in header
    assert "NAUTILUS_RANKING_DIVERSITY=0.3 (global environment)" in header, header

    # without --profile the profile ranks nothing, and no answer names a profile
    plain = report(tmp_path, **variables)
    assert "profile" not in plain
    assert plain["current_settings"]["NAUTILUS_RANKING_TOP_K"]["set"] is False
    assert plain["current_settings"]["NAUTILUS_RANKING_DIVERSITY"]["origin"] == "environment"


def test_a_profile_ranks_as_the_same_knobs_set_globally(tmp_path: Path) -> None:
    """The profile's knobs over the global ones: the same figures as setting them
    globally, and different ones from another profile."""
    profiles = {
        "NAUTILUS_PROFILES__RANKED__RANKING_TOP_K": "10",
        "NAUTILUS_PROFILES__AUDIT__OVERRIDES": "none",  # no knob: the global ones
    }
    ranked = report(tmp_path, "--profile", "ranked", **profiles)
    audit = report(tmp_path, "--profile", "audit", **profiles)
    globally = report(tmp_path, NAUTILUS_RANKING_TOP_K="10")
    unprofiled = report(tmp_path)
    assert ranked["ranking_enabled"] and not audit["ranking_enabled"]
    for key in ("ndcg", "recall", "mrr", "share"):
        assert ranked["results"][0][key] == globally["results"][0][key], key
        assert audit["results"][0][key] == unprofiled["results"][0][key], key
    assert ranked["results"][0]["ndcg"] > audit["results"][0]["ndcg"]
    assert audit["profile"] == "audit"


def test_an_unknown_profile_is_a_usage_error_naming_the_flag(tmp_path: Path) -> None:
    run = cli(
        tmp_path,
        *notes(tmp_path),
        "--profile",
        "nope",
        NAUTILUS_PROFILES__SUPPORT__RANKING_TOP_K="7",
        NAUTILUS_PROFILES__AUDIT__RANKING_TOP_K="50",
    )
    assert run.returncode == 2, run.stderr
    assert run.stdout == ""
    assert "Traceback" not in run.stderr
    line = run.stderr.strip().splitlines()[-1]
    assert line.startswith("nautilus-ranking: --profile: 'nope': "), line
    assert "configured: audit, support" in line, line

    none = cli(tmp_path, *notes(tmp_path), "--profile", "support")
    assert none.returncode == 2, none.stderr
    assert "no profile is configured" in none.stderr, none.stderr


def test_recommend_writes_the_profiles_variables_commented_below_the_minimum(
    tmp_path: Path,
) -> None:
    run = cli(
        tmp_path,
        *notes(tmp_path),
        "--recommend",
        "--profile",
        "support",
        NAUTILUS_PROFILES__SUPPORT__OVERRIDES="all",
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert all(line.startswith("#") for line in lines), run.stdout  # 20 < 30 queries
    assert "# NAUTILUS_PROFILES__SUPPORT__RANKING_TOP_K=10" in lines, run.stdout
    assigned = [line for line in lines if ASSIGNMENT.match(line)]
    assert assigned, run.stdout
    assert all("NAUTILUS_PROFILES__SUPPORT__" in line for line in assigned), assigned
    assert any(line.startswith("# not for pasting yet: 20 judged queries") for line in lines)


def test_profile_lines_rename_per_profile_knobs() -> None:
    lines = [
        "# recommendation: something measured.",
        "NAUTILUS_SOURCE_BOOSTS=notes:high",
        "NAUTILUS_RANKING_IDF=",
        "# NAUTILUS_RANKING_TOP_K=10",
        "# also measured better and safe (smaller gain): IDF on",
    ]
    assert as_profile_lines(lines, "on_call") == [
        "# recommendation: something measured.",
        "NAUTILUS_PROFILES__ON_CALL__SOURCE_BOOSTS=notes:high",
        "NAUTILUS_PROFILES__ON_CALL__RANKING_IDF=",
        "# NAUTILUS_PROFILES__ON_CALL__RANKING_TOP_K=10",
        "# also measured better and safe (smaller gain): IDF on",
    ]


def test_a_change_no_profile_can_make_comments_out_every_line() -> None:
    """The embedder is one per process: what was measured (the embedder with a top K
    that turns ranking on) cannot be deployed in the profile, so no line is left to
    paste, not even the top K that alone would deploy something else."""
    lines = [
        "# recommendation: embedder onnx: nDCG@10 +0.273 …",
        "NAUTILUS_EMBEDDER=onnx",
        "NAUTILUS_RANKING_TOP_K=10",
    ]
    assert as_profile_lines(lines, "audit") == [
        "# recommendation: embedder onnx: nDCG@10 +0.273 …",
        "# not for profile audit: NAUTILUS_EMBEDDER is one per process, not per profile (it "
        "would change every profile's ranking), and the lines below measured only together",
        "# NAUTILUS_EMBEDDER=onnx",
        "# NAUTILUS_PROFILES__AUDIT__RANKING_TOP_K=10",
    ]
