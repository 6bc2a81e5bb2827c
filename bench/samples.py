"""Order statistics the bench scripts print: the nearest-rank percentile of a sample."""

from collections.abc import Sequence


def percentile(samples: Sequence[float], share: float) -> float:
    """The sample at rank `share` of the sorted samples (0.99: the 99th percentile)."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]
