"""Block-aligned padding: the static prefix ends on a KV block boundary of the full sequence."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prefixkit.sdk import (
    AlignmentError,
    HFTokenizer,
    Prompt,
    Segment,
    align_static_prefix,
    canonical_text,
)

PROMPTS = Path(__file__).parent / "fixtures" / "prompts"
SUPPORT = (PROMPTS / "support@v2.md").read_text()
PRICES = (PROMPTS / "docs" / "pricing@2026-06.md").read_text()


def support_prompt(question: str = "How much is egress?", policy: str = PRICES) -> Prompt:
    return Prompt(
        system=[Segment.static(SUPPORT, name="support", version="v2"), Segment.static(policy)],
        context=[Segment.session("Bucket logs-eu holds 40 GB.")],
        messages=[Segment.dynamic(question)],
    )


def static_prefix_ids(hf_tokenizer: HFTokenizer, prompt: Prompt, static_tokens: int) -> list[int]:
    full = hf_tokenizer.chat_token_ids(
        [
            {"role": "system", "content": "\n\n".join(s.text for s in prompt.system)},
            *({"role": s.role, "content": s.text} for s in (*prompt.context, *prompt.messages)),
        ]
    )
    return full[:static_tokens]


@pytest.mark.parametrize("block_size", [16, 32, 64])
def test_padded_static_prefix_ends_on_a_block_boundary(
    hf_tokenizer: HFTokenizer, block_size: int
) -> None:
    padded, report = align_static_prefix(support_prompt(), hf_tokenizer, block_size)
    assert report.aligned, report.reason
    assert report.static_tokens % block_size == 0
    assert report.static_tokens > 0
    expected = hf_tokenizer.chat_token_ids(
        [
            {"role": "system", "content": "\n\n".join(s.text for s in padded.system)},
            {"role": "user", "content": "Bucket logs-eu holds 40 GB."},
            {"role": "user", "content": "How much is egress?"},
        ]
    )
    assert list(report.token_ids) == expected
    assert report.total_tokens == len(expected)


def test_padding_is_inert_whitespace_on_the_last_static_segment(
    hf_tokenizer: HFTokenizer,
) -> None:
    original = support_prompt()
    padded, report = align_static_prefix(original, hf_tokenizer, 32)
    assert report.pad_tokens > 0
    assert report.padding.strip() == ""
    last = padded.system[-1]
    assert last.padding == report.padding
    assert last.text == original.system[-1].text + report.padding
    assert canonical_text(last.text) == original.system[-1].text
    assert padded.system[0] == original.system[0]
    assert padded.context == original.context and padded.messages == original.messages


def test_padding_survives_recreating_the_segment(hf_tokenizer: HFTokenizer) -> None:
    padded, _ = align_static_prefix(support_prompt(), hf_tokenizer, 32)
    last = padded.system[-1]
    assert dataclasses.replace(last, name="policy").text == last.text


def test_padding_is_deterministic(hf_tokenizer: HFTokenizer) -> None:
    first = align_static_prefix(support_prompt(), hf_tokenizer, 32)
    second = align_static_prefix(support_prompt(), hf_tokenizer, 32)
    assert first == second


def test_requests_sharing_the_static_prefix_share_its_aligned_tokens(
    hf_tokenizer: HFTokenizer,
) -> None:
    _, report_one = align_static_prefix(support_prompt("How much is egress?"), hf_tokenizer, 32)
    _, report_two = align_static_prefix(support_prompt("Restore archive?"), hf_tokenizer, 32)
    assert report_one.static_tokens == report_two.static_tokens
    n = report_one.static_tokens
    assert report_one.token_ids[:n] == report_two.token_ids[:n]
    assert report_one.token_ids[n:] != report_two.token_ids[n:]


def test_an_already_aligned_prefix_gets_no_padding(hf_tokenizer: HFTokenizer) -> None:
    padded, report = align_static_prefix(support_prompt(), hf_tokenizer, 32)
    again, second = align_static_prefix(padded, hf_tokenizer, 32)
    assert second.aligned
    assert second.static_tokens == report.static_tokens
    assert again.render_text() == padded.render_text()


def test_block_size_one_is_always_aligned_without_padding(hf_tokenizer: HFTokenizer) -> None:
    prompt = support_prompt()
    padded, report = align_static_prefix(prompt, hf_tokenizer, 1)
    assert report.aligned and report.pad_tokens == 0 and padded is prompt


def test_padding_over_the_budget_is_skipped_with_the_reason(hf_tokenizer: HFTokenizer) -> None:
    prompt = support_prompt()
    _, unbounded = align_static_prefix(prompt, hf_tokenizer, 64)
    assert unbounded.pad_tokens > 1
    padded, report = align_static_prefix(prompt, hf_tokenizer, 64, max_pad_tokens=0)
    assert not report.aligned
    assert padded is prompt
    assert "over the budget of 0" in (report.reason or "")
    assert report.pad_tokens == 0


def test_prompt_without_static_prefix_reports_why(hf_tokenizer: HFTokenizer) -> None:
    prompt = Prompt(messages=[Segment.dynamic("Hi")])
    padded, report = align_static_prefix(prompt, hf_tokenizer, 32)
    assert padded is prompt
    assert not report.aligned
    assert "no static prefix" in (report.reason or "")


def test_static_prefix_ending_in_a_tool_reports_why(hf_tokenizer: HFTokenizer) -> None:
    tool = {"name": "lookup", "description": "Look up a bucket", "input_schema": {}}
    prompt = Prompt(tools=[tool], messages=[Segment.dynamic("Hi")])
    _, report = align_static_prefix(prompt, hf_tokenizer, 32)
    assert not report.aligned
    assert "tool definition" in (report.reason or "")


def test_template_that_trims_content_reports_why(
    tmp_path: Path, chatml_tokenizer_builder: Callable[[Path], Path]
) -> None:
    folder = chatml_tokenizer_builder(tmp_path / "trimming")
    config_path = folder / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config["chat_template"] = config["chat_template"].replace(
        "message['content']", "message['content'] | trim"
    )
    config_path.write_text(json.dumps(config))
    _, report = align_static_prefix(support_prompt(), HFTokenizer(folder), 32)
    assert not report.aligned
    assert "does not keep trailing whitespace" in (report.reason or "")


def test_non_positive_block_size_is_an_error(hf_tokenizer: HFTokenizer) -> None:
    with pytest.raises(AlignmentError, match="positive"):
        align_static_prefix(support_prompt(), hf_tokenizer, 0)


words = st.sampled_from(
    ["bucket", "volume", "egress", "price", "  indented", "\n", "\n\n\n", "EUR", "0.05", "é", "#"]
)
texts = st.lists(words, min_size=1, max_size=60).map(" ".join)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    static=texts,
    session=texts,
    question=texts,
    block_size=st.sampled_from([16, 32, 48, 128]),
    budget=st.integers(min_value=0, max_value=160),
)
def test_padding_lands_on_a_block_boundary_or_reports_why(
    hf_tokenizer: HFTokenizer,
    static: str,
    session: str,
    question: str,
    block_size: int,
    budget: int,
) -> None:
    prompt = Prompt(
        system=[Segment.static(static)],
        context=[Segment.session(session)],
        messages=[Segment.dynamic(question)],
    )
    padded, report = align_static_prefix(prompt, hf_tokenizer, block_size, max_pad_tokens=budget)
    if report.aligned:
        assert report.static_tokens % block_size == 0
        assert report.pad_tokens <= budget
        other = Prompt(
            system=padded.system,
            context=[Segment.session(session + " more")],
            messages=[Segment.dynamic("another question")],
        )
        assert static_prefix_ids(hf_tokenizer, other, report.static_tokens) == list(
            report.token_ids[: report.static_tokens]
        )
    else:
        assert report.reason
        assert padded is prompt
