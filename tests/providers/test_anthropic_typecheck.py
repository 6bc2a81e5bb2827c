"""A user's program sending `render_anthropic_beta` to `beta.messages.create` and
`render_anthropic_batch` to `messages.batches.create` passes `mypy --strict` (with
`disallow-any-expr`): the requests are the official client's own parameter types."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

# mypy --strict on a program outside the checkout, the official client included
pytestmark = pytest.mark.slow

PROGRAM = '''\
# mypy: disallow-any-expr
"""Anthropic beta messages and a batch of rendered requests, as a user writes them."""

import anthropic

from prefixkit.sdk import Prompt, Segment, render_anthropic_batch, render_anthropic_beta

POLICY = "You answer billing questions for Example Cloud. " * 200


def prompt_for(question: str) -> Prompt:
    return Prompt(system=Segment.static(POLICY, name="policy"), messages=[Segment.dynamic(question)])


def ask_beta(client: anthropic.Anthropic, question: str) -> str:
    kwargs = render_anthropic_beta(
        prompt_for(question),
        model="claude-sonnet-4-5",
        max_tokens=512,
        betas=["context-management-2025-06-27"],
    )
    message = client.beta.messages.create(**kwargs)
    return message.id


def send_batch(client: anthropic.Anthropic, questions: list[str]) -> str:
    prompts = {f"q{number}": prompt_for(q) for number, q in enumerate(questions)}
    requests = render_anthropic_batch(prompts, model="claude-sonnet-4-5", max_tokens=512)
    return client.messages.batches.create(requests=requests).id
'''

CHECKOUT = Path(__file__).resolve().parents[2]


def test_beta_and_batch_requests_pass_mypy_strict(tmp_path: Path) -> None:
    """Slow: mypy over the official anthropic client (seconds with the checkout's cache)."""
    program = tmp_path / "beta_app.py"
    program.write_text(PROGRAM)
    mypy = Path(sys.executable).with_name("mypy")
    result = subprocess.run(
        [str(mypy), "--strict", str(program)],
        cwd=CHECKOUT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success: no issues found in 1 source file" in result.stdout
