"""docs/sdk/clients.md: the pass-through parameters it names are the official methods' own."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from pathlib import Path

import anthropic
import openai

DOC = Path(__file__).parents[2] / "docs" / "sdk" / "clients.md"


def _sentence(after: str) -> str:
    text = " ".join(DOC.read_text(encoding="utf-8").split())
    start = text.index(after) + len(after)
    return text[start : text.index(";", start) if ";" in text[start:] else None]


def _parameters(method: Callable[..., object]) -> set[str]:
    return set(inspect.signature(method).parameters)


def test_the_anthropic_pass_through_parameters_are_messages_create_parameters() -> None:
    sentence = _sentence("Anthropic's `messages.create`")
    taken, _, refused = sentence.partition(", and no ")
    named = set(re.findall(r"`(\w+)`", taken))
    assert named, sentence
    parameters = _parameters(anthropic.Anthropic(api_key="x").messages.create)
    assert named <= parameters
    assert not set(re.findall(r"`(\w+)`", refused)) & parameters


def test_the_openai_pass_through_parameters_are_chat_completions_create_parameters() -> None:
    sentence = _sentence("OpenAI's `chat.completions.create`")
    named = set(re.findall(r"`(\w+)`", sentence.split("Retries")[0]))
    assert named
    assert named <= _parameters(openai.OpenAI(api_key="x").chat.completions.create)
