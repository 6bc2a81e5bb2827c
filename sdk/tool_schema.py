"""Tool definitions in each provider's shape, from whichever shape the caller wrote.

A `Prompt` keeps tools as the caller gave them (canonical JSON). Three function
shapes are recognised and converted; anything else (Anthropic server tools such
as `{"type": "web_search_20250305", ...}`) passes through unchanged:

- Anthropic: `{"name", "description", "input_schema"}`
- OpenAI Chat: `{"type": "function", "function": {"name", "description", "parameters"}}`
- OpenAI Responses: `{"type": "function", "name", "description", "parameters"}`
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["anthropic_tool", "openai_chat_tool", "openai_responses_tool"]

_EMPTY_SCHEMA: Mapping[str, Any] = {"type": "object", "properties": {}}


def _function(tool: Mapping[str, Any]) -> dict[str, Any] | None:
    """Name, description, schema and strictness of a function tool in any shape, else None."""
    if isinstance(tool.get("function"), Mapping):
        function = dict(tool["function"])
        return {
            "name": function.get("name"),
            "description": function.get("description"),
            "schema": function.get("parameters", _EMPTY_SCHEMA),
            "strict": function.get("strict"),
        }
    if "input_schema" in tool:
        return {
            "name": tool.get("name"),
            "description": tool.get("description"),
            "schema": tool["input_schema"],
            "strict": tool.get("strict"),
        }
    if tool.get("type") == "function" or "parameters" in tool:
        return {
            "name": tool.get("name"),
            "description": tool.get("description"),
            "schema": tool.get("parameters", _EMPTY_SCHEMA),
            "strict": tool.get("strict"),
        }
    return None


def _without_none(values: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


def anthropic_tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    """`tool` as an Anthropic tool definition."""
    function = _function(tool)
    if function is None:
        return dict(tool)
    return _without_none(
        {
            "name": function["name"],
            "description": function["description"],
            "input_schema": function["schema"],
            "strict": function["strict"],
        }
    )


def openai_chat_tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    """`tool` as a Chat Completions function tool."""
    function = _function(tool)
    if function is None:
        return dict(tool)
    return {
        "type": "function",
        "function": _without_none(
            {
                "name": function["name"],
                "description": function["description"],
                "parameters": function["schema"],
                "strict": function["strict"],
            }
        ),
    }


def openai_responses_tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    """`tool` as a Responses API function tool."""
    function = _function(tool)
    if function is None:
        return dict(tool)
    return _without_none(
        {
            "type": "function",
            "name": function["name"],
            "description": function["description"],
            "parameters": function["schema"],
            "strict": function["strict"],
        }
    )
