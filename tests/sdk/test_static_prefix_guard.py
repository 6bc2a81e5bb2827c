"""The static-prefix guard: one prompt name, one static prefix."""

from __future__ import annotations

import importlib

import pytest
from prefixkit.sdk import (
    PrefixkitDeprecationWarning,
    Prompt,
    Segment,
    StaticPrefixChangedError,
    StaticPrefixChangedWarning,
    StaticPrefixGuard,
    default_guard,
)


def support(day: str, question: str = "Hi", name: str | None = "support") -> Prompt:
    return Prompt(
        system=[Segment.static("You are Harbor."), Segment.static(f"Today is {day}.")],
        messages=[Segment.dynamic(question)],
        name=name,
    )


def test_same_static_prefix_with_new_questions_passes() -> None:
    guard = StaticPrefixGuard()
    guard.check(support("Monday", "Hi"))
    guard.check(support("Monday", "What is egress?"))


def test_changed_static_prefix_raises_with_a_diff_of_the_first_differing_segment() -> None:
    guard = StaticPrefixGuard()
    guard.check(support("Monday"))
    with pytest.raises(StaticPrefixChangedError) as excinfo:
        guard.check(support("Tuesday"))
    message = str(excinfo.value)
    assert "prompt 'support' changed its static prefix at static segment 1" in message
    assert "-Today is Monday." in message
    assert "+Today is Tuesday." in message
    assert "DYNAMIC" in message


def test_warn_mode_warns_and_keeps_the_first_prefix() -> None:
    guard = StaticPrefixGuard(mode="warn")
    guard.check(support("Monday"))
    with pytest.warns(StaticPrefixChangedWarning, match="Today is Tuesday"):
        guard.check(support("Tuesday"))
    with pytest.warns(StaticPrefixChangedWarning):
        guard.check(support("Wednesday"))
    guard.check(support("Monday"))


def test_different_names_are_tracked_separately() -> None:
    guard = StaticPrefixGuard()
    guard.check(support("Monday", name="support-eu"))
    guard.check(support("Tuesday", name="support-us"))


def test_unnamed_prompts_are_not_tracked() -> None:
    guard = StaticPrefixGuard()
    guard.check(support("Monday", name=None))
    guard.check(support("Tuesday", name=None))


def test_forget_accepts_an_intended_change() -> None:
    guard = StaticPrefixGuard()
    guard.check(support("Monday"))
    guard.forget("support")
    guard.check(support("Tuesday"))
    with pytest.raises(StaticPrefixChangedError):
        guard.check(support("Monday"))


def test_a_changed_number_of_static_segments_is_reported() -> None:
    guard = StaticPrefixGuard()
    guard.check(Prompt(system=[Segment.static("You are Harbor.")], name="short"))
    longer = Prompt(
        system=[Segment.static("You are Harbor."), Segment.static("Be brief.")], name="short"
    )
    with pytest.raises(StaticPrefixChangedError, match="number of static segments from 1 to 2"):
        guard.check(longer)


def test_default_guard_raises() -> None:
    assert default_guard.mode == "raise"


def test_building_prompts_never_consults_the_default_guard() -> None:
    monday = support("Monday", name="purity-check")
    tuesday = support("Tuesday", name="purity-check")
    assert monday.static_prefix_digest != tuesday.static_prefix_digest
    assert support("Monday", name="purity-check").render_text() == monday.render_text()


def test_the_old_name_drift_guard_warns_at_the_callers_line() -> None:
    with pytest.warns(PrefixkitDeprecationWarning) as record:
        old = importlib.import_module("prefixkit.sdk").DriftGuard
    assert old is StaticPrefixGuard
    assert record[0].filename == __file__
