"""A Chat Completions tool message takes text only: other content is refused, not dropped."""

from __future__ import annotations

from typing import Any

import pytest
from prefixkit.sdk import (
    Image,
    Prompt,
    RenderError,
    Segment,
    Text,
    ToolCall,
    ToolResult,
    render_openai_chat,
    render_openai_responses,
)

MODEL = "gpt-5.6-sol"


def scanned(result: ToolResult) -> Prompt:
    return Prompt(
        messages=[
            Segment.session("Read the scan of INV-1."),
            Segment.session([ToolCall("call_1", "scan", {"id": "INV-1"})], role="assistant"),
            Segment.dynamic([result]),
        ]
    )


SCAN = ToolResult("call_1", (Image(data="iVBORw0KGgo=", media_type="image/png"), Text("scan")))


def test_chat_refuses_an_image_in_a_tool_result_instead_of_dropping_it() -> None:
    with pytest.raises(RenderError, match="tool call call_1 holds Image content"):
        render_openai_chat(scanned(SCAN), model=MODEL)


def test_responses_sends_the_image_of_a_tool_result() -> None:
    request: dict[str, Any] = dict(render_openai_responses(scanned(SCAN), model=MODEL))
    output = request["input"][-1]["output"]
    assert [part["type"] for part in output] == ["input_image", "input_text"]
