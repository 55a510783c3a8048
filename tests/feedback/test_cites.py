"""A cite handle carries its row and answer, signed: a forged, altered, expired or
borrowed one is refused, every time, and no other tag of the cursor keys passes as one."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nautilus_ranking.feedback.cites import Cite, CiteError, make_cite, read_cite
from nautilus_ranking.request.cursor_keys import CursorKeys

KEYS = CursorKeys(b"k" * 32)
NOW = 1_800_000_000.0
WEEK = 7 * 86_400
CITE = Cite("r" * 32, 2, 3, "runbooks", "RB-01", None, "anonymous", int(NOW))


def test_a_handle_reads_back_as_what_it_carries() -> None:
    handle = make_cite(KEYS, CITE)
    assert handle.startswith("c1.") and len(handle) < 300
    assert read_cite(KEYS, handle, WEEK, NOW + 60) == CITE


def test_a_previous_key_still_reads_its_handles() -> None:
    handle = make_cite(CursorKeys(b"o" * 32), CITE)
    assert read_cite(CursorKeys(b"n" * 32, (b"o" * 32,)), handle, WEEK, NOW) == CITE


@pytest.mark.parametrize(
    ("handle", "reason"),
    [
        ("", "malformed"),
        ("nOTACURSOR", "malformed"),
        ("c1.a.b.c", "malformed"),
        ("c1.!!!.abc", "malformed"),
        ("c1." + "A" * 2000, "malformed"),
    ],
)
def test_a_malformed_handle_is_refused(handle: str, reason: str) -> None:
    with pytest.raises(CiteError) as refused:
        read_cite(KEYS, handle, WEEK, NOW)
    assert refused.value.reason == reason


def test_an_expired_handle_is_refused_and_says_its_lifetime() -> None:
    handle = make_cite(KEYS, CITE)
    assert read_cite(KEYS, handle, WEEK, NOW + WEEK) == CITE
    with pytest.raises(CiteError) as refused:
        read_cite(KEYS, handle, WEEK, NOW + WEEK + 1)
    assert refused.value.reason == "expired"
    assert "NAUTILUS_FEEDBACK_CITE_LIFETIME_DAYS" in str(refused.value)


def test_a_handle_under_another_key_is_forged() -> None:
    handle = make_cite(CursorKeys(b"x" * 32), CITE)
    with pytest.raises(CiteError) as refused:
        read_cite(KEYS, handle, WEEK, NOW)
    assert refused.value.reason == "forged"


def test_a_handle_made_up_from_a_chosen_body_is_forged() -> None:
    """The body is readable base64: writing another row or answer into it and keeping
    the tag fails the tag."""
    handle = make_cite(KEYS, CITE)
    other = make_cite(KEYS, Cite("s" * 32, 1, 1, "tickets", "T-9", None, "anonymous", int(NOW)))
    body, tag = handle.split(".")[1], other.split(".")[2]
    with pytest.raises(CiteError) as refused:
        read_cite(KEYS, f"c1.{body}.{tag}", WEEK, NOW)
    assert refused.value.reason == "forged"


def test_no_other_tag_of_the_keys_passes_as_a_cite() -> None:
    """A cursor's tag and a ranking hash's signature are of other purposes."""
    handle = make_cite(KEYS, CITE)
    body = handle.split(".")[1]
    raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    cursor_tag = base64.urlsafe_b64encode(KEYS.sign(raw)).rstrip(b"=").decode()
    with pytest.raises(CiteError) as refused:
        read_cite(KEYS, f"c1.{body}.{cursor_tag}", WEEK, NOW)
    assert refused.value.reason == "forged"


def test_a_last_character_that_decodes_alike_is_refused() -> None:
    """Base64's last character has spare bits: another letter may decode to the same
    tag, and is refused all the same."""
    handle = make_cite(KEYS, CITE)
    last = handle[-1]
    alike = base64.urlsafe_b64encode(base64.urlsafe_b64decode(handle.split(".")[2] + "==")).decode()
    assert alike.rstrip("=")[-1] == last
    for other in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_":
        if other != last:
            with pytest.raises(CiteError):
                read_cite(KEYS, handle[:-1] + other, WEEK, NOW)


@given(st.integers(min_value=3, max_value=10_000), st.sampled_from("AQgw-_z0"))
def test_any_altered_character_is_refused(where: int, replacement: str) -> None:
    handle = make_cite(KEYS, CITE)
    index = where % len(handle)
    if handle[index] == replacement or index < 3:
        return
    altered = handle[:index] + replacement + handle[index + 1 :]
    with pytest.raises(CiteError):
        read_cite(KEYS, altered, WEEK, NOW)
