"""Render a `Prompt` for a vLLM OpenAI-compatible server, block-aligned and salted.

vLLM caches whole KV blocks of the full token sequence (chat template, BOS and
tool definitions included). `render_vllm` pads the static prefix with inert
whitespace so it ends exactly on a block boundary of that sequence
(`alignment.align_static_prefix`, with the model's own tokenizer and chat
template), then renders either

- chat messages for `client.chat.completions.create(**kwargs)` (default): one
  system message (system segments joined by a blank line), then one message
  per context and conversation segment, as `alignment.chat_messages` lays them
  out, so the alignment and the request agree; tools in the exact shape vLLM
  hands to the template; or
- token ids for `client.completions.create(**kwargs)` (`token_ids=True`): the
  very sequence the alignment verified, so nothing is re-templated server-side.

`cache_salt` (the tenant's HMAC salt, never empty: vLLM rejects `""`) isolates
tenants: the same prefix under another salt never hits. It is not an OpenAI
parameter, so it travels in `extra_body`. Without `tenant` there is no salt and
every request on the server shares the cache.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypedDict, cast, overload

from .alignment import align_static_prefix, chat_messages, template_messages
from .errors import PrefixkitWarning, UncachedPrefixWarning, UsageError
from .prompt import Prompt
from .provider_blocks import check_tool_pairs
from .request_checks import check_request
from .salt import tenant_salt
from .tokenizer import HFTokenizer
from .tool_schema import openai_chat_tool

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolUnionParam

__all__ = ["VLLMChatRequest", "VLLMCompletionRequest", "render_vllm", "vllm_tool"]

_RESERVED = {
    "model": "the model= argument",
    "messages": "Prompt(system=..., context=..., messages=...)",
    "prompt": "Prompt(system=..., context=..., messages=...)",
}


class VLLMChatRequest(TypedDict):
    """The keyword arguments of `chat.completions.create` on a vLLM server that prefixkit sets."""

    model: str
    messages: list[ChatCompletionMessageParam]
    tools: NotRequired[list[ChatCompletionToolUnionParam]]
    extra_body: NotRequired[dict[str, Any]]


class VLLMCompletionRequest(TypedDict):
    """The keyword arguments of `completions.create` (token ids) that prefixkit sets."""

    model: str
    prompt: list[int]
    extra_body: NotRequired[dict[str, Any]]


def vllm_tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    """`tool` exactly as vLLM's chat endpoint passes it to the chat template.

    vLLM re-serialises each tool (`ChatCompletionToolsParam`): `type`, then
    `function` with `name`, `description` and `parameters` (null when absent)
    and `strict` only when set. The template renders these dicts, so the
    alignment must see the same ones.
    """
    function = openai_chat_tool(tool)["function"]
    shaped: dict[str, Any] = {
        "name": function["name"],
        "description": function.get("description"),
        "parameters": function.get("parameters"),
    }
    if function.get("strict") is not None:
        shaped["strict"] = function["strict"]
    return {"type": "function", "function": shaped}


@overload
def render_vllm(
    prompt: Prompt,
    *,
    model: str,
    tokenizer: HFTokenizer,
    block_size: int,
    tenant: str | None = ...,
    salt_secret: str | bytes | None = ...,
    token_ids: Literal[False] = ...,
    align: bool = ...,
    max_pad_tokens: int | None = ...,
    **request: Any,
) -> VLLMChatRequest: ...


@overload
def render_vllm(
    prompt: Prompt,
    *,
    model: str,
    tokenizer: HFTokenizer,
    block_size: int,
    tenant: str | None = ...,
    salt_secret: str | bytes | None = ...,
    token_ids: Literal[True],
    align: bool = ...,
    max_pad_tokens: int | None = ...,
    **request: Any,
) -> VLLMCompletionRequest: ...


def render_vllm(
    prompt: Prompt,
    *,
    model: str,
    tokenizer: HFTokenizer,
    block_size: int,
    tenant: str | None = None,
    salt_secret: str | bytes | None = None,
    token_ids: bool = False,
    align: bool = True,
    max_pad_tokens: int | None = None,
    **request: Any,
) -> VLLMChatRequest | VLLMCompletionRequest:
    """The kwargs for a vLLM server through the official `openai` client.

    - `tokenizer`: the served model's tokenizer folder (`HFTokenizer`), whose
      chat template the server applies; `block_size`: the server's
      `--block-size`.
    - `tenant` + `salt_secret`: `cache_salt = tenant_salt(tenant, salt_secret)`
      (without `salt_secret`, `PREFIXKIT_SALT_SECRET` keys it, as the gateway's).
    - `token_ids`: render a token-id prompt for `completions.create` instead
      of chat messages for `chat.completions.create`.
    - `align`: pad the static prefix to a block boundary (a
      `PrefixkitWarning` says why when it cannot); `max_pad_tokens`: padding
      budget (default one block).
    - `request`: other parameters (max_tokens, temperature, tool_choice,
      stream, ...); an `extra_body` given here is merged with `cache_salt`;
      `tools=` is sent as given when the prompt has none.
    - `chat_template_kwargs` (here or in `extra_body`, e.g.
      `{"enable_thinking": False}`): applied to the local chat template as the
      server applies it, so the alignment and the token ids match the
      server's rendering; sent in `extra_body` for chat, and not sent with
      `token_ids` (the ids already carry it).

    Raises `SaltError` for a tenant without a secret or the variable (or an
    empty one), and
    `RenderError` for a prompt without messages. Never mutates `prompt`.
    """
    check_request(
        prompt, request, renderer="render_vllm", reserved=_RESERVED, provider="vllm", model=model
    )
    if not hasattr(tokenizer, "chat_text"):
        raise UsageError(
            f"render_vllm needs the served model's HFTokenizer (its chat template is what the "
            f"server renders), got an object of type {type(tokenizer).__name__}: "
            "HFTokenizer(<the model folder>)"
        )
    salt = None if tenant is None else tenant_salt(tenant, salt_secret)
    check_tool_pairs([(segment.role, segment.blocks) for segment in prompt.messages], "vLLM chat")
    given_tools = request.pop("tools", None)
    extra_body = dict(request.pop("extra_body", None) or {})
    # The server applies these to its chat template; the local rendering (the
    # alignment, the token ids) must apply the same, or its tokens differ.
    template_kwargs: dict[str, Any] | None = request.pop(
        "chat_template_kwargs", extra_body.pop("chat_template_kwargs", None)
    )
    tools = [vllm_tool(json.loads(segment.text)) for segment in prompt.tools] or [
        vllm_tool(tool) for tool in given_tools or ()
    ]
    shaped = prompt
    token_sequence: tuple[int, ...] | None = None
    if align:
        shaped, report = align_static_prefix(
            prompt,
            tokenizer,
            block_size,
            max_pad_tokens=max_pad_tokens,
            tools=tools,
            chat_template_kwargs=template_kwargs,
        )
        token_sequence = report.token_ids
        if not report.aligned:
            warnings.warn(
                f"static prefix not aligned to {block_size}-token blocks: {report.reason}; "
                "its last partial block is recomputed on every request",
                PrefixkitWarning,
                stacklevel=2,
            )
        elif report.static_tokens < block_size:
            warnings.warn(
                f"the static prefix is {report.static_tokens} tokens, less than one "
                f"{block_size}-token block: vLLM caches whole blocks only",
                UncachedPrefixWarning,
                stacklevel=2,
            )
    messages = chat_messages(shaped)
    kwargs: dict[str, Any] = {"model": model}
    if token_ids:
        if token_sequence is None:
            token_sequence = tuple(
                tokenizer.chat_token_ids(
                    template_messages(messages),
                    tools=tools or None,
                    chat_template_kwargs=template_kwargs,
                )
            )
        kwargs["prompt"] = list(token_sequence)
    else:
        kwargs["messages"] = messages
        if given_tools is not None:
            kwargs["tools"] = given_tools
        elif tools:
            kwargs["tools"] = tools
    if template_kwargs is not None and not token_ids:
        extra_body["chat_template_kwargs"] = dict(template_kwargs)
    if salt is not None:
        extra_body["cache_salt"] = salt
    if extra_body:
        kwargs["extra_body"] = extra_body
    kwargs.update(request)
    if token_ids:
        return cast(VLLMCompletionRequest, kwargs)
    return cast(VLLMChatRequest, kwargs)
