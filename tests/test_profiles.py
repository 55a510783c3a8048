"""Ranking profiles as configured: variables, the YAML file, precedence, bad entries.

The way a profile is written (``NAUTILUS_PROFILES__<NAME>__<KNOB>``, ``.env``,
``NAUTILUS_PROFILES_FILE``), what wins (the environment over the file, knob by knob),
and each bad entry as one warning (skipped) or, in strict mode, one error.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from structlog.testing import capture_logs

from nautilus_ranking.profiles.build import OVERRIDABLE, load_profiles
from nautilus_ranking.request.errors import ProblemError
from nautilus_ranking.request.profile_choice import Grant, allowed, choose
from nautilus_ranking.settings.knobs import PER_PROFILE
from nautilus_ranking.settings.model import ConfigError, NautilusSettings
from nautilus_ranking.settings.unknown_variables import closest_setting, unknown_variables
from nautilus_ranking.startup.key_grants import key_grants, split_line


def test_a_profile_is_written_as_its_knobs_with_the_profile_in_front(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NAUTILUS_PROFILES__SUPPORT__SOURCE_BOOSTS", "runbooks:high,wiki:-low")
    monkeypatch.setenv("NAUTILUS_PROFILES__SUPPORT__RANKING_TOP_K", "3")
    monkeypatch.setenv("NAUTILUS_PROFILES__SUPPORT__AGENTS", "support-bot, helpdesk-2")
    monkeypatch.setenv("NAUTILUS_PROFILES__SUPPORT__OVERRIDES", "top_k,max_tokens")
    monkeypatch.setenv("NAUTILUS_PROFILES__AUDIT_2__RANKING_TOP_K", "50")
    monkeypatch.setenv("NAUTILUS_RANKING_IDF", "true")
    settings = NautilusSettings()
    with capture_logs() as logs:
        profiles = load_profiles(settings)
    assert logs == []
    assert profiles.names == ("audit_2", "support")
    support = profiles.by_name["support"]
    assert support.values == {
        "source_boosts": {"runbooks": "high", "wiki": "-low"},
        "ranking_top_k": 3,
    }
    assert support.agents == ("support-bot", "helpdesk-2")
    assert support.overrides == {"top_k", "max_tokens"}
    assert profiles.by_agent == {"support-bot": "support", "helpdesk-2": "support"}
    assert profiles.by_name["audit_2"].overrides == frozenset()  # none unless said
    effective = support.settings(settings)
    # a knob the profile does not set keeps the global value
    assert (effective.ranking_top_k, effective.ranking_idf) == (3, True)
    assert effective.ranking_enabled
    assert support.origins["ranking_top_k"] == "NAUTILUS_PROFILES__SUPPORT__RANKING_TOP_K"


def test_overrides_all_and_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NAUTILUS_PROFILES__OPEN__OVERRIDES", "all")
    monkeypatch.setenv("NAUTILUS_PROFILES__SHUT__OVERRIDES", "none")
    profiles = load_profiles(NautilusSettings())
    assert profiles.by_name["open"].overrides == set(OVERRIDABLE)
    assert profiles.by_name["shut"].overrides == frozenset()


def test_the_file_holds_many_profiles_and_the_environment_wins_knob_by_knob(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = tmp_path / "profiles.yaml"
    path.write_text(
        "support:\n"
        "  source_boosts: {runbooks: high}\n"
        "  ranking_top_k: 4\n"
        "  agents: [support-bot]\n"
        "audit:\n"
        "  ranking_top_k: 40\n"
        "  ranking_idf: true\n"
    )
    monkeypatch.setenv("NAUTILUS_PROFILES_FILE", str(path))
    monkeypatch.setenv("NAUTILUS_PROFILES__SUPPORT__RANKING_TOP_K", "7")
    profiles = load_profiles(NautilusSettings())
    support = profiles.by_name["support"]
    assert support.values == {"source_boosts": {"runbooks": "high"}, "ranking_top_k": 7}
    assert support.origins["ranking_top_k"] == "NAUTILUS_PROFILES__SUPPORT__RANKING_TOP_K"
    assert support.origins["source_boosts"] == f"{path}: support.source_boosts"
    assert profiles.by_name["audit"].values == {"ranking_top_k": 40, "ranking_idf": True}


def test_dotenv_profiles_are_read_and_the_environment_wins(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / ".env").write_text(
        "NAUTILUS_PROFILES__SUPPORT__RANKING_TOP_K=2\nNAUTILUS_PROFILES__SUPPORT__RANKING_IDF=true\n"
    )
    monkeypatch.setenv("NAUTILUS_PROFILES__SUPPORT__RANKING_TOP_K", "9")
    support = load_profiles(NautilusSettings()).by_name["support"]
    assert support.values == {"ranking_top_k": 9, "ranking_idf": True}
    assert support.origins["ranking_idf"] == "NAUTILUS_PROFILES__SUPPORT__RANKING_IDF (.env)"


@pytest.mark.parametrize(
    ("variable", "value", "reason"),
    [
        ("NAUTILUS_PROFILES__SUPPORT__SOURCE_BOOSTS", "runbooks:hgih", "unknown level 'hgih'"),
        ("NAUTILUS_PROFILES__SUPPORT__RANKING_MAX_CANDIDATES", "many", "not an integer"),
        ("NAUTILUS_PROFILES__SUPPORT__EMBEDDER", "onnx", "does not vary per profile"),
        ("NAUTILUS_PROFILES__SUPPORT__IDF", "on", "did you mean ranking_idf?"),
        ("NAUTILUS_PROFILES__SUPPORT__OVERRIDES", "top_k,topk", "not a request field"),
        ("NAUTILUS_PROFILES__SUPPORT-BOT__RANKING_TOP_K", "3", "not a profile name"),
        ("NAUTILUS_PROFILE_SUPPORT__RANKING_TOP_K", "3", "not a profile variable"),
    ],
)
def test_a_bad_entry_warns_and_is_skipped_or_refused_in_strict_mode(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, reason: str
) -> None:
    monkeypatch.setenv("NAUTILUS_PROFILES__SUPPORT__RANKING_IDF", "true")  # a good entry
    monkeypatch.setenv(variable, value)
    with capture_logs() as logs:
        profiles = load_profiles(NautilusSettings())
    warned = [e for e in logs if e["log_level"] == "warning"]
    assert len(warned) == 1 and reason in warned[0]["reason"], warned
    assert warned[0]["variable"].startswith(variable.split("__")[0])
    # the good entry is kept, the bad one skipped: the profile's top K stays the global one
    assert profiles.by_name["support"].values.get("ranking_idf") is True
    assert "ranking_top_k" not in profiles.by_name["support"].values
    monkeypatch.setenv("NAUTILUS_CONFIG_STRICT", "true")
    with pytest.raises(ConfigError, match=reason.replace("?", r"\?")):
        load_profiles(NautilusSettings())


@pytest.mark.parametrize(
    ("knob", "value", "reason"),
    [
        ("RANKING_TOP_K", "3x", "not an integer"),
        ("RANKING_MAX_TOKENS", "2k", "not an integer"),
        ("RANKING_MIN_CONFIDENCE", "0,9", "not a number in [0, 1]"),
        ("RANKING_MAX_PER_SOURCE", "two", "not an integer"),
        ("RANKING_CUT", "relatve:0.8", "not a cut setting"),
        ("TOP_K", "3", "unknown profile knob (did you mean ranking_top_k?)"),
        ("RANKING_MAX_TOKEN", "900", "unknown profile knob (did you mean ranking_max_tokens?)"),
    ],
)
def test_a_restricting_knob_that_does_not_parse_refuses_whatever_the_mode(
    monkeypatch: pytest.MonkeyPatch, knob: str, value: str, reason: str
) -> None:
    """Skipped, ``3x`` gave the profile's callers the global knobs: every row, no budget,
    no abstain. Refused, nothing starts with a grant wider than the one written."""
    monkeypatch.setenv("NAUTILUS_PROFILES__SUPPORT__RANKING_IDF", "true")  # a good entry
    monkeypatch.setenv(f"NAUTILUS_PROFILES__SUPPORT__{knob}", value)
    for strict in ("false", "true"):
        monkeypatch.setenv("NAUTILUS_CONFIG_STRICT", strict)
        with pytest.raises(ConfigError) as refused:
            load_profiles(NautilusSettings())
        [problem] = refused.value.problems
        assert problem.variable == f"NAUTILUS_PROFILES__SUPPORT__{knob}"
        assert problem.value == value and problem.profile == "support"
        assert problem.reason.startswith(reason) and "nothing starts until it parses" in (
            problem.reason
        )


def test_a_bad_boost_entry_drops_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NAUTILUS_PROFILES__SUPPORT__SOURCE_BOOSTS", "runbooks:high,wiki:hgih")
    with capture_logs():
        profiles = load_profiles(NautilusSettings())
    assert profiles.by_name["support"].values == {"source_boosts": {"runbooks": "high"}}


def test_an_agent_given_two_default_profiles_keeps_the_first_and_warns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NAUTILUS_PROFILES__AUDIT__AGENTS", "auditor,support-bot")
    monkeypatch.setenv("NAUTILUS_PROFILES__SUPPORT__AGENTS", "support-bot")
    with capture_logs() as logs:
        profiles = load_profiles(NautilusSettings())
    assert profiles.by_agent == {"auditor": "audit", "support-bot": "audit"}
    assert [e["value"] for e in logs] == ["support-bot"]
    assert "one default profile" in logs[0]["reason"]
    monkeypatch.setenv("NAUTILUS_CONFIG_STRICT", "true")
    with pytest.raises(ConfigError, match="one default profile"):
        load_profiles(NautilusSettings())


def test_every_per_profile_knob_can_be_set_in_a_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    """The declaration is the list: a knob declared per profile needs no edit here."""
    samples = {
        "ranking_top_k": "4",
        "ranking_idf": "true",
        "source_boosts": "runbooks:low",
        "ranking_max_candidates": "100",
        "ranking_dedup_key": "title",
        "ranking_cut": "relative:0.5",
        "ranking_near_duplicates": "on",
        "ranking_diversity": "0.3",
        "ranking_max_per_source": "2",
        "ranking_max_tokens": "500",
        "ranking_lexical": "cosine",  # not the default: the test needs a change
    }
    for knob in PER_PROFILE:
        monkeypatch.setenv(
            f"NAUTILUS_PROFILES__ALL__{knob.field.upper()}", samples.get(knob.field, "")
        )
    with capture_logs() as logs:
        profile = load_profiles(NautilusSettings()).by_name["all"]
    assert logs == []
    default = NautilusSettings()
    changed = [k.field for k in PER_PROFILE if k.field in samples]
    assert all(getattr(profile.settings(default), f) != getattr(default, f) for f in changed), (
        profile.values
    )


def test_the_typo_check_leaves_profile_variables_to_the_profile_reader(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    known = {"NAUTILUS_" + f.upper() for f in NautilusSettings.model_fields}
    assert closest_setting("NAUTILUS_PROFILES__SUPPORT__RANKING_TOP_K", known) is None
    assert closest_setting("NAUTILUS_PROFILES_FILE", known) is None  # one of ours
    assert closest_setting("NAUTILUS_PROFILES_FIEL", known) is None  # the reader's to say
    monkeypatch.setenv("NAUTILUS_PROFILES__SUPPORT__RANKING_TOP_K", "3")
    assert unknown_variables(NautilusSettings) == []


def test_a_keys_file_line_grants_a_default_and_allowed_profiles(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NAUTILUS_PROFILES__SUPPORT__RANKING_TOP_K", "3")
    monkeypatch.setenv("NAUTILUS_PROFILES__AUDIT__RANKING_TOP_K", "30")
    profiles = load_profiles(NautilusSettings())
    assert split_line("k1 profile=support allow=audit") == (
        "k1",
        [("profile", "support"), ("allow", "audit")],
    )
    assert split_line("a key with spaces") == ("a key with spaces", [])  # as before
    grants, problems = key_grants(
        [
            "k-plain",
            "k-support profile=support",
            "k-both profile=support allow=audit",
            "k-twice profile=support profile=audit",
            "k-unknown profile=nope allow=audit",
        ],
        profiles,
        "keys.txt",
    )
    assert grants[b"k-plain"] == Grant()
    assert grants[b"k-support"] == Grant("support")
    assert grants[b"k-both"] == Grant("support", frozenset({"audit"}))
    assert grants[b"k-twice"] == Grant("support")
    assert grants[b"k-unknown"] == Grant(None, frozenset({"audit"}))
    assert [(p.variable, p.value) for p in problems] == [
        ("NAUTILUS_SERVE_API_KEYS_FILE (keys.txt:4)", "profile=audit"),
        ("NAUTILUS_SERVE_API_KEYS_FILE (keys.txt:5)", "profile=nope"),
    ]
    assert "given twice" in problems[0].reason


def test_choosing_a_profile_unknown_or_disallowed_is_one_403_to_a_key_listing_no_other(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("support", "audit", "secret_team"):
        monkeypatch.setenv(f"NAUTILUS_PROFILES__{name.upper()}__RANKING_TOP_K", "3")
    profiles = load_profiles(NautilusSettings())
    grant = Grant("support", frozenset({"audit"}))
    assert choose(profiles, None, grant) is profiles.by_name["support"]
    assert choose(profiles, "audit", grant) is profiles.by_name["audit"]
    assert choose(profiles, None, Grant()) is None  # a plain key: the global knobs
    assert choose(profiles, "secret_team", None) is profiles.by_name["secret_team"]  # no keys
    answers = []
    for asked in ("nope", "secret_team"):  # unknown, forbidden: a key cannot tell which
        with pytest.raises(ProblemError) as refused:
            choose(profiles, asked, grant)
        error = refused.value
        shown = f"{error.detail} {error.extra}"
        others = {"support", "audit", "secret_team"} - {asked}
        assert not any(name in shown for name in others), shown
        answers.append((error.status, error.slug, shown.replace(asked, "X")))
    assert answers[0] == answers[1] and answers[0][:2] == (403, "profile-forbidden")
    with pytest.raises(ProblemError) as unknown:  # without keys: nothing to hide
        choose(profiles, "nope", None)
    assert unknown.value.status == 422
    assert allowed(profiles, grant) == {"default": "support", "allowed": ["audit", "support"]}
    assert allowed(profiles, Grant()) == {"default": None, "allowed": []}


def test_a_profile_boost_naming_no_source_is_dropped_at_start_up_or_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from nautilus_ranking.request.engine import Engine

    monkeypatch.setenv("NAUTILUS_PROFILES__SUPPORT__SOURCE_BOOSTS", "wiki:high,runbooks:high")
    with capture_logs() as logs:
        engine = Engine.assemble(NautilusSettings())
    try:
        support = engine.by_profile["support"]
        assert support.settings.source_boosts == {"runbooks": "high"}
        assert support.broker.synthesizer.ranking_enabled
        assert not engine.broker.synthesizer.ranking_enabled  # the global knobs rank nothing
        # one set of sources: the profile's broker asks the very same ones
        assert list(map(id, support.broker.sources)) == list(map(id, engine.broker.sources))
    finally:
        engine.broker.close()
    [skipped] = [e for e in logs if e["event"] == "source_boost_skipped"]
    assert skipped["variable"] == "NAUTILUS_PROFILES__SUPPORT__SOURCE_BOOSTS"
    assert skipped["value"] == "wiki"
    assert [p.value for p in engine.problems] == ["wiki"]
    monkeypatch.setenv("NAUTILUS_CONFIG_STRICT", "true")
    with pytest.raises(ConfigError, match="no source has id 'wiki'"):
        Engine.assemble(NautilusSettings())


def test_an_in_process_engine_reads_profiles_written_only_in_dotenv(tmp_path: Path) -> None:
    from nautilus_ranking.profiles.read import profiles_in_environment

    assert not profiles_in_environment(tmp_path / ".env")
    (tmp_path / ".env").write_text("NAUTILUS_PROFILES__SUPPORT__RANKING_TOP_K=2\n")
    assert profiles_in_environment(tmp_path / ".env")


def test_reading_profiles_reads_the_environment_once_whatever_their_number(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Each profile's knobs go through the settings' parsers alone: building a settings
    object per profile read the environment and .env again for each, so 17,000 profiles
    in the environment took minutes (the work grew as the square of their number)."""
    reads = []
    real = NautilusSettings.settings_customise_sources.__func__  # type: ignore[attr-defined]

    def counted(cls: type[NautilusSettings], *args: object, **kwargs: object) -> object:
        reads.append(1)
        return real(cls, *args, **kwargs)

    monkeypatch.setattr(NautilusSettings, "settings_customise_sources", classmethod(counted))
    settings = NautilusSettings()

    def reads_for(count: int) -> int:
        lines = "".join(f"p{i}:\n  ranking_top_k: {1 + i % 9}\n" for i in range(count))
        (tmp_path / "profiles.yaml").write_text(lines, encoding="utf-8")
        for i in range(count):
            monkeypatch.setenv(f"NAUTILUS_PROFILES__E{i}__RANKING_IDF", "true")
        reads.clear()
        profiles = load_profiles(
            settings.model_copy(update={"profiles_file": str(tmp_path / "profiles.yaml")})
        )
        assert len(profiles.names) == 2 * count and not profiles.problems
        return len(reads)

    assert reads_for(2) == reads_for(200) == 0


def test_a_profile_knob_parses_as_the_same_global_setting_validates(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    written = {
        "RANKING_TOP_K": "7",
        "RANKING_IDF": "on",
        "SOURCE_BOOSTS": "wiki:high,tickets:-low",
        "RANKING_MAX_CANDIDATES": "500",
        "RANKING_DEDUP_KEY": "doc_id",
        "RANKING_CUT": "relative:0.7",
        "RANKING_NEAR_DUPLICATES": "on",
        "RANKING_DIVERSITY": "0.3",
        "RANKING_MAX_PER_SOURCE": "4",
        "RANKING_CANONICAL_SOURCES": "wiki, tickets",
        "RANKING_MAX_TOKENS": "900",
        "RANKING_LEXICAL": "cosine",
        "RANKING_MIN_CONFIDENCE": "0.12",
        "RANKING_RECENCY": "half_life:30d,archive:off",
        "RANKING_SUPERSEDE": "true",
        "RANKING_CONFIDENCE_FIT": "fits/oncall.json",
        "RANKING_BUDGET_PASSAGES": "false",
    }
    assert {k.field.upper() for k in PER_PROFILE} == set(written)
    for knob, value in written.items():
        monkeypatch.setenv(f"NAUTILUS_PROFILES__P__{knob}", value)
        monkeypatch.setenv(f"NAUTILUS_{knob}", value)
    settings = NautilusSettings()
    profile = load_profiles(settings).by_name["p"]
    for knob in written:
        field = knob.lower()
        assert profile.values[field] == getattr(settings, field), field
        assert type(profile.values[field]) is type(getattr(settings, field)), field
