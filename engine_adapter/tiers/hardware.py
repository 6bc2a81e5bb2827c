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

# the prefix of a unit (case-insensitive: k, M, G, T and Ki ... Ti); the last letter is
# case-sensitive: B a byte, b a bit (a network link's 100 Gb/s is 12.5 GB/s)
_PREFIXES: Mapping[str, int] = {
    "": 1,
    "k": 10**3,
    "m": 10**6,
    "g": 10**9,
    "t": 10**12,
    "ki": 2**10,
    "mi": 2**20,
    "gi": 2**30,
    "ti": 2**40,
}
_AMOUNT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)([bB])\s*$")
_UNIT_HELP = "units: B, kB, MB, GB, TB, KiB, MiB, GiB, TiB"


def _amount(text: str) -> tuple[float, bool] | None:
    """A number with its unit, in the unit's bytes or bits, and whether it is bits (a
    lower-case ``b``); None when it is not one."""
    match = _AMOUNT.match(text)
    if match is None:
        return None
    scale = _PREFIXES.get(match.group(2).lower())
    if scale is None:
        return None
    return float(match.group(1)) * scale, match.group(3) == "b"


def parse_size(text: str) -> int:
    """Bytes from a size with its unit (``64GiB``, ``500GB``, ``0B``; B, kB, MB, GB, TB
    and KiB ... TiB). A bare number is refused (GB and GiB differ by 7%), and so is a size
    in bits (``64Gb``: a lower-case b is a bit, 8 times less than a byte)."""
    amount = _amount(text)
    if amount is None:
        raise ValueError(
            f"size {text!r}: give a number with its unit, e.g. 64GiB or 500GB ({_UNIT_HELP})"
        )
    value, bits = amount
    if bits:
        raise ValueError(
            f"size {text!r} is in bits (a lower-case b): sizes are bytes, give it with B, "
            f"e.g. 64GiB or 500GB ({_UNIT_HELP})"
        )
    return int(value)


def parse_rate(text: str) -> float:
    """Bytes per second from a link preset (`LINKS`) or a rate with its unit: bytes
    (``20GB/s``, ``25GiB/s``) or bits (``100Gb/s`` is 12.5 GB/s)."""
    preset = LINKS.get(text.strip().lower())
    if preset is not None:
        return preset.bytes_per_s
    amount, slash, per = text.strip().partition("/")
    parsed = _amount(amount) if slash and per.strip().lower() == "s" else None
    if parsed is not None:
        value, bits = parsed
        rate = value / 8 if bits else value
        if rate > 0:
            return rate
    raise ValueError(
        f"bandwidth {text!r}: give a link preset ({', '.join(LINKS)}) or a positive rate "
        "with its unit, e.g. 20GB/s (bytes) or 100Gb/s (bits)"
    )
