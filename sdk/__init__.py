"""prefixkit.sdk: static-first prompts, cache breakpoints and cache statistics.

The public surface is re-exported here; modules are private to the package.
Heavy dependencies (tokenizers, provider clients) are imported lazily.
"""

from .canonical import canonical_json, canonical_text, sha256_hex
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
    TokenizerError,
)
from .prompt import Prompt
from .salt import tenant_salt
from .segment import Segment, Stability

__all__ = [
    "AlignmentError",
    "CanonicalError",
    "LayoutError",
    "LockfileError",
    "PrefixkitError",
    "Prompt",
    "PromptDriftError",
    "PromptNotFoundError",
    "RenderError",
    "SaltError",
    "Segment",
    "Stability",
    "StaticPrefixChangedError",
    "TokenizerError",
    "canonical_json",
    "canonical_text",
    "sha256_hex",
    "tenant_salt",
]
