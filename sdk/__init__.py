"""prefixkit.sdk: static-first prompts, cache breakpoints and cache statistics.

The public surface is re-exported here; modules are private to the package.
Each name is imported on first use (`from prefixkit.sdk import Prompt` imports
the modules `Prompt` needs, not the whole SDK), so importing one module such as
`prefixkit.sdk.errors` stays cheap; heavy dependencies (tokenizers, provider
clients) are imported lazily too.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .agent_loop import LoopResult, LoopTurn, run_tool_loop
    from .alignment import AlignmentReport, align_static_prefix, chat_messages
    from .break_even import BreakEven, TTLChoice, break_even, choose_ttl
    from .cache_stats import CacheStats
    from .canonical import canonical_json, canonical_text, sha256_hex
    from .clients import (
        AnthropicClient,
        AsyncAnthropicClient,
        AsyncOpenAIClient,
        AsyncVLLMClient,
        OpenAIClient,
        StreamResult,
        VLLMClient,
    )
    from .content import Document, Image, Native, Text, ToolCall, ToolResult
    from .drift_guard import DriftGuard, default_guard
    from .errors import (
        AlignmentError,
        CanonicalError,
        LayoutError,
        LockfileError,
        MissingExtraError,
        PrefixkitError,
        PrefixkitWarning,
        PromptDriftError,
        PromptNotFoundError,
        RenderError,
        SaltError,
        StaticPrefixChangedError,
        StaticPrefixChangedWarning,
        TokenizerError,
        UncachedPrefixWarning,
        UnknownModelWarning,
    )
    from .model_facts import LongPromptPricing, ModelInfo, Pricing, known_models, model_info
    from .prompt import Prompt
    from .registry import Drift, PromptRegistry, check_prompt_files, read_lock, write_lock
    from .render_anthropic import render_anthropic
    from .render_openai import prompt_cache_key, render_openai_chat, render_openai_responses
    from .render_vllm import render_vllm
    from .salt import tenant_salt
    from .segment import Segment, Stability
    from .tokenizer import (
        AnthropicTokenCounter,
        HFTokenizer,
        TiktokenTokenizer,
        TokenCount,
        Tokenizer,
    )

__all__ = [
    "AlignmentError",
    "AlignmentReport",
    "AnthropicClient",
    "AnthropicTokenCounter",
    "AsyncAnthropicClient",
    "AsyncOpenAIClient",
    "AsyncVLLMClient",
    "BreakEven",
    "CacheStats",
    "CanonicalError",
    "Document",
    "Drift",
    "DriftGuard",
    "HFTokenizer",
    "Image",
    "LayoutError",
    "LockfileError",
    "LongPromptPricing",
    "LoopResult",
    "LoopTurn",
    "MissingExtraError",
    "ModelInfo",
    "Native",
    "OpenAIClient",
    "PrefixkitError",
    "PrefixkitWarning",
    "Pricing",
    "Prompt",
    "PromptDriftError",
    "PromptNotFoundError",
    "PromptRegistry",
    "RenderError",
    "SaltError",
    "Segment",
    "Stability",
    "StaticPrefixChangedError",
    "StaticPrefixChangedWarning",
    "StreamResult",
    "TTLChoice",
    "Text",
    "TiktokenTokenizer",
    "TokenCount",
    "Tokenizer",
    "TokenizerError",
    "ToolCall",
    "ToolResult",
    "UncachedPrefixWarning",
    "UnknownModelWarning",
    "VLLMClient",
    "align_static_prefix",
    "break_even",
    "canonical_json",
    "canonical_text",
    "chat_messages",
    "check_prompt_files",
    "choose_ttl",
    "default_guard",
    "known_models",
    "model_info",
    "prompt_cache_key",
    "read_lock",
    "render_anthropic",
    "render_openai_chat",
    "render_openai_responses",
    "render_vllm",
    "run_tool_loop",
    "sha256_hex",
    "tenant_salt",
    "write_lock",
]

# public name -> the module (of this package) that defines it
_MODULES: dict[str, str] = {
    "AlignmentError": "errors",
    "AlignmentReport": "alignment",
    "AnthropicClient": "clients",
    "AnthropicTokenCounter": "tokenizer",
    "AsyncAnthropicClient": "clients",
    "AsyncOpenAIClient": "clients",
    "AsyncVLLMClient": "clients",
    "BreakEven": "break_even",
    "CacheStats": "cache_stats",
    "CanonicalError": "errors",
    "Document": "content",
    "Drift": "registry",
    "DriftGuard": "drift_guard",
    "HFTokenizer": "tokenizer",
    "Image": "content",
    "LayoutError": "errors",
    "LockfileError": "errors",
    "LongPromptPricing": "model_facts",
    "LoopResult": "agent_loop",
    "LoopTurn": "agent_loop",
    "MissingExtraError": "errors",
    "ModelInfo": "model_facts",
    "Native": "content",
    "OpenAIClient": "clients",
    "PrefixkitError": "errors",
    "PrefixkitWarning": "errors",
    "Pricing": "model_facts",
    "Prompt": "prompt",
    "PromptDriftError": "errors",
    "PromptNotFoundError": "errors",
    "PromptRegistry": "registry",
    "RenderError": "errors",
    "SaltError": "errors",
    "Segment": "segment",
    "Stability": "segment",
    "StaticPrefixChangedError": "errors",
    "StaticPrefixChangedWarning": "errors",
    "StreamResult": "clients",
    "TTLChoice": "break_even",
    "Text": "content",
    "TiktokenTokenizer": "tokenizer",
    "TokenCount": "tokenizer",
    "Tokenizer": "tokenizer",
    "TokenizerError": "errors",
    "ToolCall": "content",
    "ToolResult": "content",
    "UncachedPrefixWarning": "errors",
    "UnknownModelWarning": "errors",
    "VLLMClient": "clients",
    "align_static_prefix": "alignment",
    "break_even": "break_even",
    "canonical_json": "canonical",
    "canonical_text": "canonical",
    "chat_messages": "alignment",
    "check_prompt_files": "registry",
    "choose_ttl": "break_even",
    "default_guard": "drift_guard",
    "known_models": "model_facts",
    "model_info": "model_facts",
    "prompt_cache_key": "render_openai",
    "read_lock": "registry",
    "render_anthropic": "render_anthropic",
    "render_openai_chat": "render_openai",
    "render_openai_responses": "render_openai",
    "render_vllm": "render_vllm",
    "run_tool_loop": "agent_loop",
    "sha256_hex": "canonical",
    "tenant_salt": "salt",
    "write_lock": "registry",
}


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use (PEP 562)."""
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


class _Package(ModuleType):
    """This package: importing a submodule named like a public function
    (`render_anthropic`, `render_vllm`, `break_even`) does not bind the module
    over the function."""

    def __setattr__(self, name: str, value: object) -> None:
        if name in _MODULES and isinstance(value, ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
