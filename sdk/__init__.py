"""prefixkit.sdk: static-first prompts, cache breakpoints and cache statistics.

The public surface of the SDK is this package: the names in its `__all__`. Every
module in it (`prefixkit.sdk.prompt`, `prefixkit.sdk.vllm_request`, ...) is internal
and may change without notice; application code and the other parts of prefixkit
(`prefixkit.linter`, `prefixkit.engine_adapter`, `prefixkit.cli`, `prefixkit.testing`)
import from `prefixkit.sdk` alone. The one exception is the two mechanisms the parts build
their doors and renamed names with, `prefixkit.sdk.exports` (`lazy_exports`) and
`prefixkit.sdk.deprecation` (`renamed_names`), which the other parts import directly.

Each name is imported on first use (`from prefixkit.sdk import Prompt` imports the
modules `Prompt` needs, not the whole SDK; see `exports.py`), so importing the
package stays cheap; heavy dependencies (tokenizers, provider clients) are imported
lazily too. Renamed names keep a deprecated alias until the next minor version
(`deprecation.py`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .deprecation import renamed_names
from .exports import lazy_exports

if TYPE_CHECKING:
    from .agent_loop import LoopResult as LoopResult
    from .agent_loop import LoopTurn as LoopTurn
    from .agent_loop import arun_tool_loop as arun_tool_loop
    from .agent_loop import run_tool_loop as run_tool_loop
    from .alignment import AlignmentReport as AlignmentReport
    from .alignment import align_static_prefix as align_static_prefix
    from .alignment import chat_messages as chat_messages
    from .anthropic_request import AnthropicBatchRequest as AnthropicBatchRequest
    from .anthropic_request import AnthropicBetaRequest as AnthropicBetaRequest
    from .anthropic_request import AnthropicRequest as AnthropicRequest
    from .anthropic_request import AnthropicTTL as AnthropicTTL
    from .anthropic_request import PrefixBody as PrefixBody
    from .anthropic_request import cacheable_prefixes as cacheable_prefixes
    from .anthropic_request import render_anthropic as render_anthropic
    from .anthropic_request import render_anthropic_batch as render_anthropic_batch
    from .anthropic_request import render_anthropic_beta as render_anthropic_beta
    from .anthropic_token_counter import AnthropicTokenCounter as AnthropicTokenCounter
    from .block_hash import DEFAULT_NONE_HASH_SEED as DEFAULT_NONE_HASH_SEED
    from .block_hash import HashAlgo as HashAlgo
    from .block_hash import PrefixHashMemo as PrefixHashMemo
    from .block_hash import VllmVersion as VllmVersion
    from .block_hash import block_hashes as block_hashes
    from .block_hash import event_block_hash as event_block_hash
    from .block_hash import event_block_hashes as event_block_hashes
    from .block_hash import hash_block as hash_block
    from .block_hash import none_hash as none_hash
    from .block_hash import none_hash_seed as none_hash_seed
    from .block_hash import salt_extra_keys as salt_extra_keys
    from .block_hash import vllm_version_of as vllm_version_of
    from .cache_miss import CacheMiss as CacheMiss
    from .cache_miss import MissReason as MissReason
    from .cache_payoff import BreakEven as BreakEven
    from .cache_payoff import TTLChoice as TTLChoice
    from .cache_payoff import break_even as break_even
    from .cache_payoff import choose_ttl as choose_ttl
    from .cache_stats import CacheStats as CacheStats
    from .canonical import canonical_json as canonical_json
    from .canonical import canonical_text as canonical_text
    from .canonical import sha256_hex as sha256_hex
    from .clients import AnthropicClient as AnthropicClient
    from .clients import AsyncAnthropicClient as AsyncAnthropicClient
    from .clients import AsyncOpenAIClient as AsyncOpenAIClient
    from .clients import AsyncVLLMClient as AsyncVLLMClient
    from .clients import OpenAIClient as OpenAIClient
    from .clients import StreamResult as StreamResult
    from .clients import VLLMClient as VLLMClient
    from .content import Document as Document
    from .content import Image as Image
    from .content import Native as Native
    from .content import Text as Text
    from .content import ToolCall as ToolCall
    from .content import ToolResult as ToolResult
    from .drift import Drift as Drift
    from .errors import AlignmentError as AlignmentError
    from .errors import CanonicalError as CanonicalError
    from .errors import HitRateWarning as HitRateWarning
    from .errors import LayoutError as LayoutError
    from .errors import LockfileError as LockfileError
    from .errors import MissingExtraError as MissingExtraError
    from .errors import PrefixkitDeprecationWarning as PrefixkitDeprecationWarning
    from .errors import PrefixkitError as PrefixkitError
    from .errors import PrefixkitWarning as PrefixkitWarning
    from .errors import PromptDriftError as PromptDriftError
    from .errors import PromptNotFoundError as PromptNotFoundError
    from .errors import RenderError as RenderError
    from .errors import SaltError as SaltError
    from .errors import StaticPrefixChangedError as StaticPrefixChangedError
    from .errors import StaticPrefixChangedWarning as StaticPrefixChangedWarning
    from .errors import TokenizerError as TokenizerError
    from .errors import UncachedPrefixWarning as UncachedPrefixWarning
    from .errors import UnknownModelWarning as UnknownModelWarning
    from .errors import UsageError as UsageError
    from .extras import require_extra as require_extra
    from .hit_rate import HitRateAlert as HitRateAlert
    from .hit_rate import HitRateMonitor as HitRateMonitor
    from .model_facts import LongPromptPricing as LongPromptPricing
    from .model_facts import ModelInfo as ModelInfo
    from .model_facts import Pricing as Pricing
    from .model_facts import ProviderLimits as ProviderLimits
    from .model_facts import known_models as known_models
    from .model_facts import model_info as model_info
    from .model_facts import provider_limits as provider_limits
    from .openai_request import CacheMode as CacheMode
    from .openai_request import ChatRequest as ChatRequest
    from .openai_request import ResponsesRequest as ResponsesRequest
    from .openai_request import prompt_cache_key as prompt_cache_key
    from .openai_request import render_openai_chat as render_openai_chat
    from .openai_request import render_openai_responses as render_openai_responses
    from .prompt import Prompt as Prompt
    from .registry import PROMPT_SUFFIXES as PROMPT_SUFFIXES
    from .registry import Lock as Lock
    from .registry import LockEntry as LockEntry
    from .registry import LockUpdate as LockUpdate
    from .registry import PromptRegistry as PromptRegistry
    from .registry import check_prompt_files as check_prompt_files
    from .registry import default_lock_path as default_lock_path
    from .registry import read_lock as read_lock
    from .registry import write_lock as write_lock
    from .salt import salt_secret as salt_secret
    from .salt import tenant_salt as tenant_salt
    from .segment import Role as Role
    from .segment import Segment as Segment
    from .segment import Stability as Stability
    from .static_prefix_guard import GuardMode as GuardMode
    from .static_prefix_guard import MissProvider as MissProvider
    from .static_prefix_guard import StaticPrefixGuard as StaticPrefixGuard
    from .static_prefix_guard import default_guard as default_guard
    from .telemetry import instrument as instrument
    from .telemetry import uninstrument as uninstrument
    from .tokenizer import HFTokenizer as HFTokenizer
    from .tokenizer import TiktokenTokenizer as TiktokenTokenizer
    from .tokenizer import TokenCount as TokenCount
    from .tokenizer import Tokenizer as Tokenizer
    from .vllm_request import VLLMChatRequest as VLLMChatRequest
    from .vllm_request import VLLMCompletionRequest as VLLMCompletionRequest
    from .vllm_request import render_vllm as render_vllm
    from .vllm_request import vllm_tool as vllm_tool

# public name -> the module (of this package) that defines it
_EXPORTS: dict[str, str] = {
    "DEFAULT_NONE_HASH_SEED": "block_hash",
    "PROMPT_SUFFIXES": "registry",
    "AlignmentError": "errors",
    "AlignmentReport": "alignment",
    "AnthropicClient": "clients",
    "AnthropicRequest": "anthropic_request",
    "AnthropicBatchRequest": "anthropic_request",
    "AnthropicBetaRequest": "anthropic_request",
    "AnthropicTTL": "anthropic_request",
    "AnthropicTokenCounter": "anthropic_token_counter",
    "AsyncAnthropicClient": "clients",
    "AsyncOpenAIClient": "clients",
    "AsyncVLLMClient": "clients",
    "BreakEven": "cache_payoff",
    "CacheStats": "cache_stats",
    "CanonicalError": "errors",
    "CacheMode": "openai_request",
    "ChatRequest": "openai_request",
    "Document": "content",
    "Drift": "drift",
    "GuardMode": "static_prefix_guard",
    "HFTokenizer": "tokenizer",
    "HashAlgo": "block_hash",
    "Image": "content",
    "LayoutError": "errors",
    "Lock": "registry",
    "LockEntry": "registry",
    "LockUpdate": "registry",
    "LockfileError": "errors",
    "LongPromptPricing": "model_facts",
    "LoopResult": "agent_loop",
    "LoopTurn": "agent_loop",
    "MissingExtraError": "errors",
    "HitRateWarning": "errors",
    "ModelInfo": "model_facts",
    "Native": "content",
    "OpenAIClient": "clients",
    "PrefixBody": "anthropic_request",
    "PrefixHashMemo": "block_hash",
    "PrefixkitDeprecationWarning": "errors",
    "PrefixkitError": "errors",
    "PrefixkitWarning": "errors",
    "Pricing": "model_facts",
    "Prompt": "prompt",
    "PromptDriftError": "errors",
    "PromptNotFoundError": "errors",
    "PromptRegistry": "registry",
    "ProviderLimits": "model_facts",
    "RenderError": "errors",
    "ResponsesRequest": "openai_request",
    "SaltError": "errors",
    "Role": "segment",
    "Segment": "segment",
    "Stability": "segment",
    "StaticPrefixChangedError": "errors",
    "StaticPrefixChangedWarning": "errors",
    "StaticPrefixGuard": "static_prefix_guard",
    "StreamResult": "clients",
    "TTLChoice": "cache_payoff",
    "Text": "content",
    "TiktokenTokenizer": "tokenizer",
    "TokenCount": "tokenizer",
    "Tokenizer": "tokenizer",
    "TokenizerError": "errors",
    "ToolCall": "content",
    "ToolResult": "content",
    "UncachedPrefixWarning": "errors",
    "UnknownModelWarning": "errors",
    "UsageError": "errors",
    "VLLMChatRequest": "vllm_request",
    "VLLMClient": "clients",
    "VLLMCompletionRequest": "vllm_request",
    "VllmVersion": "block_hash",
    "align_static_prefix": "alignment",
    "block_hashes": "block_hash",
    "break_even": "cache_payoff",
    "cacheable_prefixes": "anthropic_request",
    "canonical_json": "canonical",
    "canonical_text": "canonical",
    "chat_messages": "alignment",
    "check_prompt_files": "registry",
    "choose_ttl": "cache_payoff",
    "default_guard": "static_prefix_guard",
    "default_lock_path": "registry",
    "event_block_hash": "block_hash",
    "event_block_hashes": "block_hash",
    "hash_block": "block_hash",
    "known_models": "model_facts",
    "model_info": "model_facts",
    "none_hash": "block_hash",
    "none_hash_seed": "block_hash",
    "salt_extra_keys": "block_hash",
    "prompt_cache_key": "openai_request",
    "provider_limits": "model_facts",
    "read_lock": "registry",
    "render_anthropic": "anthropic_request",
    "render_anthropic_batch": "anthropic_request",
    "render_anthropic_beta": "anthropic_request",
    "render_openai_chat": "openai_request",
    "render_openai_responses": "openai_request",
    "render_vllm": "vllm_request",
    "require_extra": "extras",
    "run_tool_loop": "agent_loop",
    "arun_tool_loop": "agent_loop",
    "sha256_hex": "canonical",
    "salt_secret": "salt",
    "tenant_salt": "salt",
    "vllm_tool": "vllm_request",
    "vllm_version_of": "block_hash",
    "write_lock": "registry",
    "CacheMiss": "cache_miss",
    "MissReason": "cache_miss",
    "instrument": "telemetry",
    "uninstrument": "telemetry",
    "HitRateMonitor": "hit_rate",
    "HitRateAlert": "hit_rate",
    "MissProvider": "static_prefix_guard",
}

__all__ = list(_EXPORTS)

_exported, __dir__ = lazy_exports(__name__, _EXPORTS)
__getattr__ = renamed_names(__name__, {"DriftGuard": "StaticPrefixGuard"}, fallback=_exported)
