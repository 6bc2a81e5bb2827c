"""A rolling cache hit rate per prompt name and version, with a threshold that warns.

    monitor = HitRateMonitor(threshold=0.70, window=20)
    client = AnthropicClient(monitor=monitor, guard=StaticPrefixGuard())  # records each answer
    monitor.record(prompt, stats)                          # or record yourself
    monitor.hit_rate("support", "v3")                      # 0.93

The hit rate of a prompt is the share of its prompt tokens read from the cache
over its last `window` requests that reported cache counters (a vLLM server
started without `--enable-prompt-tokens-details` reports none: those requests
are left out, not counted as misses). Once at least `min_requests` are in the
window, the rate falling below `threshold` raises an alert: a `HitRateAlert`
handed to `on_alert`, or, without one, a `HitRateWarning` with its message.
An alert fires when the rate crosses the threshold downwards, once, and again
only after the rate has come back to the threshold. The alert carries the
latest `CacheMiss` of that prompt (why its last missing request missed), when
one is known.
"""

from __future__ import annotations

import threading
import warnings
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from .cache_miss import CacheMiss
from .cache_stats import CacheStats
from .errors import HitRateWarning, UsageError, outside_prefixkit
from .prompt import Prompt

__all__ = ["DEFAULT_HIT_RATE_THRESHOLD", "HitRateAlert", "HitRateMonitor"]

DEFAULT_HIT_RATE_THRESHOLD = 0.70
"""The hit rate below which a prompt is reported (the common target for chat applications)."""


@dataclass(frozen=True)
class HitRateAlert:
    """A prompt whose rolling hit rate fell below the threshold."""

    name: str
    version: str | None
    hit_rate: float
    threshold: float
    requests: int
    miss: CacheMiss | None = None

    @property
    def message(self) -> str:
        """One paragraph: which prompt, its rate, and why its last miss happened."""
        prompt = f"{self.name}@{self.version}" if self.version else self.name
        text = (
            f"prompt {prompt!r} read {self.hit_rate:.1%} of its prompt tokens from the cache "
            f"over its last {self.requests} request(s), below the {self.threshold:.0%} target"
        )
        if self.miss is None:
            return text + (
                ": no miss explained in the window (a StaticPrefixGuard, guard=, or "
                "diagnostics=True explains misses; with them, the requests read all the cache "
                "held: too few requests per cache lifetime, or a prefix under the model's "
                "minimum)"
            )
        return f"{text}; latest {self.miss}"


@dataclass
class _Window:
    requests: deque[tuple[int, int]]  # (cached, reported input) of each request
    below: bool = False
    miss: CacheMiss | None = None

    def rate(self) -> float | None:
        total = sum(tokens for _, tokens in self.requests)
        return sum(cached for cached, _ in self.requests) / total if total else None


def prompt_identity(prompt: Prompt) -> tuple[str | None, str | None]:
    """The name and version a prompt is counted under: its `name` (else the name of its
    first segment with a version) and the version of its first segment with one (a
    prompt file loaded from a `PromptRegistry`)."""
    versioned = next((s for s in prompt.segments() if s.version is not None), None)
    if versioned is None:
        return prompt.name, None
    return prompt.name or versioned.name, versioned.version


def _identity(prompt: Prompt | str, version: str | None) -> tuple[str, str | None]:
    if isinstance(prompt, str):
        return prompt, version
    name, own_version = prompt_identity(prompt)
    if name is None:
        raise UsageError(
            "the hit-rate monitor tracks prompts by name: give the Prompt a name= "
            "(or record(name, stats))",
            argument="prompt",
            value=prompt,
        )
    return name, version if version is not None else own_version


@dataclass(eq=False)
class HitRateMonitor:
    """Rolling hit rate per prompt name and version; alerts below `threshold`.

    `window` requests per prompt are kept (counts only), at most
    `max_prompts` prompts (the least recently recorded is forgotten first).
    Thread-safe.
    """

    threshold: float = DEFAULT_HIT_RATE_THRESHOLD
    window: int = 20
    min_requests: int = 5
    on_alert: Callable[[HitRateAlert], None] | None = None
    max_prompts: int = 1024
    _prompts: OrderedDict[tuple[str, str | None], _Window] = field(
        default_factory=OrderedDict, init=False, repr=False
    )
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        if not 0.0 <= self.threshold <= 1.0:
            raise UsageError(
                f"threshold must be a hit rate between 0 and 1, got {self.threshold}",
                argument="threshold",
                value=self.threshold,
            )
        for name in ("window", "min_requests", "max_prompts"):
            if getattr(self, name) < 1:
                raise UsageError(
                    f"{name} must be at least 1, got {getattr(self, name)}",
                    argument=name,
                    value=getattr(self, name),
                )

    def record(
        self, prompt: Prompt | str, stats: CacheStats, *, version: str | None = None
    ) -> HitRateAlert | None:
        """Add one answer's stats; return the alert when this answer crossed the threshold.

        The version defaults to that of the prompt's first versioned segment
        (a registry prompt's `name@version`).
        """
        key = _identity(prompt, version)
        with self._lock:
            window = self._prompts.get(key)
            if window is None:
                window = self._prompts[key] = _Window(deque(maxlen=self.window))
                while len(self._prompts) > self.max_prompts:
                    self._prompts.popitem(last=False)
            self._prompts.move_to_end(key)
            if stats.miss is not None:
                window.miss = stats.miss
            if stats.reported:
                window.requests.append((stats.cached_tokens, stats.input_tokens))
            rate = window.rate()
            if rate is None or len(window.requests) < self.min_requests:
                return None
            if rate >= self.threshold:
                window.below = False
                return None
            if window.below:
                return None
            window.below = True
            alert = HitRateAlert(
                key[0], key[1], rate, self.threshold, len(window.requests), window.miss
            )
        if self.on_alert is not None:
            self.on_alert(alert)
        else:
            warnings.warn(HitRateWarning(alert.message), stacklevel=outside_prefixkit())
        return alert

    def hit_rate(self, name: str, version: str | None = None) -> float | None:
        """The rolling hit rate of a prompt; None when none of its requests reported one."""
        with self._lock:
            window = self._prompts.get((name, version))
            return window.rate() if window is not None else None

    def rates(self) -> dict[tuple[str, str | None], float | None]:
        """Every tracked prompt's rolling hit rate, by (name, version)."""
        with self._lock:
            return {key: window.rate() for key, window in self._prompts.items()}

    def __iter__(self) -> Iterator[tuple[str, str | None]]:
        with self._lock:
            return iter(list(self._prompts))
