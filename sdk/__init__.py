"""prefixkit.sdk: static-first prompts, cache breakpoints and cache statistics.

The public surface is re-exported here; modules are private to the package.
Heavy dependencies (tokenizers, provider clients) are imported lazily.
"""

from .alignment import AlignmentReport, align_static_prefix, chat_messages
from .canonical import canonical_json, canonical_text, sha256_hex
from .drift_guard import DriftGuard, default_guard
from .errors import (
    AlignmentError,
    CanonicalError,
    LayoutError,
    LockfileError,
    PrefixkitError,
    PromptDriftError,
    PromptNotFoundError,
    RenderError,
    SaltError,
    StaticPrefixChangedError,
    StaticPrefixChangedWarning,
    TokenizerError,
)
from .prompt import Prompt
from .registry import Drift, PromptRegistry, check_prompt_files, read_lock, write_lock
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
    "AnthropicTokenCounter",
    "CanonicalError",
    "Drift",
    "DriftGuard",
    "HFTokenizer",
    "LayoutError",
    "LockfileError",
    "PrefixkitError",
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
    "TiktokenTokenizer",
    "TokenCount",
    "Tokenizer",
    "TokenizerError",
    "align_static_prefix",
    "canonical_json",
    "canonical_text",
    "chat_messages",
    "check_prompt_files",
    "default_guard",
    "read_lock",
    "sha256_hex",
    "tenant_salt",
    "write_lock",
]
