"""Hardware inputs: sizes and rates with units, presets with their sources."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prefixkit.cli import analyze as analyze_command
from prefixkit.engine_adapter.tiers.hardware import GPUS, LINKS, parse_rate, parse_size


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("64GiB", 64 * 2**30),
        ("500GB", 500 * 10**9),
        ("1.5 TiB", int(1.5 * 2**40)),
        ("0B", 0),
        ("512miB", 512 * 2**20),
    ],
)
def test_a_size_with_its_unit_is_bytes(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["64", "64 G", "GiB", "-1GiB", "64GiBs"])
def test_a_size_without_a_known_unit_is_refused_with_an_example(text: str) -> None:
    with pytest.raises(ValueError, match=r"give a number with its unit, e\.g\. 64GiB"):
        parse_size(text)


def test_a_rate_is_a_link_preset_or_a_size_per_second() -> None:
    assert parse_rate("pcie5") == LINKS["pcie5"].bytes_per_s
    assert parse_rate("20GB/s") == 20e9
    assert parse_rate("1GiB/s") == 2**30


@pytest.mark.parametrize("text", ["64Gb", "64Gib", "500gb", "8b"])
def test_a_size_in_bits_is_refused_naming_bytes(text: str) -> None:
    with pytest.raises(ValueError, match=r"is in bits \(a lower-case b\): sizes are bytes"):
        parse_size(text)


@pytest.mark.parametrize(
    ("text", "rate"),
    [("100Gb/s", 12.5e9), ("400Gb/s", 50e9), ("8Mb/s", 1e6), ("100GB/s", 100e9)],
)
def test_a_rate_in_bits_is_an_eighth_of_the_same_in_bytes(text: str, rate: float) -> None:
    assert parse_rate(text) == rate


def test_a_network_preset_is_the_rate_its_source_gives_in_bits() -> None:
    assert parse_rate("net100") == parse_rate("100Gb/s")
    assert parse_rate("net400") == parse_rate("400Gb/s")


@pytest.mark.parametrize("text", ["20GB", "fast", "0GB/s", "20GB/min"])
def test_a_rate_that_is_neither_is_refused_naming_the_presets(text: str) -> None:
    with pytest.raises(ValueError, match="give a link preset \\(pcie4, pcie5"):
        parse_rate(text)


def test_every_preset_names_its_source() -> None:
    assert all(g.source and g.hbm_bytes > 0 and g.hbm_bytes_per_s > 0 for g in GPUS.values())
    assert all(link.source and link.bytes_per_s > 0 for link in LINKS.values())


def test_the_command_line_offers_exactly_the_presets() -> None:
    assert tuple(GPUS) == analyze_command._GPU_NAMES
    assert tuple(LINKS) == analyze_command._LINK_NAMES


@given(st.integers(0, 10**6), st.sampled_from(["KiB", "MiB", "GiB", "kB", "MB", "GB"]))
def test_a_binary_unit_is_a_power_of_1024_and_a_decimal_one_of_1000(amount: int, unit: str) -> None:
    base = 1024 if unit.endswith("iB") else 1000
    power = "KMG".index(unit[0].upper()) + 1
    assert parse_size(f"{amount}{unit}") == amount * base**power
