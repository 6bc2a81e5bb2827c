"""Tool definitions in each provider's shape, from whichever shape the caller wrote.

A `Prompt` keeps tools as the caller gave them (canonical JSON). Three function
shapes are recognised and converted; built-in tools pass through unchanged to
the provider that has them: Anthropic server and client tools (a `type` with a
date version, such as `{"type": "web_search_20250305", "name": "web_search"}`,
`code_execution_20250825`, `text_editor_20250728`, `bash_20250124`,
`computer_20250124`) to Anthropic, OpenAI's (`web_search`, `file_search`,
`code_interpreter`, `image_generation`, `mcp`, ...) to Responses, and
`custom` tools to both OpenAI APIs. Sending one to a provider without it is a
`RenderError` naming the tool:

- Anthropic: `{"name", "description", "input_schema"}`
- OpenAI Chat: `{"type": "function", "function": {"name", "description", "parameters"}}`
- OpenAI Responses: `{"type": "function", "name", "description", "parameters"}`

A tool with a name and neither a `type` nor a schema is a function without arguments
(the empty object schema).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .errors import RenderError

__all__ = ["anthropic_tool", "openai_chat_tool", "openai_responses_tool"]

_VERSIONED_TYPE = re.compile(r"_\d{8}$")
_ANTHROPIC_UNDATED = frozenset({"mcp_toolset", "custom"})


def _anthropic_builtin(tool: Mapping[str, Any]) -> bool:
    kind = str(tool.get("type", ""))
    return bool(_VERSIONED_TYPE.search(kind)) or kind in _ANTHROPIC_UNDATED


def _refuse(tool: Mapping[str, Any], provider: str, api: str, hint: str) -> RenderError:
    return RenderError(
        f"built-in tool type {tool.get('type')!r} is not available on {api}: {hint}",
        provider=provider,
        segment=str(tool.get("name") or tool.get("type")),
    )


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
    if tool.get("type") == "function" or "parameters" in tool or "type" not in tool:
        # a named tool without a type or a schema takes no arguments (built-ins have a type)
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
    """`tool` as an Anthropic tool definition (one already in that shape is kept whole)."""
    if "input_schema" in tool:
        return dict(tool)
    function = _function(tool)
    if function is None:
        if not _anthropic_builtin(tool):
            raise _refuse(
                tool,
                "anthropic",
                "Anthropic",
                "it is an OpenAI built-in tool; use Anthropic's server tool "
                '(e.g. {"type": "web_search_20250305", "name": "web_search"})',
            )
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
    """`tool` as a Chat Completions function tool (`custom` tools pass unchanged)."""
    if tool.get("type") == "function" and isinstance(tool.get("function"), Mapping):
        return dict(tool)
    function = _function(tool)
    if function is None:
        if tool.get("type") != "custom":
            raise _refuse(
                tool,
                "chat",
                "OpenAI Chat Completions (function and custom tools only)",
                "render the prompt with render_openai_responses, or use Chat's "
                "web_search_options for search",
            )
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
    """`tool` as a Responses API function tool (built-in tools pass unchanged)."""
    if tool.get("type") == "function" and "function" not in tool:
        return dict(tool)
    function = _function(tool)
    if function is None:
        if _anthropic_builtin(tool) and tool.get("type") != "custom":
            raise _refuse(
                tool,
                "responses",
                "OpenAI Responses",
                'it is an Anthropic server tool; use OpenAI\'s (e.g. {"type": "web_search"})',
            )
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
