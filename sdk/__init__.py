"""prefixkit.sdk: static-first prompts, cache breakpoints and cache statistics.

The public surface is re-exported here; modules are private to the package.
Heavy dependencies (tokenizers, provider clients) are imported lazily.
"""

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
