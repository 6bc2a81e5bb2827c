"""Does the precise policy's lead over SMG's rule hold beyond one setting? A sweep.

`bench/route_replay.py` measures precise against real SMG at one setting (8
replicas x 500 blocks, the first 3,000 Mooncake requests). Through an LRU
feedback loop a single setting is one sample: small changes move either
policy's hit rate by several percent. This sweep replays the simulator's
``precise`` and ``smg_like`` (SMG's rule and default tree, the same load model:
1 ms prefill per uncached block, arrivals compressed 25x) over

* 4, 8 and 16 replicas,
* fleet capacities (replicas x blocks per replica) of 2,400, 4,000 and 6,400
  blocks (4,000 is 8 x 500),
* four windows of about 3,000 consecutive requests and the whole trace,

and prints precise / smg_like per cell and, per replica count, the geometric
mean and the lowest ratio, and both policies' worst imbalance (max/mean of
assigned blocks, of uncached blocks).

    .venv/bin/python bench/research/route_sweep.py        # about 10 s
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path

from prefixkit.engine_adapter.replay.replay import LoadParams, replay
from prefixkit.engine_adapter.replay.trace import Trace, load_trace

MOONCAKE_TRACE = (
    Path(__file__).resolve().parents[2] / "examples" / "traces" / "mooncake_conversation.jsonl.gz"
)

LOAD = LoadParams(0.001, 0.0, 25.0)
REPLICA_COUNTS = (4, 8, 16)
FLEET_BLOCKS = (2_400, 4_000, 6_400)
WINDOW = 3_000
SMG_TREE_BLOCKS = 67_108_864 // 4 // 512  # SMG's default tree, in 512-token blocks


def window(trace: Trace, start: int, stop: int) -> Trace:
    """Requests `start` to `stop`, their arrival times from the first one's."""
    origin = trace.timestamps_ms[start]
    return Trace(
        trace.block_size,
        [t - origin for t in trace.timestamps_ms[start:stop]],
        trace.input_lengths[start:stop],
        trace.output_lengths[start:stop],
        trace.blocks[start:stop],
    )


def main() -> int:
    full = load_trace(MOONCAKE_TRACE)
    starts = range(0, len(full) - WINDOW + 1, WINDOW)
    spans = [(s, s + WINDOW if s + 2 * WINDOW <= len(full) else len(full)) for s in starts]
    spans.append((0, len(full)))
    windows = [(f"{a}-{b}", window(full, a, b)) for a, b in spans]
    print(
        f"precise / smg_like hit rate, Mooncake conversation trace ({len(full)} requests), "
        f"windows of {WINDOW} requests and the whole trace"
    )
    print(f"{'replicas x blocks':<18}" + "".join(f"{name:>13}" for name, _ in windows))
    for replicas in REPLICA_COUNTS:
        worst = {"precise": (0.0, 0.0), "smg_like": (0.0, 0.0)}
        logs = []
        for fleet in FLEET_BLOCKS:
            capacity = fleet // replicas
            cells = []
            for _, trace in windows:
                results = {
                    policy: replay(
                        trace, policy, replicas, capacity, LOAD, max_tree_blocks=SMG_TREE_BLOCKS
                    )
                    for policy in worst
                }
                for policy, result in results.items():
                    assigned, uncached = worst[policy]
                    worst[policy] = (
                        max(assigned, result.imbalance),
                        max(uncached, result.uncached_imbalance),
                    )
                ratio = results["precise"].hit_rate / results["smg_like"].hit_rate
                logs.append(math.log(ratio))
                cells.append(ratio)
            print(f"{f'{replicas} x {capacity}':<18}" + "".join(f"{c:>13.3f}" for c in cells))
        imbalances = ", ".join(
            f"{policy} {assigned:.2f} / {uncached:.2f}"
            for policy, (assigned, uncached) in worst.items()
        )
        print(
            f"  {replicas} replicas: geometric mean {math.exp(statistics.mean(logs)):.3f}, "
            f"lowest {math.exp(min(logs)):.3f}; worst imbalance (assigned / uncached) "
            f"{imbalances}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
