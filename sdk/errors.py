"""The exception tree of prefixkit.

    PrefixkitError
    ├── LayoutError (ValueError)          segments out of stability order
    ├── CanonicalError (ValueError)       content that cannot be made canonical
    ├── PromptNotFoundError (LookupError) no such prompt or version in the registry
    ├── LockfileError (ValueError)        prefixkit.lock is malformed
    ├── PromptDriftError (ValueError)     a prompt's hash differs from the lock
    ├── StaticPrefixChangedError (RuntimeError)  runtime drift guard
    ├── TokenizerError (RuntimeError)     a tokenizer cannot be loaded or used
    ├── AlignmentError (ValueError)       block alignment impossible within budget
    ├── SaltError (ValueError)            tenant salt misuse (empty secret or tenant)
    └── RenderError (ValueError)          a prompt cannot be rendered for a provider

    PrefixkitWarning (UserWarning)        root of the warnings prefixkit issues
    ├── UncachedPrefixWarning             a prefix is below the model's minimum cacheable length
    ├── UnknownModelWarning               a model is missing from prefixkit's data tables
    └── StaticPrefixChangedWarning        runtime drift guard in "warn" mode

Every message names the offending segment, file or value and says how to fix it.
"""

from __future__ import annotations

__all__ = [
    "AlignmentError",
    "CanonicalError",
    "LayoutError",
    "LockfileError",
    "PrefixkitError",
    "PrefixkitWarning",
    "PromptDriftError",
    "PromptNotFoundError",
    "RenderError",
    "SaltError",
    "StaticPrefixChangedError",
    "StaticPrefixChangedWarning",
    "TokenizerError",
    "UncachedPrefixWarning",
    "UnknownModelWarning",
]


class PrefixkitError(Exception):
    """Root of every error prefixkit raises on purpose."""


class LayoutError(PrefixkitError, ValueError):
    """A prompt's segments go from a less stable tier back to a more stable one."""


class CanonicalError(PrefixkitError, ValueError):
    """Content cannot be serialised canonically (e.g. JSON with a non-JSON value)."""


class PromptNotFoundError(PrefixkitError, LookupError):
    """The registry has no such prompt, or no such version of it."""


class LockfileError(PrefixkitError, ValueError):
    """prefixkit.lock cannot be read or has the wrong shape."""


class PromptDriftError(PrefixkitError, ValueError):
    """A prompt file's canonical hash differs from the one pinned in prefixkit.lock."""


class StaticPrefixChangedError(PrefixkitError, RuntimeError):
    """The same prompt name rendered a different static prefix at run time."""


class TokenizerError(PrefixkitError, RuntimeError):
    """A tokenizer cannot be loaded or used."""


class AlignmentError(PrefixkitError, ValueError):
    """A static prefix cannot be padded to a block boundary."""


class SaltError(PrefixkitError, ValueError):
    """A tenant salt cannot be derived (empty secret or tenant id)."""


class RenderError(PrefixkitError, ValueError):
    """A prompt cannot be rendered for the requested provider or model."""


class PrefixkitWarning(UserWarning):
    """Root of every warning prefixkit issues (filter them with this category)."""


class UncachedPrefixWarning(PrefixkitWarning):
    """A prefix marked for caching is shorter than the model's minimum: nothing is cached."""


class UnknownModelWarning(PrefixkitWarning):
    """A model is not in prefixkit's data tables, so its cache rules are not checked."""


class StaticPrefixChangedWarning(PrefixkitWarning):
    """The same prompt name rendered a different static prefix (drift guard in warn mode)."""
