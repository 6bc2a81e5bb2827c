"""What is in flight on each replica during a replay: a simple model of replica load.

A trace gives arrival times, prompt and output lengths, but not how long each
request occupied its replica; routing policies with a load term need that. The
model, per replica:

* prefill is one FIFO queue: a request's prefill starts when the replica has
  finished the prefills before it, and takes ``uncached_blocks x
  prefill_s_per_block`` (cached blocks cost nothing);
* decode runs batched, without queueing: it takes ``output_tokens x
  decode_s_per_token`` after the prefill ends;
* a request is in flight from arrival until its decode ends.

So ``inflight[r]`` (requests, what SMG counts) and ``queued_blocks(r, now)``
(prefill work not yet done, what the precise policy weighs) follow from the
arrival times alone. Defaults are set by callers (see `prefixkit.cli.analyze`).
"""

from __future__ import annotations

import heapq

__all__ = ["ReplicaLoad"]


class ReplicaLoad:
    """In-flight requests and queued prefill per replica, advanced by arrival time (s)."""

    __slots__ = ("busy_until", "decode_s_per_token", "finishing", "inflight", "prefill_s_per_block")

    def __init__(
        self, replicas: int, prefill_s_per_block: float, decode_s_per_token: float
    ) -> None:
        self.prefill_s_per_block = prefill_s_per_block
        self.decode_s_per_token = decode_s_per_token
        self.inflight = [0] * replicas
        self.busy_until = [0.0] * replicas
        self.finishing: list[tuple[float, int]] = []

    def advance(self, now: float) -> None:
        """Retire every request that has finished by `now`."""
        finishing = self.finishing
        inflight = self.inflight
        while finishing and finishing[0][0] <= now:
            _, replica = heapq.heappop(finishing)
            inflight[replica] -= 1

    def dispatch(self, replica: int, now: float, uncached_blocks: int, output_tokens: int) -> None:
        """Account a request arriving at `now` on `replica`."""
        start = max(now, self.busy_until[replica])
        prefill_end = start + uncached_blocks * self.prefill_s_per_block
        self.busy_until[replica] = prefill_end
        self.inflight[replica] += 1
        heapq.heappush(
            self.finishing, (prefill_end + output_tokens * self.decode_s_per_token, replica)
        )

    def queued_blocks(self, replica: int, now: float) -> float:
        """Prefill work still ahead of a request arriving now, in blocks."""
        ahead = self.busy_until[replica] - now
        if ahead <= 0.0 or self.prefill_s_per_block <= 0.0:
            return 0.0
        return ahead / self.prefill_s_per_block
