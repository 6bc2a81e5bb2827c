"""How likely a cached prompt is to be continued soon, learned online (the precise policy's eviction cost).

Under memory pressure every new block evicts an old one, and which old one is
the router's choice: it picks the replica. LRU treats every old block alike,
but they are not: a conversation that just answered its second turn after
40 s is far likelier to come back soon than a one-shot prompt. This model
learns that from the traffic it routes, with no prior:

* A request *continues* an earlier prompt when the deepest full block it
  shares with earlier requests was the last full block of that prompt (nothing
  was ever appended after it): the next turn of a conversation. A shared system
  prompt that many conversations branch from is not a parent.
* Time is a *turnover clock*, not seconds: the number of blocks newly cached
  across the fleet so far (what pushes old blocks out of LRU caches), so the
  model is the same whether traffic is fast or slow. Its settings are in
  fleet capacities (`ReuseSettings.for_capacity`).
* Each prompt gets a class from the gap since the prompt it continued
  (``new``, then one class per `gap_edges` bucket).
* For class c and age a (in `age_step` buckets) it counts prompts still
  uncontinued at age a, and those of them continued within the next `window`:
  ``value = P(continued within window | class, not continued by age)``,
  counted only once the window has fully passed (no censoring bias), with a
  weak prior (`prior_hits` / `prior_count`). A prompt already continued is
  worth 0: its conversation moved on to a newer prompt. The counts are brought
  up to date every sixteenth of an age step of clock, not at every request.

Memory is bounded: prompts and block links older than `retention` are
forgotten (a forgotten prompt is valued like the oldest age bucket of all
classes together). `informed` turns true once a first count has settled (one
`window` after the first prompt); until then every value is the prior.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["ReuseModel", "ReuseSettings"]

_NOT_YET = math.inf  # a prompt's continued_after until it is continued


@dataclass(frozen=True)
class ReuseSettings:
    """Clock units: blocks newly cached across the fleet."""

    window: float
    age_step: float
    age_steps: int = 12
    gap_edges: tuple[float, ...] = ()
    prior_hits: float = 1.0
    prior_count: float = 10.0
    retention: float = math.inf

    @classmethod
    def for_capacity(cls, fleet_blocks: int) -> ReuseSettings:
        """Settings for a fleet caching `fleet_blocks` blocks in all: the window is
        one turnover of the whole fleet's cache, ages in quarter turnovers, gap
        classes below 3/4 and 3/2 turnovers, memory of 30 turnovers."""
        if fleet_blocks < 1:
            raise ValueError(f"fleet capacity must be at least one block, got {fleet_blocks}")
        return cls(
            window=float(fleet_blocks),
            age_step=fleet_blocks / 4,
            gap_edges=(0.75 * fleet_blocks, 1.5 * fleet_blocks),
            retention=30.0 * fleet_blocks,
        )


class _Prompt:
    __slots__ = ("continued_after", "id", "klass", "time")

    def __init__(self, prompt_id: int, time: float, klass: int) -> None:
        self.id = prompt_id
        self.time = time
        self.klass = klass
        self.continued_after = _NOT_YET  # the gap after which it was continued


class ReuseModel:
    """Online estimate of how likely each routed prompt is to be continued soon."""

    def __init__(self, settings: ReuseSettings) -> None:
        s = settings
        if s.window <= 0 or s.age_step <= 0 or s.age_steps < 1:
            raise ValueError(f"window, age step and age steps must be positive, got {s}")
        self.settings = s
        classes = len(s.gap_edges) + 2  # new, then one per gap bucket
        # per (class, age bucket), at klass * age_steps + age: the counts and the value
        self._continued = [0] * (classes * s.age_steps)
        self._exposed = [0] * (classes * s.age_steps)
        prior = s.prior_hits / s.prior_count  # every value before any count
        self._rates = [prior] * (classes * s.age_steps)
        self._forgotten_rate = prior
        # whether any count has settled: until then every value is the prior
        self.informed = False
        # read for every eviction valuation and settle: plain attributes, not settings lookups
        self._age_step = s.age_step
        self._age_steps = s.age_steps
        self._last_age = s.age_steps - 1
        self._prior_hits = s.prior_hits
        self._prior_count = s.prior_count
        self._prompts: dict[int, _Prompt] = {}
        self._order: list[_Prompt] = []  # by time, from self._first on
        self._first = 0
        self._settled = [0] * s.age_steps  # per age bucket: prompts in _order counted
        self._next_settle = 0.0
        # full block -> 2 x the last prompt using it, + 1 once some prompt continued past it
        self._links: dict[int, int] = {}

    def observe(self, prompt_id: int, full_blocks: Sequence[int], clock: float) -> None:
        """Record request `prompt_id` (increasing ids: the stamps its cache blocks
        get) with these full blocks at turnover `clock` (never decreasing)."""
        if clock >= self._next_settle:
            self._settle(clock)
            self._next_settle = clock + self._age_step / 16
        links = self._links
        deepest = -1  # the link of the deepest full block shared with earlier prompts
        for block in full_blocks:
            link = links.get(block, -1)
            if link < 0:
                break
            deepest = link
        gap = None
        if deepest >= 0 and not deepest & 1:  # nothing continued past it
            parent = self._prompts.get(deepest >> 1)
            if parent is not None:
                gap = clock - parent.time
                if parent.continued_after == _NOT_YET:
                    parent.continued_after = gap
        klass = 0 if gap is None else 1 + bisect.bisect_right(self.settings.gap_edges, gap)
        prompt = _Prompt(prompt_id, clock, klass)
        self._prompts[prompt_id] = prompt
        self._order.append(prompt)
        last = len(full_blocks) - 1
        if last >= 0:
            continued_past = 2 * prompt_id + 1
            for index in range(last):
                links[full_blocks[index]] = continued_past
            tail = full_blocks[last]
            links[tail] = 2 * prompt_id + (links.get(tail, 0) & 1)

    def value(self, prompt_id: int, clock: float) -> float:
        """P(prompt `prompt_id` is continued within `window` from `clock`)."""
        prompt = self._prompts.get(prompt_id)
        if prompt is None:
            return self._forgotten_rate
        if prompt.continued_after != _NOT_YET:
            return 0.0
        age = int((clock - prompt.time) / self._age_step)
        if age > self._last_age:
            age = self._last_age
        return self._rates[prompt.klass * self._age_steps + age]

    def eviction_cost(self, evicted: int, newest_stamp: float, clock: float) -> float:
        """The expected blocks of soon-wanted cache lost by evicting `evicted`
        blocks from a replica, the newest of them last used by request
        `newest_stamp`: each valued like that request's prompt (a replica's
        oldest blocks sit together by prompt, and the newest evicted one says
        most about what survives)."""
        return evicted * self.value(int(newest_stamp), clock) if evicted > 0 else 0.0

    def _settle(self, clock: float) -> None:
        """Count every (prompt, age bucket) whose window has fully passed by `clock`."""
        order = self._order
        age_step = self._age_step
        steps = self._age_steps
        window = self.settings.window
        prior_hits = self._prior_hits
        prior_count = self._prior_count
        exposed = self._exposed
        continued = self._continued
        rates = self._rates
        for step in range(steps):
            lag = step * age_step + window
            index = self._settled[step]
            while index < len(order):
                prompt = order[index]
                if prompt.time + lag > clock:
                    break
                after = prompt.continued_after
                if after >= step * age_step:  # not continued by this age
                    cell = prompt.klass * steps + step
                    exposed[cell] += 1
                    if after < lag:
                        continued[cell] += 1
                    rates[cell] = (continued[cell] + prior_hits) / (exposed[cell] + prior_count)
                index += 1
            self._settled[step] = index
        if not self.informed:
            self.informed = any(exposed)
        hits = prior_hits
        count = prior_count
        for cell in range(self._last_age, len(exposed), steps):  # every class's last age
            hits += continued[cell]
            count += exposed[cell]
        self._forgotten_rate = hits / count
        self._forget(clock)

    def _forget(self, clock: float) -> None:
        """Drop prompts (and block links to them) older than `retention`, once
        every age bucket has counted them; compacts when half the list is dead."""
        order = self._order
        done = min(self._settled)
        cutoff = clock - self.settings.retention
        first = self._first
        while first < done:
            prompt = order[first]
            if prompt.time >= cutoff:
                break
            del self._prompts[prompt.id]
            first += 1
        self._first = first
        if first > 1024 and first * 2 > len(order):
            del order[:first]
            self._settled = [index - first for index in self._settled]
            self._first = 0
            # ids increase along the order: links to any older prompt are forgotten ones
            kept = 2 * order[0].id if order else math.inf
            self._links = {b: link for b, link in self._links.items() if link >= kept}
