"""The model data table: every model has its source and date, prices or a reason, sane multipliers."""

from __future__ import annotations

import re
import typing

import anthropic.types
import openai.types
import pytest
from prefixkit.sdk import ModelInfo, known_models, model_info

MODELS = known_models()


@pytest.mark.parametrize("info", MODELS, ids=lambda info: info.name)
def test_every_model_names_its_source_and_the_date_it_was_read(info: ModelInfo) -> None:
    assert info.source
    assert info.read_on is not None and re.fullmatch(r"\d{4}-\d{2}-\d{2}", info.read_on)


@pytest.mark.parametrize("info", MODELS, ids=lambda info: info.name)
def test_a_model_without_prices_says_why(info: ModelInfo) -> None:
    prices = (info.pricing.input_usd_per_mtok, info.pricing.output_usd_per_mtok)
    assert (None in prices) == (info.price_note is not None)
    assert prices.count(None) in (0, 2)


@pytest.mark.parametrize("info", MODELS, ids=lambda info: info.name)
def test_reads_are_discounted_and_writes_are_not(info: ModelInfo) -> None:
    assert 0 < info.pricing.cache_read_multiplier < 1
    assert all(m >= 1 for m in info.pricing.cache_write_multipliers.values())


def test_anthropic_writes_cost_1_25x_for_5m_and_2x_for_1h() -> None:
    for info in known_models("anthropic"):
        assert info.pricing.cache_write_multipliers == {"5m": 1.25, "1h": 2.0}, info.name


def test_every_current_claude_model_of_the_official_sdk_is_known() -> None:
    ids = typing.get_args(typing.get_args(anthropic.types.Model)[0])
    current = [
        i for i in ids if re.fullmatch(r"claude-(opus|sonnet|haiku|fable|mythos)-[45](-\d)?", i)
    ]
    assert current and [i for i in current if model_info("anthropic", i) is None] == []


def test_every_gpt_5_and_6_model_of_the_official_sdk_is_known() -> None:
    ids = typing.get_args(openai.types.ChatModel)
    families = [
        i for i in ids if re.fullmatch(r"gpt-[56](\.\d)?(-(sol|terra|luna|astra|mini|nano))?", i)
    ]
    assert families and [i for i in families if model_info("openai", i) is None] == []


def test_the_new_claude_models_have_prices() -> None:
    for name in ("claude-sonnet-5-5", "claude-haiku-5-5", "claude-opus-5-5", "claude-opus-5"):
        info = model_info("anthropic", name)
        assert info is not None and info.pricing.input_usd_per_mtok is not None, name


def test_haiku_5_5_prompts_above_100k_tokens_take_the_long_prompt_rates() -> None:
    info = model_info("anthropic", "claude-haiku-5-5")
    assert info is not None
    assert info.pricing.prices_for(100_000) == (0.10, 0.50)
    assert info.pricing.prices_for(100_001) == (0.50, 2.50)


def test_known_models_of_one_provider_are_that_providers() -> None:
    assert {info.provider for info in known_models("openai")} == {"openai"}
    assert len(known_models()) == len(known_models("anthropic")) + len(known_models("openai"))
