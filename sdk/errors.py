"""The exception tree of prefixkit: every error it raises on purpose, in every part.

    PrefixkitError                              exit code of `prefixkit ...`
    ├── LayoutError (ValueError)                segments out of stability order        2
    ├── CanonicalError (ValueError)             content that cannot be made canonical  2
    ├── PromptNotFoundError (LookupError)       no such prompt or version              2
    ├── LockfileError (ValueError)              prefixkit.lock is malformed or missing 2
    ├── PromptDriftError (ValueError)           a prompt's hash differs from the lock  2
    ├── StaticPrefixChangedError (RuntimeError) a named prompt changed its static prefix
    ├── TokenizerError (RuntimeError)           a tokenizer cannot be loaded or used   3
    ├── AlignmentError (ValueError)             block alignment impossible in budget
    ├── SaltError (ValueError)                  tenant salt misuse (empty secret/tenant)
    ├── RenderError (ValueError)                a prompt cannot be rendered for a provider
    ├── UsageError (ValueError)                 an argument that cannot work (command   2
    │                                           line, or stream=True to a client's
    │                                           non-streaming method)
    ├── MissingExtraError (ImportError)         a part used without its extra           2
    │                                           (pip install 'prefixkit[lint]', ...)
    ├── LintConfigError (ValueError)            prefixkit.linter.config: bad
    │                                           [tool.prefixkit.lint] settings         2
    ├── NotebookError (ValueError)              prefixkit.linter.notebook: a .ipynb
    │                                           that is not a readable notebook         2
    └── prefixkit.engine_adapter.errors:
        ├── EngineConfigError (ValueError)      an engine configuration vLLM would
        │                                       reject (odd CPU block size, ...)       2
        ├── DeploymentConfigError (ValueError)  deployment parts that do not fit
        │                                       (ports collide, router options)        2
        ├── GatewayConfigError (ValueError)     tenant keys or salt secret malformed   2
        ├── TraceError (ValueError)             a trace file cannot be read            2
        ├── EngineInstallError (RuntimeError)   installing or verifying vLLM failed    3
        ├── ModelPrepareError (RuntimeError)    preparing the embedded model failed   3
        ├── ReplicaStartError (RuntimeError)    a replica exited or stayed unhealthy   3
        ├── PortInUseError (RuntimeError)       a port is taken by another process     3
        ├── RouterStartError (RuntimeError)     the router did not start               3
        ├── WarmupError (RuntimeError)          a warm-up request found no replica
        │                                       or got an error answer                 3
        └── StaleBuildError (ImportError)       a compiled module older than its source 2

    PrefixkitWarning (UserWarning)              root of the warnings prefixkit issues
    ├── UncachedPrefixWarning                   a prefix is below the model's minimum cacheable length
    ├── UnknownModelWarning                     a model is missing from prefixkit's data tables
    ├── StaticPrefixChangedWarning              the same, from a guard in "warn" mode
    └── PrefixkitDeprecationWarning             a renamed name used by its old name
        (DeprecationWarning)                    (removed in the next minor version)

Each error also derives from the builtin in brackets, so ``except ValueError`` keeps
working. The command line maps them to exit codes: a `ValueError`, `LookupError` or
`ImportError` (wrong input, configuration or installation: fix it and run again) exits 2,
a `RuntimeError` (something failed while running) exits 3. Every message names the
offending segment, file or value and says how to fix it.
"""

from __future__ import annotations

__all__ = [
    "AlignmentError",
    "CanonicalError",
    "LayoutError",
    "LockfileError",
    "MissingExtraError",
    "PrefixkitDeprecationWarning",
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
    "UsageError",
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


class UsageError(PrefixkitError, ValueError):
    """An argument that cannot work: on the command line (a path that does not exist, an
    unknown name), or in a call (`stream=True` to a client's non-streaming method)."""


class MissingExtraError(PrefixkitError, ImportError):
    """An optional part of prefixkit is used without the extra that installs it."""


class PrefixkitWarning(UserWarning):
    """Root of every warning prefixkit issues (filter them with this category)."""


class UncachedPrefixWarning(PrefixkitWarning):
    """A prefix marked for caching is shorter than the model's minimum: nothing is cached."""


class UnknownModelWarning(PrefixkitWarning):
    """A model is not in prefixkit's data tables, so its cache rules are not checked."""


class StaticPrefixChangedWarning(PrefixkitWarning):
    """The same prompt name rendered a different static prefix (static-prefix guard in "warn" mode)."""


class PrefixkitDeprecationWarning(PrefixkitWarning, DeprecationWarning):
    """A renamed public name was used by its old name; the old name goes in the next minor
    version (`prefixkit.sdk.deprecation`, CHANGELOG.md)."""
