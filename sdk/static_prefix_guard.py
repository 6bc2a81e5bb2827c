"""Static-prefix guard: one prompt name, one static prefix.

A named `Prompt` is expected to render the same static prefix every time: that
is what makes it cacheable. `StaticPrefixGuard.check(prompt)` remembers the first
static-prefix digest seen for each `prompt.name`; a later prompt with the same
name and a different static prefix raises `StaticPrefixChangedError` (mode
"raise") or warns with `StaticPrefixChangedWarning` (mode "warn"), with a
unified diff of the first static segment that differs. The linter catches the
same mistake before the code runs; this catches what only shows at run time
(a timestamp formatted into a "static" instruction, a re-ordered tool list).

    from prefixkit.sdk import default_guard
    default_guard.check(prompt)                 # the process-wide default, mode "raise"
    guard = StaticPrefixGuard(mode="warn")      # your own, e.g. per tenant or per test

`Prompt` and the renderers stay pure: nothing calls the guard for you. Call
`check` where a request is built (before `render_*` or a client's `create`).
Prompts without a name are not tracked. The guard keeps only the static segments of
the first prompt per name (for the diff), and is thread-safe.
"""

from __future__ import annotations

import difflib
import threading
import warnings
from dataclasses import dataclass
from typing import Literal

from .errors import StaticPrefixChangedError, StaticPrefixChangedWarning, UsageError
from .prompt import Prompt
from .segment import Segment

__all__ = ["GuardMode", "StaticPrefixGuard", "default_guard"]

GuardMode = Literal["raise", "warn"]


@dataclass(frozen=True)
class _Seen:
    digest: str
    segments: tuple[Segment, ...]


@dataclass(frozen=True)
class _Change:
    """Where a static prefix first differs, and the message that says so."""

    position: int
    label: str | None
    message: str


def _describe(name: str, before: tuple[Segment, ...], after: tuple[Segment, ...]) -> _Change:
    for position, (old, new) in enumerate(zip(before, after, strict=False)):
        if old.text != new.text or old.stability != new.stability or old.role != new.role:
            diff = "".join(
                difflib.unified_diff(
                    (old.text + "\n").splitlines(keepends=True),
                    (new.text + "\n").splitlines(keepends=True),
                    fromfile=f"{old.label} (first seen)",
                    tofile=f"{new.label} (now)",
                )
            )
            return _Change(
                position,
                old.label,
                f"prompt {name!r} changed its static prefix at static segment {position} "
                f"({old.label}); every request now misses the cache from there on. "
                "Keep volatile values out of STATIC/VERSIONED segments (move them to a "
                f"DYNAMIC segment) or give the new prompt another name.\n{diff}",
            )
    shorter = min(len(before), len(after))
    return _Change(
        shorter,
        before[shorter].label if shorter < len(before) else None,
        f"prompt {name!r} changed the number of static segments from {len(before)} to "
        f"{len(after)}; keep the static prefix fixed or give the new prompt another name",
    )


class StaticPrefixGuard:
    """Remembers each prompt name's static-prefix digest and flags changes."""

    def __init__(self, mode: GuardMode = "raise") -> None:
        if mode not in ("raise", "warn"):
            raise UsageError(
                f"static-prefix guard mode must be 'raise' or 'warn', got {mode!r}",
                argument="mode",
                value=mode,
            )
        self.mode: GuardMode = mode
        self._seen: dict[str, _Seen] = {}
        self._lock = threading.Lock()

    def check(self, prompt: Prompt) -> None:
        """Record `prompt`'s static prefix, or raise/warn if its name had another one."""
        if prompt.name is None:
            return
        digest = prompt.static_prefix_digest
        with self._lock:
            seen = self._seen.setdefault(
                prompt.name, _Seen(digest, tuple(prompt.static_segments()))
            )
        if seen.digest == digest:
            return
        change = _describe(prompt.name, seen.segments, tuple(prompt.static_segments()))
        kind = StaticPrefixChangedError if self.mode == "raise" else StaticPrefixChangedWarning
        problem = kind(
            change.message,
            prompt_name=prompt.name,
            position=change.position,
            label=change.label,
            first_digest=seen.digest,
            digest=digest,
        )
        if isinstance(problem, StaticPrefixChangedError):
            raise problem
        warnings.warn(problem, stacklevel=2)

    def forget(self, name: str | None = None) -> None:
        """Forget one prompt name (after an intended change), or all of them."""
        with self._lock:
            if name is None:
                self._seen.clear()
            else:
                self._seen.pop(name, None)


default_guard = StaticPrefixGuard()
"""The process-wide default guard (mode "raise")."""
