"""PFX102 prompt-drifted-from-lock."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import PurePosixPath

from prefixkit.sdk import PROMPT_SUFFIXES, Lock

from ..context import PromptContext
from ..finding import Finding
from ..rule import PromptRule

__all__ = ["PromptDriftedFromLock"]


class PromptDriftedFromLock(PromptRule):
    """A prompt file's hash differs from `prefixkit.lock` (or it is not pinned at all).

    Runs only when `prefixkit.lock` exists beside the prompt root
    (`prompt-root`, default `prompts`). Hashing and comparison are the SDK's
    (`prefixkit.sdk.PromptRegistry`): the canonical text's sha256, so line endings,
    a BOM or trailing spaces never count as drift.

    ## Why it breaks caching
    A pinned prompt is a promise that the cached prefix stays the same across
    deployments. An unreviewed edit invalidates every cache entry built on
    it, and `PromptRegistry.load` refuses to load it at run time.

    ## Example
    `prompts/support@v3.md` edited after `prefixkit lock` was run.

    ## Use instead
    Put the change in a new version (`support@v4.md`), review it, then run
    `prefixkit lock` and commit `prefixkit.lock`.
    """

    code = "PFX102"
    name = "prompt-drifted-from-lock"

    def check(self, context: PromptContext) -> Iterator[Finding]:
        """Compare the file with its lock entry through the SDK's `Lock.check`."""
        lock = context.project.lock()
        if not isinstance(lock, Lock):
            return
        try:
            relative = PurePosixPath(
                context.path.absolute().relative_to(context.project.prompt_root).as_posix()
            )
        except ValueError:
            return
        if relative.suffix not in PROMPT_SUFFIXES:
            return
        drift = lock.check(relative.with_suffix("").as_posix(), context.text)
        if drift is None:
            return
        first_line = context.text.find("\n")
        end = len(context.text) if first_line < 0 else first_line
        yield context.finding(self.code, 0, end, drift.message.splitlines()[0])
