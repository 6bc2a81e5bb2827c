"""The exception tree of prefixkit: every error it raises on purpose, in every part.

    PrefixkitError                              exit code of `prefixkit ...`
    ├── LayoutError (ValueError)                segments out of stability order        2
    ├── CanonicalError (ValueError)             content that cannot be made canonical  2
    ├── PromptNotFoundError (LookupError)       no such prompt or version              2
    ├── LockfileError (ValueError)              prefixkit.lock is malformed or missing 2
    ├── PromptDriftError (ValueError)           a prompt's hash differs from the lock  2
    ├── StaticPrefixChangedError (RuntimeError) a named prompt changed its static prefix
    ├── TokenizerError (RuntimeError)           a tokenizer cannot be loaded or used   3
    ├── AlignmentError (ValueError)             a block size alignment cannot use
    ├── SaltError (ValueError)                  tenant salt misuse (empty secret/tenant)
    ├── RenderError (ValueError)                a prompt cannot be rendered for a provider
    ├── UsageError (ValueError)                 an argument that cannot work (command   2
    │                                           line, or stream=True to a client's
    │                                           non-streaming method)
    ├── MissingExtraError (ImportError)         a part used without its extra           2
    │                                           (pip install 'prefixkit[lint]', ...)
    ├── LintConfigError (ValueError)            prefixkit.linter: bad
    │                                           [tool.prefixkit.lint] settings         2
    ├── NotebookError (ValueError)              prefixkit.linter: a .ipynb
    │                                           that is not a readable notebook         2
    └── prefixkit.engine_adapter:
        ├── EngineConfigError (ValueError)      an engine configuration vLLM would
        │                                       reject (odd CPU block size, ...)       2
        ├── DeploymentConfigError (ValueError)  deployment parts that do not fit
        │                                       (ports collide, router options)        2
        ├── GatewayConfigError (ValueError)     tenant keys or salt secret malformed   2
        ├── TraceError (ValueError)             a trace file cannot be read            2
        ├── KvLayoutError (ValueError)          a model config whose KV size per token
        │                                       is unknown (chunked attention, ...)    2
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
    ├── HitRateWarning                          a prompt's rolling hit rate fell below the threshold
    └── PrefixkitDeprecationWarning             a renamed name used by its old name
        (DeprecationWarning)                    (removed in the next minor version)

Each error also derives from the builtin in brackets, so ``except ValueError`` keeps
working. The command line maps them to exit codes: a `ValueError`, `LookupError` or
`ImportError` (wrong input, configuration or installation: fix it and run again) exits 2,
a `RuntimeError` (something failed while running) exits 3. Every message names the
offending segment, file or value and says how to fix it.

Each error also carries what it describes as attributes, so a program can act on it
(`exc.drift.expected`, `exc.path`, `exc.label`): the class takes the message first and its
data as keyword-only arguments of the same names. Errors pickle with their attributes (they
cross process boundaries in parallel runs).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from .drift import Drift

__all__ = [
    "AlignmentError",
    "CanonicalError",
    "HitRateWarning",
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


_PACKAGE = os.path.dirname(os.path.dirname(__file__)) + os.sep  # prefixkit's folder


def outside_prefixkit() -> int:
    """The ``stacklevel`` that makes a warning point at the first caller outside prefixkit
    (the application's line, however deep in prefixkit the warning is raised)."""
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    return level


def _rebuild(
    kind: type[BaseException], args: tuple[Any, ...], state: dict[str, Any]
) -> BaseException:
    error = kind.__new__(kind, *args)
    error.args = args
    error.__dict__.update(state)
    return error


class PrefixkitError(Exception):
    """Root of every error prefixkit raises on purpose."""

    def __init__(self, message: str) -> None:
        super().__init__(message)

    def __reduce__(self) -> tuple[Any, ...]:
        # Exception pickles as cls(*args), which would drop the keyword-only data.
        return _rebuild, (type(self), self.args, dict(vars(self)))


class LayoutError(PrefixkitError, ValueError):
    """A prompt's segments go from a less stable tier back to a more stable one, or a
    segment carries what its tier cannot use.

    Attributes:
        label: the segment out of place (`Segment.label`).
        position: its index among the prompt's segments (tools, system, context,
            messages), or None for a segment not yet in a prompt.
        earlier_label: the less stable segment it follows, when the order is the problem.
        earlier_position: that segment's index.
    """

    def __init__(
        self,
        message: str,
        *,
        label: str,
        position: int | None = None,
        earlier_label: str | None = None,
        earlier_position: int | None = None,
    ) -> None:
        super().__init__(message)
        self.label = label
        self.position = position
        self.earlier_label = earlier_label
        self.earlier_position = earlier_position


class CanonicalError(PrefixkitError, ValueError):
    """Content cannot be serialised canonically (e.g. JSON with a non-JSON value).

    Attributes:
        value: the offending value (for a prompt file that cannot be read, its path).
        path: where the value sits in what was given, as a JSON path: `$` is the whole
            input, `$.tools[1].name` a part of it.
    """

    def __init__(self, message: str, *, value: object, path: str = "$") -> None:
        super().__init__(message)
        self.value = value
        self.path = path


class PromptNotFoundError(PrefixkitError, LookupError):
    """The registry has no such prompt, or no such version of it.

    Attributes:
        root: the registry's prompt folder.
        name: the prompt asked for (None when the folder itself is missing).
        version: the version asked for (None: the unversioned prompt).
        available: what the folder holds instead: the prompt's versions when the prompt
            exists, else the prompt names.
    """

    def __init__(
        self,
        message: str,
        *,
        root: Path,
        name: str | None = None,
        version: str | None = None,
        available: Sequence[str] = (),
    ) -> None:
        super().__init__(message)
        self.root = root
        self.name = name
        self.version = version
        self.available = tuple(available)


class LockfileError(PrefixkitError, ValueError):
    """prefixkit.lock cannot be read or has the wrong shape.

    Attributes:
        path: the lock file.
        key: the key that is wrong (`prompts.support@v3.sha256`), or None when the file
            as a whole is (missing, not JSON, not an object).
    """

    def __init__(self, message: str, *, path: Path, key: str | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.key = key


class PromptDriftError(PrefixkitError, ValueError):
    """A prompt file's canonical hash differs from the one pinned in prefixkit.lock.

    Attributes:
        drift: what differs: the prompt key, the kind of drift, the locked and current
            digests and a diff (`Drift`).
        path: the prompt file.
    """

    def __init__(self, message: str, *, drift: Drift, path: Path) -> None:
        super().__init__(message)
        self.drift = drift
        self.path = path


class _StaticPrefixChange(Exception):
    """The data of a changed static prefix, the same in the error and the warning."""

    def __init__(
        self,
        message: str,
        *,
        prompt_name: str,
        position: int,
        label: str | None,
        first_digest: str,
        digest: str,
    ) -> None:
        super().__init__(message)
        self.prompt_name = prompt_name
        self.position = position
        self.label = label
        self.first_digest = first_digest
        self.digest = digest


class StaticPrefixChangedError(_StaticPrefixChange, PrefixkitError, RuntimeError):
    """The same prompt name rendered a different static prefix at run time.

    Attributes:
        prompt_name: the prompt's `name`.
        position: the index of the first static segment that differs (the shorter
            length when only the number of static segments changed).
        label: that segment's label as first seen, or None when the first static prefix
            had no segment there.
        first_digest: the static-prefix digest first seen for the name.
        digest: the static-prefix digest now.
    """


class TokenizerError(PrefixkitError, RuntimeError):
    """A tokenizer cannot be loaded or used.

    Attributes:
        tokenizer: what was asked for: a tiktoken encoding or model name, a tokenizer
            folder, or `hf:<folder>` / an Anthropic model for a loaded tokenizer.
    """

    def __init__(self, message: str, *, tokenizer: str) -> None:
        super().__init__(message)
        self.tokenizer = tokenizer


class AlignmentError(PrefixkitError, ValueError):
    """A static prefix cannot be padded to a block boundary of this size (an alignment that
    does not fit its budget is not an error: `AlignmentReport.aligned` is False).

    Attributes:
        block_size: the block size given.
    """

    def __init__(self, message: str, *, block_size: int) -> None:
        super().__init__(message)
        self.block_size = block_size


class SaltError(PrefixkitError, ValueError):
    """A tenant salt cannot be derived (empty secret or tenant id).

    Attributes:
        empty: which input is empty: "secret" (given empty, or not given and the
            environment variable unset) or "tenant".
    """

    def __init__(self, message: str, *, empty: Literal["secret", "tenant"]) -> None:
        super().__init__(message)
        self.empty = empty


class RenderError(PrefixkitError, ValueError):
    """A prompt cannot be rendered for the requested provider or model.

    Attributes:
        provider: the provider or API: "anthropic", "openai", "chat", "responses" or
            "vllm" (None where the check is not specific to one).
        model: the model, where known.
        segment: the segment or block concerned (a label, `content block 2`), where
            known.
    """

    def __init__(
        self,
        message: str,
        *,
        provider: str | None = None,
        model: str | None = None,
        segment: str | None = None,
    ) -> None:
        super().__init__(message)
        self.provider = provider
        self.model = model
        self.segment = segment


class UsageError(PrefixkitError, ValueError):
    """An argument that cannot work: on the command line (a path that does not exist, an
    unknown name), or in a call (`stream=True` to a client's non-streaming method).

    Attributes:
        argument: the argument or option (`stream`, `--jobs`), where one is to blame.
        value: the value given for it.
    """

    def __init__(self, message: str, *, argument: str | None = None, value: object = None) -> None:
        super().__init__(message)
        self.argument = argument
        self.value = value


class MissingExtraError(PrefixkitError, ImportError):
    """An optional part of prefixkit is used without the extra that installs it.

    Attributes:
        extra: the extra that installs it (`pip install 'prefixkit[<extra>]'`).
        missing: the top-level modules that are not installed.
    """

    def __init__(self, message: str, *, extra: str = "", missing: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.extra = extra
        self.missing = tuple(missing)


class PrefixkitWarning(UserWarning):
    """Root of every warning prefixkit issues (filter them with this category)."""


class UncachedPrefixWarning(PrefixkitWarning):
    """A prefix marked for caching is shorter than the model's minimum: nothing is cached."""


class UnknownModelWarning(PrefixkitWarning):
    """A model is not in prefixkit's data tables, so its cache rules are not checked."""


class StaticPrefixChangedWarning(_StaticPrefixChange, PrefixkitWarning):
    """The same prompt name rendered a different static prefix (a `StaticPrefixGuard` in
    "warn" mode). Attributes as `StaticPrefixChangedError`."""


class HitRateWarning(PrefixkitWarning):
    """A prompt's rolling cache hit rate fell below the `HitRateMonitor`'s threshold (warned
    when the monitor has no ``on_alert``); its message names the prompt, the rate and why its
    last missing request missed, when known."""


class PrefixkitDeprecationWarning(PrefixkitWarning, DeprecationWarning):
    """A renamed public name was used by its old name; the old name goes in the next minor
    version (`prefixkit.sdk.deprecation`, CHANGELOG.md)."""
