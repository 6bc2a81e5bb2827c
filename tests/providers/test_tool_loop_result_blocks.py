"""What a tool's return value becomes in `run_tool_loop`, through the official OpenAI client
on the provider mock: text as it is, JSON data as JSON text, `Text` and `Image` blocks as
the result's parts, the provider's own blocks (`Native`) as the provider's tool result; a
block of another API, or a value that is not JSON, is refused naming the tool."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

import pytest
from prefixkit.sdk import (
    Image,
    Native,
    OpenAIClient,
    Text,
    UsageError,
    run_tool_loop,
)
from prefixkit.testing.providers import MockProvider

from .openai_tool_answers import ToolCallingProvider
from .prompts import support_prompt

MODEL = "gpt-5.6-sol"
PNG = "iVBORw0KGgo="


def result_item(tool: Callable[..., Any]) -> dict[str, Any]:
    """The `function_call_output` a Responses loop sends for one call of `tool`."""
    provider = ToolCallingProvider(MockProvider(), calls=1)
    with provider.openai_client() as client:
        run_tool_loop(
            OpenAIClient(client),
            support_prompt("Check INV-1."),
            {"lookup_invoice": tool},
            model=MODEL,
        )
    (item,) = [i for i in provider.mock.body["input"] if i.get("type") == "function_call_output"]
    return {k: v for k, v in item.items() if k != "prompt_cache_breakpoint"}


def parts(item: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {k: v for k, v in part.items() if k != "prompt_cache_breakpoint"} for part in item["output"]
    ]


def test_json_data_goes_back_as_json_text() -> None:
    item = result_item(lambda invoice_id: {"id": invoice_id, "paid": True})
    assert parts(item) == [{"type": "input_text", "text": '{"id": "INV-1", "paid": true}'}]


def test_an_image_and_its_caption_go_back_as_the_results_parts() -> None:
    item = result_item(
        lambda invoice_id: (Image(data=PNG, media_type="image/png"), Text(f"scan of {invoice_id}"))
    )
    assert parts(item) == [
        {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}", "detail": "auto"},
        {"type": "input_text", "text": "scan of INV-1"},
    ]


def test_the_providers_own_parts_go_back_as_its_tool_result() -> None:
    pdf = {
        "type": "input_file",
        "filename": "inv.pdf",
        "file_data": "data:application/pdf;base64,JVBER",
    }
    item = result_item(lambda invoice_id: [Native(pdf, "responses"), Text(invoice_id)])
    assert item["call_id"] == "call_1"
    assert parts(item) == [pdf, {"type": "input_text", "text": "INV-1"}]


def test_a_block_of_another_api_is_refused_naming_the_tool() -> None:
    block = Native(
        {"type": "search_result", "source": "kb", "title": "t", "content": []}, "anthropic"
    )
    with pytest.raises(UsageError, match=r"'lookup_invoice' returned a anthropic search_result"):
        result_item(lambda invoice_id: [block])


def test_a_value_that_is_not_json_is_refused_naming_the_tool() -> None:
    with pytest.raises(UsageError, match=r"tool 'lookup_invoice' returned a datetime") as caught:
        result_item(lambda invoice_id: datetime.datetime(2026, 11, 26))
    assert caught.value.argument == "tools" and caught.value.value == "lookup_invoice"
