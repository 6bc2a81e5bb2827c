"""Segments must appear in stability order: STATIC < VERSIONED < SESSION < DYNAMIC."""

import pytest
from prefixkit.sdk import LayoutError, Prompt, Segment


def test_static_after_session_raises_naming_both_segments() -> None:
    with pytest.raises(LayoutError) as excinfo:
        Prompt(system=[Segment.session("summary so far"), Segment.static("You are helpful.")])
    message = str(excinfo.value)
    assert "summary so far" in message
    assert "You are helpful." in message
    assert "Move" in message


def test_next_turn_keeps_previous_rendering_as_prefix() -> None:
    first = Prompt(system="You are helpful.", messages=[Segment.dynamic("Hi")])
    second = first.next_turn("Hello!", "How are you?")
    assert second.render_text().startswith(first.render_text())
    assert second.render_text() != first.render_text()
