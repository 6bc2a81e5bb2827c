"""Hardware inputs of the tier model: GPUs, the links to lower tiers, sizes with units.

Each default is a published figure (peak, not measured here); the source is next to it.
Sustained rates are lower than these peaks, so give measured ones where you have them
(``--cpu-read 20GB/s``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["GPUS", "LINKS", "Gpu", "Link", "parse_rate", "parse_size"]


@dataclass(frozen=True)
class Gpu:
    """A GPU model: its memory and that memory's bandwidth."""

    name: str
    hbm_bytes: int
    hbm_bytes_per_s: float
    source: str


@dataclass(frozen=True)
class Link:
    """How a lower tier is read into GPU memory: its read bandwidth."""

    name: str
    bytes_per_s: float
    source: str


GB = 10**9
GIB = 2**30

GPUS: Mapping[str, Gpu] = {
    "h100": Gpu(
        "h100",
        80 * GB,
        3.35e12,
        "NVIDIA H100 datasheet: H100 SXM 80 GB HBM3, 3.35 TB/s",
    ),
    "a100-80gb": Gpu(
        "a100-80gb",
        80 * GB,
        2.039e12,
        "NVIDIA A100 datasheet: A100 80GB SXM HBM2e, 2,039 GB/s",
    ),
    "a100-40gb": Gpu(
        "a100-40gb",
        40 * GB,
        1.555e12,
        "NVIDIA A100 datasheet: A100 40GB HBM2, 1,555 GB/s",
    ),
    "l4": Gpu("l4", 24 * GB, 300e9, "NVIDIA L4 datasheet: 24 GB GDDR6, 300 GB/s"),
}

LINKS: Mapping[str, Link] = {
    "pcie4": Link(
        "pcie4",
        31.5e9,
        "PCI-SIG PCIe 4.0: 16 GT/s per lane, 128b/130b encoding, x16 = 31.5 GB/s per direction",
    ),
    "pcie5": Link(
        "pcie5",
        63.0e9,
        "PCI-SIG PCIe 5.0: 32 GT/s per lane, 128b/130b encoding, x16 = 63 GB/s per direction",
    ),
    "nvme": Link(
        "nvme",
        7.0e9,
        "a PCIe 4.0 x4 NVMe SSD's sequential read (e.g. Samsung 990 PRO datasheet: 7,450 MB/s)",
    ),
    "net100": Link("net100", 12.5e9, "100 Gb/s Ethernet or InfiniBand EDR: 12.5 GB/s line rate"),
    "net400": Link("net400", 50.0e9, "400 Gb/s Ethernet or InfiniBand NDR: 50 GB/s line rate"),
}

_UNITS: Mapping[str, int] = {
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
_AMOUNT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]+)\s*$")


def parse_size(text: str) -> int:
    """Bytes from a size with its unit (``64GiB``, ``500GB``, ``0B``; B, kB, MB, GB, TB
    and KiB ... TiB). A bare number is refused: GB and GiB differ by 7%."""
    match = _AMOUNT.match(text)
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _UNITS:
        raise ValueError(
            f"size {text!r}: give a number with its unit, e.g. 64GiB or 500GB "
            "(units: B, kB, MB, GB, TB, KiB, MiB, GiB, TiB)"
        )
    return int(float(match.group(1)) * _UNITS[unit])


def parse_rate(text: str) -> float:
    """Bytes per second from a link preset (`LINKS`) or a rate with its unit (``20GB/s``,
    ``25GiB/s``)."""
    preset = LINKS.get(text.strip().lower())
    if preset is not None:
        return preset.bytes_per_s
    amount, slash, per = text.strip().partition("/")
    if slash and per.strip().lower() == "s":
        try:
            rate = float(parse_size(amount))
        except ValueError:
            pass
        else:
            if rate > 0:
                return rate
    raise ValueError(
        f"bandwidth {text!r}: give a link preset ({', '.join(LINKS)}) or a positive rate "
        "with its unit, e.g. 20GB/s"
    )
