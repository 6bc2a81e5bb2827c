"""A request's prompt token ids as vLLM 0.32 computes them, without asking the engine.

`PromptTokenizer.load(model_dir)` builds, once, what the engine builds from the same
model folder: the fast tokenizer and the chat template (through ``transformers``, which
vLLM calls for both). The template is rendered in the Jinja environment transformers
compiles it in, called directly rather than through ``apply_chat_template`` where a probe
conversation renders the same both ways, the sandbox's checks skipped only for a loop's
own attributes (``loop.first``, which the sandbox allows anyway). Texts are tokenized
piece by piece between special tokens, pieces seen before taken from a memo
(`token_segments`), so a conversation's next turn costs its new messages, not the whole
prompt. `PromptTokenizer.tokens(path, body)` then mirrors vLLM 0.32's
OpenAI and Anthropic front ends (``vllm/renderers/chat_utils.py``, ``renderers/hf.py``,
``renderers/online_renderer.py``, ``renderers/params.py``, the ``protocol.py`` of each
route, ``entrypoints/openai/responses/utils.py``, ``entrypoints/anthropic/serving.py``):

* ``/v1/completions``: one string prompt (tokenized with ``add_special_tokens``, default
  true) or one list of token ids (taken as given);
* ``/v1/chat/completions``: the messages parsed as vLLM parses text content (a string, or
  text parts joined with newlines for a ``"string"`` template, kept as parts for an
  ``"openai"`` one: `template_content`), assistant ``tool_calls`` (arguments decoded to
  objects), tool results, ``developer`` messages made ``system`` ones when the template
  does not know the role; the template applied with ``tools``, ``documents``,
  ``add_generation_prompt``, ``continue_final_message`` and the ``chat_template_kwargs``
  the template or ``apply_chat_template`` accepts; the text tokenized with
  ``add_special_tokens`` (default false);
* ``/v1/responses``: ``instructions`` and ``input`` (a string, or message, function-call
  and function-call-output items) turned into chat messages as vLLM does, function tools,
  ``add_generation_prompt`` (special tokens added);
* ``/v1/messages``: Anthropic's system, text, ``tool_use`` and ``tool_result`` blocks turned
  into chat messages as vLLM's converter does (inline system messages merged into the
  first when the template requires system-first ordering).

What it cannot reproduce exactly it answers with `Cannot` (a reason), never a guess: the
caller then asks the engine's ``/tokenize`` and counts it. That covers images and other
media, request-given chat templates, truncation, prompt embeddings, several prompts in
one completion, ``suffix``, reasoning settings, Responses history kept by the server
(``previous_response_id``, ``conversation``), Anthropic tools and thinking, and a body
the engine would refuse. A prompt longer than the engine's context is tokenized whole
(the engine refuses it).

The text-only parts of a request are what this module reads; everything else in a body
(sampling, streaming, ``cache_salt``) does not change the prompt's tokens.
"""

from __future__ import annotations

import copy
import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MethodType
from typing import Any

import jinja2
import jinja2.ext
import jinja2.meta
import jinja2.nodes
import jinja2.parser
import jinja2.runtime
import jinja2.sandbox

from .template_content import ContentFormat, content_format, developer_role_supported
from .token_segments import SegmentEncoder

__all__ = ["Cannot", "PromptTokenizer", "PromptTokens", "TokenizeOutcome"]


@dataclass(frozen=True)
class PromptTokens:
    """The engine's prompt token ids for a request, and the request's ``cache_salt``."""

    token_ids: list[int]
    cache_salt: str | None


@dataclass(frozen=True)
class Cannot:
    """This request (or model folder) is not one the router reproduces exactly: ask the
    engine's ``/tokenize``. `reason` says why, for the log and the fallback count."""

    reason: str


TokenizeOutcome = PromptTokens | Cannot

_Message = dict[str, Any]

# vLLM's text part types and the field each one's text is in
_TEXT_PARTS = {
    "text": "text",
    "input_text": "text",
    "output_text": "text",
    "refusal": "refusal",
    "thinking": "thinking",
}
_SKIPPED_WHEN_NONE = ("text", "refusal")
_BILLING_HEADER = "x-anthropic-billing-header"
# apply_chat_template's own arguments: vLLM takes them from the request, not from
# chat_template_kwargs (where a client could not override them the same way)
_RESERVED_KWARGS = frozenset(
    {"tools", "tokenize", "chat_template", "return_dict", "conversation", "documents"}
)
# the request fields that change the prompt and that this module does not reproduce
_CHAT_UNSUPPORTED = (
    "chat_template",
    "truncate_prompt_tokens",
    "prompt_embeds",
    "reasoning_effort",
    "kv_transfer_params",
    "mm_processor_kwargs",
)
_COMPLETION_UNSUPPORTED = (
    "suffix",
    "prompt_embeds",
    "truncate_prompt_tokens",
    "kv_transfer_params",
)
_RESPONSES_UNSUPPORTED = (
    "previous_response_id",
    "conversation",
    "previous_input_messages",
    "reasoning",
    "kv_transfer_params",
)
_MESSAGES_UNSUPPORTED = ("thinking", "output_config", "kv_transfer_params")


class _Refused(Exception):
    """Raised inside the mirror of vLLM's parsing; `tokens` answers it as `Cannot`."""


def _unsupported(body: Mapping[str, Any], fields: Sequence[str]) -> None:
    for name in fields:
        if body.get(name) not in (None, False):
            raise _Refused(f"the request sets {name!r}")


def _merge_kwargs(
    defaults: Mapping[str, Any] | None, overrides: Mapping[str, Any] | None
) -> dict[str, Any]:
    """vLLM's ``merge_kwargs``: `overrides` win unless None or ``"auto"``."""
    merged = dict(defaults or {})
    merged.update({k: v for k, v in (overrides or {}).items() if v is not None and v != "auto"})
    return merged


class PromptTokenizer:
    """The engine's prompt tokens for requests to one model (module docstring)."""

    def __init__(self, tokenizer: Any, model_dir: Path) -> None:
        self.model_dir = model_dir
        self._tokenizer = tokenizer
        self._encode = _fast_encoder(tokenizer)
        self._formats: dict[bool, tuple[str, ContentFormat]] = {}
        self._accepted_kwargs: dict[str, frozenset[str]] = {}
        self._merge_inline_system: bool | None = None
        self._direct: dict[str, jinja2.Template | None] = {}
        self._named = frozenset(_named_parameters(tokenizer.apply_chat_template))

    @classmethod
    def load(cls, model_dir: str | Path) -> PromptTokenizer | Cannot:
        """The tokenizer and chat template of the model in `model_dir` (the folder the
        engine loads), or `Cannot` saying why the router cannot reproduce them there."""
        folder = Path(model_dir)
        if not (folder / "tokenizer.json").is_file():
            return Cannot(f"{folder} has no tokenizer.json (a fast tokenizer) to load")
        for name in ("processor_config.json", "preprocessor_config.json", "chat_template.json"):
            if (folder / name).exists():  # vLLM would ask a multimodal processor first
                return Cannot(f"{folder} has {name}: a processor's chat template is not reproduced")
        try:
            from transformers import AutoTokenizer
        except ImportError:
            return Cannot("transformers is not installed: pip install 'prefixkit[hf]'")
        try:
            tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
        except (OSError, ValueError) as exc:
            return Cannot(f"cannot load the tokenizer in {folder}: {exc}")
        if not getattr(tokenizer, "is_fast", False):
            return Cannot(f"the tokenizer in {folder} is not a fast one")
        loaded = cls(tokenizer, folder)
        loaded._prepare()
        return loaded

    def _prepare(self) -> None:
        """Compile now what the first chat, Responses and Messages requests would: the chat
        template with and without tools, its direct render, the keyword arguments it
        accepts, whether inline system messages merge. A folder whose template refuses
        this (or that has none) is left to each request, which answers `Cannot`."""
        no_tools: list[dict[str, Any]] = []
        for tools in (None, no_tools):
            try:
                template, _form = self._template(tools)
                self._direct_template(template)
                self._accepted(template)
            except (LookupError, TypeError, ValueError, AttributeError, jinja2.TemplateError):
                return
        self._merges_inline_system()

    def tokens(self, path: str, body: Mapping[str, Any]) -> TokenizeOutcome:
        """The prompt token ids the engine computes for `body` sent to `path` (one of
        ``/v1/completions``, ``/v1/chat/completions``, ``/v1/responses``,
        ``/v1/messages``), or `Cannot`."""
        handler = self._routes.get(path)
        if handler is None:
            return Cannot(f"no prompt tokens for {path}")
        salt = body.get("cache_salt")
        try:
            ids = handler(self, body)
        except _Refused as refused:
            return Cannot(str(refused))
        except (LookupError, TypeError, ValueError, AttributeError, jinja2.TemplateError) as exc:
            # a body the engine would refuse or read otherwise, or a template that refuses it
            return Cannot(f"{type(exc).__name__}: {exc}")
        return PromptTokens(ids, salt if isinstance(salt, str) else None)

    # --- the routes ---

    def _completion(self, body: Mapping[str, Any]) -> list[int]:
        _unsupported(body, _COMPLETION_UNSUPPORTED)
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and not isinstance(prompt[0], int):
            prompt = prompt[0]  # one prompt in a list: the same request
        if isinstance(prompt, str):
            return self._encode(prompt, _flag(body, "add_special_tokens", True))
        if isinstance(prompt, list) and prompt and all(_is_token(t) for t in prompt):
            return list(prompt)
        raise _Refused("the prompt is not one string or one list of token ids")

    def _chat(self, body: Mapping[str, Any]) -> list[int]:
        _unsupported(body, _CHAT_UNSUPPORTED)
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise _Refused("no messages")
        add_generation = _flag(body, "add_generation_prompt", True)
        continue_final = _flag(body, "continue_final_message", False)
        if add_generation and continue_final:
            raise _Refused("the engine refuses add_generation_prompt with continue_final_message")
        # tool_choice does not change the prompt (the engine refuses what it cannot parse)
        tools = body.get("tools")
        tool_dicts = None if tools is None else [_chat_tool(tool) for tool in tools]
        extra = {
            "add_generation_prompt": add_generation,
            "continue_final_message": continue_final,
            "documents": body.get("documents"),
        }
        return self._render(
            messages,
            _merge_kwargs(_template_kwargs(body), extra),
            tool_dicts,
            _flag(body, "add_special_tokens", False),
        )

    def _responses(self, body: Mapping[str, Any]) -> list[int]:
        _unsupported(body, _RESPONSES_UNSUPPORTED)
        if body.get("truncation") not in (None, "disabled"):
            raise _Refused("the request sets truncation")
        messages: list[_Message] = []
        instructions = body.get("instructions")
        if instructions:
            messages.append({"role": "system", "content": instructions})
        items = body.get("input")
        if isinstance(items, str):
            messages.append({"role": "user", "content": items})
        elif isinstance(items, list):
            for item in items:
                _responses_item(item, messages)
            last = items[-1] if items else None
            if (
                isinstance(last, dict)
                and last.get("type", "message") in ("message", "reasoning")
                and last.get("status") in ("in_progress", "incomplete")
            ):
                raise _Refused("a partial last message (continued) is not reproduced")
        else:
            raise _Refused("input is neither a string nor a list of items")
        tools = body.get("tools") or None
        tool_dicts = None if tools is None else [_responses_tool(tool) for tool in tools]
        extra = {"add_generation_prompt": True, "continue_final_message": False}
        return self._render(
            messages, _merge_kwargs(_template_kwargs(body), extra), tool_dicts, True
        )

    def _messages(self, body: Mapping[str, Any]) -> list[int]:
        _unsupported(body, _MESSAGES_UNSUPPORTED)
        merge_inline = self._merges_inline_system()
        messages: list[_Message] = []
        system_parts: list[str] = []
        system = body.get("system")
        if isinstance(system, str):
            if system:
                system_parts.append(system)
        elif isinstance(system, list):
            for block in system:
                text = block.get("text") if block.get("type") == "text" else None
                if text and not text.startswith(_BILLING_HEADER):
                    system_parts.append(text)
        elif system is not None:
            raise _Refused("system is neither a string nor a list of blocks")
        anthropic_messages = body.get("messages")
        if not isinstance(anthropic_messages, list) or not anthropic_messages:
            raise _Refused("no messages")
        if merge_inline:
            for message in anthropic_messages:
                if message.get("role") == "system":
                    text = _anthropic_system_text(message)
                    if text:
                        system_parts.append(text)
        if system_parts:
            messages.append({"role": "system", "content": "".join(system_parts)})
        for message in anthropic_messages:
            _anthropic_message(message, messages, merge_inline)
        tools = body.get("tools")
        tool_dicts = None if tools is None else [_anthropic_tool(tool) for tool in tools]
        extra = {"add_generation_prompt": True, "continue_final_message": False}
        return self._render(
            messages, _merge_kwargs(_template_kwargs(body), extra), tool_dicts, False
        )

    _routes: Mapping[str, Callable[[PromptTokenizer, Mapping[str, Any]], list[int]]] = {
        "/v1/completions": _completion,
        "/v1/chat/completions": _chat,
        "/v1/responses": _responses,
        "/v1/messages": _messages,
    }

    # --- the chat template, as vLLM's HF renderer applies it ---

    def _template(self, tools: list[dict[str, Any]] | None) -> tuple[str, ContentFormat]:
        key = tools is None
        known = self._formats.get(key)
        if known is None:
            template = self._tokenizer.get_chat_template(None, tools=tools)
            known = (template, content_format(_jinja_environment(template), template))
            self._formats[key] = known
        return known

    def _render(
        self,
        messages: list[Any],
        request_kwargs: dict[str, Any],
        tools: list[dict[str, Any]] | None,
        add_special_tokens: bool,
    ) -> list[int]:
        template, form = self._template(tools)
        conversation = _conversation(messages, form)
        if any(m["role"] == "developer" for m in conversation) and not developer_role_supported(
            template
        ):
            conversation = _system_first([_developer_as_system(m) for m in conversation])
        kwargs = _merge_kwargs({"tools": tools, "tokenize": False}, request_kwargs)
        kwargs = _merge_kwargs(kwargs, {"return_dict": False})
        if kwargs.pop("tokenize", False):
            raise _Refused("chat_template_kwargs sets tokenize")
        tool_dicts = kwargs.pop("tools", None)
        accepted = self._accepted(template)
        resolved = {k: v for k, v in kwargs.items() if k in accepted}
        direct = self._direct_template(template)
        if direct is not None and _direct_applies(conversation, tool_dicts, resolved, self._named):
            # what apply_chat_template renders for these arguments (`_direct_template`)
            documents = resolved.pop("documents", None)
            generation = resolved.pop("add_generation_prompt", False)
            resolved.pop("continue_final_message", None)
            resolved.pop("return_dict", None)
            text = self._render_direct(
                direct, conversation, tool_dicts, documents, generation, resolved
            )
        else:
            text = self._tokenizer.apply_chat_template(
                conversation=conversation,
                tools=tool_dicts,
                chat_template=template,
                tokenize=False,
                **resolved,
            )
        return self._encode(text, add_special_tokens)

    def _direct_template(self, template: str) -> jinja2.Template | None:
        """The chat template compiled in transformers' own environment for it, with the
        sandbox's checks skipped only for a loop's public attributes (``loop.first``,
        which the sandbox allows anyway: its checks took about a third of a render), or None
        when rendering it directly does not give what ``apply_chat_template`` gives on
        a probe conversation or the tokenizer renders in a way of its own (then every
        request goes through transformers)."""
        if template in self._direct:
            return self._direct[template]
        from transformers.tokenization_utils_base import PreTrainedTokenizerBase

        if (
            type(self._tokenizer).apply_chat_template
            is not PreTrainedTokenizerBase.apply_chat_template
        ):
            self._direct[template] = None  # a tokenizer with a render of its own
            return None
        environment = _jinja_environment(template).overlay()
        environment.getattr = MethodType(_loop_attributes_first, environment)
        compiled = environment.from_string(template)
        direct: jinja2.Template | None = compiled
        for generation in (True, False):
            try:
                expected = self._tokenizer.apply_chat_template(
                    conversation=_DIRECT_PROBE,
                    chat_template=template,
                    tokenize=False,
                    add_generation_prompt=generation,
                )
                rendered = self._render_direct(compiled, _DIRECT_PROBE, None, None, generation, {})
            except (LookupError, TypeError, ValueError, AttributeError, jinja2.TemplateError):
                # a template that refuses the probe: no direct path
                direct = None
                break
            if rendered != expected:
                direct = None
                break
        self._direct[template] = direct
        return direct

    def _render_direct(
        self,
        compiled: jinja2.Template,
        messages: Sequence[Any],
        tools: list[dict[str, Any]] | None,
        documents: Any,
        generation: bool,
        kwargs: Mapping[str, Any],
    ) -> str:
        """What ``apply_chat_template`` renders for these arguments, by `compiled`."""
        return compiled.render(
            messages=messages,
            tools=tools,
            documents=documents,
            add_generation_prompt=generation,
            **{**self._tokenizer.special_tokens_map, **kwargs},
        )

    def _accepted(self, template: str) -> frozenset[str]:
        """vLLM's ``resolve_chat_template_kwargs``: the kwargs `apply_chat_template`
        names, the template's free variables and the base class's arguments."""
        known = self._accepted_kwargs.get(template)
        if known is None:
            from transformers import PythonBackend

            named = _named_parameters(self._tokenizer.apply_chat_template)
            base = _named_parameters(PythonBackend.apply_chat_template)
            variables = jinja2.meta.find_undeclared_variables(_kwargs_environment().parse(template))
            known = frozenset((named | base | variables) - {"chat_template", "tokenize"})
            self._accepted_kwargs[template] = known
        return known

    def _merges_inline_system(self) -> bool:
        """vLLM's Anthropic front end merges inline system messages into the first one
        when a [system, user, system, user] conversation does not render."""
        if self._merge_inline_system is None:
            merge = False
            variants: tuple[list[Any] | None, ...] = (None, [])
            for tools in variants:
                template = self._tokenizer.get_chat_template(None, tools=tools)
                try:
                    jinja2.sandbox.ImmutableSandboxedEnvironment(
                        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols]
                    ).from_string(template).render(
                        messages=[
                            {"role": "system", "content": "t"},
                            {"role": "user", "content": "t"},
                            {"role": "system", "content": "t"},
                            {"role": "user", "content": "t"},
                        ],
                        add_generation_prompt=False,
                    )
                except jinja2.TemplateError:
                    merge = True
            self._merge_inline_system = merge
        return self._merge_inline_system


def _flag(body: Mapping[str, Any], name: str, default: bool) -> bool:
    value = body.get(name, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise _Refused(f"{name} is not a boolean")
    return value


def _is_token(value: object) -> bool:
    """A token id a block hash holds (an engine refuses an id beyond its vocabulary)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 64


def _template_kwargs(body: Mapping[str, Any]) -> dict[str, Any]:
    kwargs = body.get("chat_template_kwargs") or {}
    if not isinstance(kwargs, dict):
        raise _Refused("chat_template_kwargs is not an object")
    reserved = _RESERVED_KWARGS & kwargs.keys()
    if reserved:
        raise _Refused(f"chat_template_kwargs sets {sorted(reserved)}")
    if any(value is None or value == "auto" for value in kwargs.values()):
        # vLLM drops these on one route and keeps them on another
        raise _Refused("chat_template_kwargs holds a None or 'auto' value")
    return dict(kwargs)


def _named_parameters(function: Callable[..., Any]) -> set[str]:
    return {
        p.name
        for p in inspect.signature(function).parameters.values()
        if p.kind not in (inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL)
    }


def _jinja_environment(template: str) -> Any:
    from transformers.utils.chat_template_utils import _compile_jinja_template

    return _compile_jinja_template(template).environment


class _GenerationTag(jinja2.ext.Extension):
    """Parses transformers' ``{% generation %}`` block (vLLM's ``AssistantTracker``)."""

    tags = {"generation"}  # noqa: RUF012 - jinja2's own class attribute

    def parse(self, parser: jinja2.parser.Parser) -> jinja2.nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        call = self.call_method("_generation_support")
        return jinja2.nodes.CallBlock(call, [], [], body).set_lineno(lineno)


def _kwargs_environment() -> jinja2.Environment:
    """The environment vLLM finds a template's variables with."""
    return jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[_GenerationTag, jinja2.ext.loopcontrols]
    )


# a loop's public attributes, which the sandbox allows (none starts with "_", a loop is
# not a function, type, frame or known mutable container)
_LOOP_ATTRIBUTES = frozenset(
    {
        "first",
        "last",
        "index",
        "index0",
        "length",
        "revindex",
        "revindex0",
        "previtem",
        "nextitem",
        "depth",
        "depth0",
        "cycle",
        "changed",
    }
)
# apply_chat_template's own arguments that the direct render reproduces; with any other
# (padding, return_assistant_tokens_mask, ...) the request goes through transformers
_DIRECT_ARGUMENTS = frozenset(
    {"add_generation_prompt", "continue_final_message", "documents", "return_dict"}
)
_DIRECT_PROBE = [
    {"role": "system", "content": "Be kind."},
    {"role": "user", "content": "Hi <there>"},
    {"role": "assistant", "content": "Hello & welcome."},
    {"role": "user", "content": "Thanks"},
]


def _loop_attributes_first(
    environment: jinja2.sandbox.SandboxedEnvironment, obj: Any, attribute: str
) -> Any:
    """The sandbox's ``getattr``, answering a loop's public attributes directly."""
    if type(obj) is jinja2.runtime.LoopContext and attribute in _LOOP_ATTRIBUTES:
        return getattr(obj, attribute)
    return type(environment).getattr(environment, obj, attribute)


def _direct_applies(
    conversation: list[_Message],
    tools: list[dict[str, Any]] | None,
    resolved: Mapping[str, Any],
    named: frozenset[str],
) -> bool:
    """Whether ``apply_chat_template`` would render these arguments as one plain
    ``render`` call (no final message continued, no batch, no tool given as a function,
    no other argument of its own)."""
    documents = resolved.get("documents")
    return (
        bool(conversation)
        and not resolved.get("continue_final_message")
        and (tools is None or all(isinstance(tool, dict) for tool in tools))
        and (documents is None or all(isinstance(d, dict) for d in documents))
        and not (named & resolved.keys()) - _DIRECT_ARGUMENTS
    )


def _fast_encoder(tokenizer: Any) -> Callable[[str, bool], list[int]]:
    """``tokenizer(text, add_special_tokens=...)["input_ids"]`` (what vLLM calls), through
    the Rust tokenizer behind it when the two agree on probes: piece by piece between
    special tokens, remembering pieces seen before (`token_segments`), where that is
    exact for this tokenizer; else whole texts without transformers' per-call work."""
    backend = getattr(tokenizer, "_tokenizer", None)

    def through_transformers(text: str, add_special_tokens: bool) -> list[int]:
        return list(tokenizer(text, add_special_tokens=add_special_tokens)["input_ids"])

    if backend is None:
        return through_transformers

    def whole(text: str, add_special_tokens: bool) -> list[int]:
        return list(backend.encode(text, add_special_tokens=add_special_tokens).ids)

    segments = SegmentEncoder.build(backend)
    fast = whole if segments is None else segments.encode
    probe = "Hello, world!  <|im_start|> 123\n\tx <s></s> \u00e9\u4e2d"
    for special in (True, False):
        if fast(probe, special) != through_transformers(probe, special):
            return through_transformers
    return fast


# --- chat messages, as vLLM's chat_utils parses text content ---


def _conversation(messages: list[Any], form: ContentFormat) -> list[_Message]:
    conversation = [_parsed_message(message, form) for message in messages]
    for message in conversation:
        _decode_tool_calls(message)
    return conversation


def _parsed_message(message: Any, form: ContentFormat) -> _Message:
    if not isinstance(message, dict) or not isinstance(message.get("role"), str):
        raise _Refused("a message without a role")
    role = message["role"]
    content = message.get("content")
    if content is None:
        parts: list[Any] = []
    elif isinstance(content, str):
        parts = [{"type": "text", "text": content}]
    elif isinstance(content, list):
        parts = content
    else:
        raise _Refused("message content is neither text nor a list of parts")
    parsed: _Message = {"role": role}
    if (
        form == "string"
        and isinstance(content, str)
        and not (role == "system" and content.startswith(_BILLING_HEADER))
    ):
        parsed["content"] = content  # what one text part joins to (empty or not)
    else:
        if role == "system":
            parts = _without_billing_header(parts)
        texts = [text for part in parts if (text := _part_text(part, form)) is not None]
        parsed["content"] = texts if form == "openai" else "\n".join(texts)
    if role == "assistant":
        if message.get("tool_calls") is not None:
            parsed["tool_calls"] = [_tool_call(call) for call in message["tool_calls"]]
        if message.get("reasoning") is not None:
            parsed["reasoning"] = parsed["reasoning_content"] = message["reasoning"]
    elif role == "tool":
        if "tool_call_id" in message:
            parsed["tool_call_id"] = message["tool_call_id"]
        if isinstance(parsed["content"], list):
            parsed["content"] = "\n".join(p["text"] for p in parsed["content"])
    if isinstance(message.get("name"), str):
        parsed["name"] = message["name"]
    if isinstance(message.get("task"), str):
        parsed["task"] = message["task"]
    if role == "developer":
        parsed["tools"] = message.get("tools")
    return parsed


def _part_text(part: Any, form: ContentFormat) -> Any:
    """A text part as the conversation holds it (None: dropped), or `_Refused`."""
    if isinstance(part, str):
        return {"type": "text", "text": part} if form == "openai" else part or None
    if not isinstance(part, dict) or "uuid" in part:
        raise _Refused("a content part that is not plain text")
    kind = part.get("type")
    field = _TEXT_PARTS.get(kind) if isinstance(kind, str) else None
    if field is None:
        raise _Refused(f"a {kind!r} content part (only text is reproduced)")
    text = part.get(field)
    if text is None and kind in _SKIPPED_WHEN_NONE:
        return None
    if not isinstance(text, str):
        raise _Refused(f"a {kind!r} part whose {field} is not text")
    if form == "openai":
        if set(part) - {"type", field}:
            raise _Refused("a text part with extra fields")
        return {"type": "text", "text": text}
    return text or None  # vLLM drops empty strings when it joins parts


def _without_billing_header(parts: list[Any]) -> list[Any]:
    """vLLM drops Claude Code's attribution line from system text parts."""
    kept: list[Any] = []
    for part in parts:
        text = (
            part
            if isinstance(part, str)
            else (
                part.get("text") if isinstance(part, dict) and part.get("type") == "text" else None
            )
        )
        if not (isinstance(text, str) and text.startswith(_BILLING_HEADER)):
            kept.append(part)
            continue
        rest = text.partition("\n")[2]
        if rest:
            kept.append(rest if isinstance(part, str) else {**part, "text": rest})
    return kept


def _tool_call(call: Any) -> dict[str, Any]:
    if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
        raise _Refused("a tool call without a function")
    if call.get("type", "function") != "function":
        raise _Refused("a tool call of a type other than function")
    function = call["function"]
    kept: dict[str, Any] = {k: call[k] for k in ("id", "type") if k in call}
    kept["function"] = {k: function[k] for k in ("name", "arguments") if k in function}
    return kept


def _decode_tool_calls(message: _Message) -> None:
    """vLLM gives templates a tool call's arguments as an object ({} when not one)."""
    calls = message.get("tool_calls")
    if message["role"] != "assistant" or not isinstance(calls, list):
        return
    if not calls:
        del message["tool_calls"]
        return
    for call in calls:
        function = call["function"]
        arguments = function.get("arguments")
        if not arguments:
            function["arguments"] = {}
            continue
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except json.JSONDecodeError:
                arguments = None
        function["arguments"] = arguments if isinstance(arguments, dict) else {}


def _developer_as_system(message: _Message) -> _Message:
    if message["role"] != "developer":
        return message
    converted = {**message, "role": "system"}
    converted.pop("tools", None)
    return converted


def _system_first(conversation: list[_Message]) -> list[_Message]:
    """vLLM merges every system message into one at the start (after making developer
    messages system ones), when one is not already alone there."""
    contents: list[str] = []
    others: list[_Message] = []
    consolidate = False
    for index, message in enumerate(conversation):
        if message["role"] != "system":
            others.append(message)
            continue
        if index > 0 or contents:
            consolidate = True
        content = message.get("content", "")
        if isinstance(content, list):
            content = "\n".join(
                p["text"] if isinstance(p, dict) else p
                for p in content
                if isinstance(p, str) or (isinstance(p, dict) and "text" in p)
            )
        if content:
            contents.append(content)
    if not consolidate:
        return conversation
    return [{"role": "system", "content": "\n\n".join(contents)}, *others]


def _chat_tool(tool: Any) -> dict[str, Any]:
    """A tool as vLLM's ``ChatCompletionToolsParam.model_dump()`` gives it to templates."""
    if not isinstance(tool, dict) or tool.get("type", "function") != "function":
        raise _Refused("a tool that is not a function")
    function = tool.get("function")
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise _Refused("a function tool without a name")
    defer = tool.get("defer_loading")
    return {"type": "function", "function": _function_definition(function, defer)}


def _function_definition(function: Mapping[str, Any], defer: object = None) -> dict[str, Any]:
    dumped: dict[str, Any] = {
        "name": function["name"],
        "description": function.get("description"),
        "parameters": function.get("parameters"),
    }
    if function.get("strict") is not None:
        dumped["strict"] = function["strict"]
    deferred = function.get("defer_loading")
    if deferred is None:
        deferred = defer
    if deferred is not None:
        dumped["defer_loading"] = deferred
    return dumped


def _responses_tool(tool: Any) -> dict[str, Any]:
    if not isinstance(tool, dict) or tool.get("type") != "function":
        raise _Refused("a Responses tool that is not a function")
    if not isinstance(tool.get("name"), str):
        raise _Refused("a function tool without a name")
    return {"type": "function", "function": _function_definition(tool)}


def _anthropic_tool(tool: Any) -> dict[str, Any]:
    """An Anthropic tool as vLLM's converter hands it to the template."""
    if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
        raise _Refused("an Anthropic tool without a name")
    if tool.get("type") not in (None, "custom"):
        raise _Refused(f"a {tool.get('type')!r} Anthropic tool (a server tool)")
    function = {
        "name": tool["name"],
        "description": tool.get("description"),
        "parameters": tool.get("input_schema"),
        "strict": tool.get("strict"),
        "defer_loading": tool.get("defer_loading"),
    }
    return {"type": "function", "function": _function_definition(function)}


# --- Responses input items, as vLLM's construct_input_messages reads them ---


def _responses_item(item: Any, messages: list[_Message]) -> None:
    if not isinstance(item, dict):
        raise _Refused("an input item that is not an object")
    previous = messages[-1] if messages and messages[-1].get("role") == "assistant" else None
    kind = item.get("type")
    if kind == "function_call":
        if item.get("namespace"):
            raise _Refused("a namespaced function call")
        call = {
            "id": item["call_id"],
            "function": {"name": item["name"], "arguments": item["arguments"]},
            "type": "function",
        }
        if previous is not None and isinstance(previous.get("tool_calls"), list):
            previous["tool_calls"].append(call)
        elif previous is not None and previous.get("tool_calls") is None:
            previous["tool_calls"] = [call]
        else:
            messages.append({"role": "assistant", "tool_calls": [call]})
        return
    if kind == "function_call_output":
        output = item.get("output")
        if not isinstance(output, str):
            raise _Refused("a function call output that is not text")
        messages.append({"role": "tool", "content": output, "tool_call_id": item.get("call_id")})
        return
    if kind not in (None, "message") or "role" not in item:
        raise _Refused(f"a {kind!r} input item")
    if item["role"] == "assistant":
        content = item.get("content")
        text: str | None = None
        if isinstance(content, str):
            text = content
        elif isinstance(content, list) and content and isinstance(content[0], dict):
            text = content[0].get("text")
        if text is None:
            raise _Refused("an assistant item without text")
        if previous is not None and previous.get("content") is None:
            previous["content"] = text
        else:
            messages.append({"role": "assistant", "content": text})
        return
    messages.append(copy.deepcopy(item))


# --- Anthropic messages, as vLLM's Messages front end converts them ---


def _anthropic_system_text(message: Mapping[str, Any]) -> str | None:
    content = message.get("content")
    if isinstance(content, str):
        return None if content.startswith(_BILLING_HEADER) else content
    parts = [
        block["text"]
        for block in content or []
        if block.get("type") == "text"
        and block.get("text")
        and not block["text"].startswith(_BILLING_HEADER)
    ]
    return "".join(parts) if parts else None


def _anthropic_message(message: Any, messages: list[_Message], merge_inline: bool) -> None:
    if not isinstance(message, dict) or not isinstance(message.get("role"), str):
        raise _Refused("a message without a role")
    role = message["role"]
    if role == "system":
        text = None if merge_inline else _anthropic_system_text(message)
        if text:
            messages.append({"role": "system", "content": text})
        return
    converted: _Message = {"role": role}
    content = message.get("content")
    if isinstance(content, str):
        converted["content"] = content
    elif isinstance(content, list):
        parts: list[dict[str, Any]] = []
        calls: list[dict[str, Any]] = []
        reasoning: list[str] = []
        for block in content:
            _anthropic_block(block, role, parts, calls, reasoning, messages)
        if reasoning:
            converted["reasoning"] = "".join(reasoning)
        if calls:
            converted["tool_calls"] = calls
        if parts:
            one_text = len(parts) == 1 and parts[0]["type"] == "text"
            converted["content"] = parts[0]["text"] if one_text else parts
    else:
        raise _Refused("message content is neither text nor a list of blocks")
    if not (role == "user" and "content" not in converted):
        messages.append(converted)


def _anthropic_block(
    block: Any,
    role: str,
    parts: list[dict[str, Any]],
    calls: list[dict[str, Any]],
    reasoning: list[str],
    messages: list[_Message],
) -> None:
    if not isinstance(block, dict):
        raise _Refused("a content block that is not an object")
    kind = block.get("type")
    if kind == "text":
        if block.get("text"):
            parts.append({"type": "text", "text": block["text"]})
    elif kind == "thinking":
        if block.get("thinking") is not None:
            reasoning.append(block["thinking"])
    elif kind in ("redacted_thinking", "tool_reference"):
        pass
    elif kind in ("tool_addition", "tool_removal"):
        raise _Refused(f"a {kind} block (changes the tools in effect)")
    elif kind == "tool_use":
        if not block.get("id"):
            raise _Refused("a tool_use block without an id (the engine makes one from the clock)")
        calls.append(
            {
                "id": block["id"],
                "type": "function",
                "function": {
                    "name": block.get("name") or "",
                    "arguments": json.dumps(block.get("input") or {}),
                },
            }
        )
    elif kind == "tool_result":
        result = block.get("content")
        if role != "user":
            if not (isinstance(result, str) or result is None):
                raise _Refused("an assistant's tool_result whose content is not text")
            parts.append({"type": "text", "text": f"Tool result: {result or ''}"})
            return
        if isinstance(result, list):
            if any(not isinstance(i, dict) or i.get("type") != "text" for i in result):
                raise _Refused("a tool_result with blocks other than text")
            text = "\n".join(i.get("text", "") for i in result)
        elif isinstance(result, str) or result is None:
            text = result or ""
        else:
            raise _Refused("a tool_result whose content is not text")
        messages.append(
            {"role": "tool", "tool_call_id": block.get("tool_use_id") or "", "content": text}
        )
    else:
        raise _Refused(f"a {kind!r} content block (only text and tools are reproduced)")
