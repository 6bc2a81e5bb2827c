"""break_even: write premium once versus read discount per reuse."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prefixkit.sdk import Pricing, RenderError, break_even, choose_ttl


def test_5m_anthropic_entry_pays_from_the_first_reuse() -> None:
    verdict = break_even(5000, 1, provider="anthropic", model="claude-opus-4-5", ttl="5m")
    assert verdict.pays and verdict.reuses_needed == 1
    assert verdict.cost_with_cache == pytest.approx(5000 * (1.25 + 0.1))
    assert verdict.cost_without_cache == 10_000
    assert verdict.usd_saved == pytest.approx((10_000 - 6750) * 5 / 1e6)


def test_1h_anthropic_entry_needs_two_reuses() -> None:
    once = break_even(5000, 1, provider="anthropic", model="claude-opus-4-5", ttl="1h")
    twice = break_even(5000, 2, provider="anthropic", model="claude-opus-4-5", ttl="1h")
    assert not once.pays and twice.pays
    assert once.reuses_needed == 2
    assert once.saved < 0


def test_no_reuse_never_pays_with_a_write_premium() -> None:
    assert not break_even(5000, 0, provider="anthropic", model="claude-opus-4-5").pays


def test_prefix_below_the_minimum_cannot_pay_and_says_why() -> None:
    verdict = break_even(2000, 50, provider="anthropic", model="claude-haiku-4-5")
    assert not verdict.pays and verdict.reuses_needed is None
    assert "below the minimum cacheable prefix of 4096" in verdict.reason
    assert verdict.saved == 0


def test_openai_without_write_premium_pays_from_one_reuse() -> None:
    verdict = break_even(4000, 1, provider="openai", model="gpt-4o")
    assert verdict.pays and verdict.reuses_needed == 1
    assert verdict.saved_ratio == pytest.approx(1 - (1 + 0.5) / 2)


def test_read_price_at_input_price_never_pays() -> None:
    pricing = Pricing(None, None, cache_read_multiplier=1.0, cache_write_multipliers={"5m": 1.25})
    verdict = break_even(5000, 100, pricing=pricing)
    assert not verdict.pays and verdict.reuses_needed is None
    assert verdict.usd_saved is None


def test_unknown_model_raises_with_the_fix() -> None:
    with pytest.raises(RenderError, match="pass pricing=Pricing"):
        break_even(5000, 3, provider="openai", model="gpt-imaginary")


def test_negative_inputs_raise() -> None:
    with pytest.raises(ValueError, match="must be >= 0"):
        break_even(-1, 3, provider="openai", model="gpt-4o")


@given(
    write=st.floats(min_value=1.0, max_value=3.0),
    read=st.floats(min_value=0.0, max_value=0.99),
    reuses=st.integers(min_value=0, max_value=50),
)
def test_pays_exactly_from_reuses_needed(write: float, read: float, reuses: int) -> None:
    pricing = Pricing(None, None, cache_read_multiplier=read, cache_write_multipliers={"5m": write})
    verdict = break_even(1000, reuses, pricing=pricing)
    assert verdict.reuses_needed is not None
    assert verdict.pays == (reuses >= verdict.reuses_needed)


def test_ttl_the_provider_does_not_offer_raises() -> None:
    with pytest.raises(ValueError, match="ttl '1h' has no write price: use one of 30m, 12h"):
        break_even(5000, 3, provider="openai", model="gpt-4o", ttl="1h")


@pytest.mark.parametrize(
    ("interval", "ttl"),
    [(30, "5m"), (300, "5m"), (301, "1h"), (20 * 60, "1h"), (3600, "1h"), (3601, None)],
)
def test_choose_ttl_takes_the_cheapest_ttl_that_outlives_the_reuse_interval(
    interval: float, ttl: str | None
) -> None:
    assert choose_ttl(interval, provider="anthropic", model="claude-sonnet-4-5").ttl == ttl


def test_choose_ttl_leaves_a_1h_entry_unmarked_when_one_reuse_cannot_pay_its_write() -> None:
    choice = choose_ttl(20 * 60, reuses=1)
    assert choice.ttl is None and "2.10" in choice.reason and "2.00 uncached" in choice.reason


def test_choose_ttl_reports_the_cost_relative_to_no_cache() -> None:
    # 5m: 1.25 + 10 * 0.1 = 2.25 against 11 uncached
    assert choose_ttl(60).cost_ratio == pytest.approx(2.25 / 11)


def test_choose_ttl_refuses_a_non_positive_interval() -> None:
    with pytest.raises(ValueError, match="reuse_interval"):
        choose_ttl(0)
