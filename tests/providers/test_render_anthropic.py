"""render_anthropic: tools -> system -> messages, tier breakpoints, TTL order, limits."""

from __future__ import annotations

import copy
import warnings
from typing import Any

import anthropic
import pytest
from prefixkit.sdk import (
    PrefixkitWarning,
    Prompt,
    RenderError,
    Segment,
    Stability,
    UncachedPrefixWarning,
    UnknownModelWarning,
    render_anthropic,
)
from prefixkit.testing.providers import MockProvider

from .prompts import LONG_INSTRUCTIONS, plain, support_prompt

MODEL = "claude-sonnet-5"


def marked_blocks(body: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(where, text or tool name, ttl) of every block carrying cache_control, in wire order."""
    found = []
    for tool in body.get("tools", []):
        if "cache_control" in tool:
            found.append(("tools", tool["name"], tool["cache_control"]["ttl"]))
    for block in body.get("system", []):
        if "cache_control" in block:
            found.append(("system", block["text"][:30], block["cache_control"]["ttl"]))
    for message in body["messages"]:
        for block in message["content"]:
            if "cache_control" in block:
                found.append((message["role"], block["text"][:30], block["cache_control"]["ttl"]))
    return found


def send(
    client: anthropic.Anthropic, api: MockProvider, prompt: Prompt, **options: Any
) -> dict[str, Any]:
    client.messages.create(**render_anthropic(prompt, model=MODEL, max_tokens=256, **options))
    return api.body


def test_wire_order_is_tools_system_then_messages_with_context_first(
    anthropic_client: anthropic.Anthropic, api: MockProvider
) -> None:
    body = send(anthropic_client, api, support_prompt())
    assert [tool["name"] for tool in body["tools"]] == ["lookup_invoice"]
    assert body["tools"][0]["input_schema"]["required"] == ["invoice_id"]
    assert [block["text"][:12] for block in body["system"]] == ["You are the ", "Refund polic"]
    first = body["messages"][0]
    assert first["role"] == "user"
    assert [block["text"][:10] for block in first["content"]] == ["Price list", "How much i"]


def test_breakpoints_end_static_and_versioned_tiers_and_the_rolling_session_with_5m(
    anthropic_client: anthropic.Anthropic, api: MockProvider
) -> None:
    body = send(anthropic_client, api, support_prompt())
    assert marked_blocks(body) == [
        ("system", LONG_INSTRUCTIONS[:30], "5m"),
        ("system", "Refund policy: refunds within ", "5m"),
        ("user", "Price list: egress $0.09/GB, s", "5m"),
    ]


def test_reuse_every_twenty_minutes_marks_the_static_tiers_1h(
    anthropic_client: anthropic.Anthropic, api: MockProvider
) -> None:
    body = send(anthropic_client, api, support_prompt(), reuse_interval=20 * 60)
    assert [ttl for _, _, ttl in marked_blocks(body)] == ["1h", "1h", "5m"]


def test_reuse_every_minute_keeps_the_static_tiers_at_5m() -> None:
    kwargs = render_anthropic(support_prompt(), model=MODEL, max_tokens=10, reuse_interval=60)
    assert kwargs["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "5m"}


def test_reuse_less_often_than_hourly_leaves_the_static_tiers_unmarked_with_a_warning() -> None:
    with pytest.warns(PrefixkitWarning, match="outlives the longest cache TTL"):
        kwargs = render_anthropic(
            support_prompt(), model=MODEL, max_tokens=10, reuse_interval=3 * 3600
        )
    assert all("cache_control" not in block for block in kwargs["system"])
    assert plain(kwargs)["messages"][0]["content"][0]["cache_control"]["ttl"] == "5m"


def test_static_5m_ttl_on_a_prompt_without_versioned_tier_renders() -> None:
    prompt = Prompt(system=LONG_INSTRUCTIONS, messages=[Segment.dynamic("q")])
    kwargs = render_anthropic(prompt, model=MODEL, max_tokens=10, ttl={Stability.STATIC: "5m"})
    assert kwargs["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "5m"}


def test_a_1h_session_ttl_raises_the_unspecified_static_tier_to_1h() -> None:
    kwargs = render_anthropic(
        support_prompt(), model=MODEL, max_tokens=10, ttl={Stability.SESSION: "1h"}
    )
    assert plain(kwargs)["system"][0]["cache_control"]["ttl"] == "1h"


def test_dynamic_question_is_never_marked(
    anthropic_client: anthropic.Anthropic, api: MockProvider
) -> None:
    body = send(anthropic_client, api, support_prompt("What is my invoice total?"))
    assert all("What is my" not in text for _, text, _ in marked_blocks(body))


def test_rolling_breakpoint_moves_to_the_latest_turn(
    anthropic_client: anthropic.Anthropic, api: MockProvider
) -> None:
    second = support_prompt().next_turn("It is $45.", "And 1 TB?")
    body = send(anthropic_client, api, second)
    assert marked_blocks(body)[-1] == ("assistant", "It is $45.", "5m")


def test_automatic_mode_sets_top_level_marker_and_drops_the_rolling_one(
    anthropic_client: anthropic.Anthropic, api: MockProvider
) -> None:
    body = send(anthropic_client, api, support_prompt(), automatic=True)
    assert body["cache_control"] == {"type": "ephemeral", "ttl": "5m"}
    assert [where for where, _, _ in marked_blocks(body)] == ["system", "system"]


def long_conversation(turns: int) -> Prompt:
    messages: list[Any] = []
    for turn in range(turns):
        messages += [
            {"role": "user", "content": f"question {turn}"},
            {"role": "assistant", "content": f"answer {turn}"},
        ]
    return Prompt(system=LONG_INSTRUCTIONS, messages=[*messages, Segment.dynamic("last")])


def test_long_conversation_gets_a_checkpoint_within_the_20_block_lookback(
    anthropic_client: anthropic.Anthropic, api: MockProvider
) -> None:
    body = send(anthropic_client, api, long_conversation(15))
    flat = [block for message in body["messages"] for block in message["content"]]
    marked = [i for i, block in enumerate(flat) if "cache_control" in block]
    assert len(marked) >= 2
    rolling, checkpoint = marked[-1], marked[-2]
    assert flat[rolling]["text"] == "answer 14"
    assert 0 < rolling - checkpoint < 20


def test_checkpoints_stay_put_as_the_conversation_grows(
    anthropic_client: anthropic.Anthropic, api: MockProvider
) -> None:
    def checkpoints(turns: int) -> set[str]:
        body = send(anthropic_client, api, long_conversation(turns))
        blocks = [b for m in body["messages"] for b in m["content"]][:-2]
        return {b["text"] for b in blocks if "cache_control" in b}

    assert checkpoints(15) & checkpoints(16)


def test_short_conversation_needs_no_checkpoint(
    anthropic_client: anthropic.Anthropic, api: MockProvider
) -> None:
    body = send(anthropic_client, api, long_conversation(3))
    assert len(marked_blocks(body)) == 2  # static system end + rolling


def test_caller_markers_are_kept_and_counted(
    anthropic_client: anthropic.Anthropic, api: MockProvider
) -> None:
    prompt = Prompt(
        system=[
            Segment.static(LONG_INSTRUCTIONS, cache_control={"type": "ephemeral", "ttl": "1h"}),
            Segment.static("Be exact.", cache_control={"type": "ephemeral", "ttl": "1h"}),
            Segment.versioned("Policy v3.", version="3", cache_control={"type": "ephemeral"}),
        ],
        messages=[
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
            Segment.dynamic("question"),
        ],
    )
    body = send(anthropic_client, api, prompt)
    assert marked_blocks(body) == [
        ("system", LONG_INSTRUCTIONS[:30], "1h"),
        ("system", "Be exact.", "1h"),
        ("system", "Policy v3.", "5m"),
        ("assistant", "hello", "5m"),
    ]


def test_five_caller_markers_raise_naming_them() -> None:
    marker = {"type": "ephemeral", "ttl": "5m"}
    prompt = Prompt(
        system=[
            Segment.static(f"rule {i}", cache_control=marker, name=f"rule{i}") for i in range(5)
        ],
        messages=[Segment.dynamic("q")],
    )
    with pytest.raises(
        RenderError, match=r"5 caller cache markers exceed the provider limit of 4.*rule0"
    ):
        render_anthropic(prompt, model=MODEL, max_tokens=10)


def test_four_caller_markers_plus_automatic_mode_raise() -> None:
    marker = {"type": "ephemeral", "ttl": "5m"}
    prompt = Prompt(
        system=[Segment.static(f"rule {i}", cache_control=marker) for i in range(4)],
        messages=[Segment.dynamic("q")],
    )
    with pytest.raises(RenderError, match="plus 1 for the request-level cache mode"):
        render_anthropic(prompt, model=MODEL, max_tokens=10, automatic=True)


def test_caller_1h_after_caller_5m_raises() -> None:
    prompt = Prompt(
        system=[
            Segment.static("a", cache_control={"type": "ephemeral", "ttl": "5m"}, name="first"),
            Segment.static("b", cache_control={"type": "ephemeral", "ttl": "1h"}, name="second"),
        ],
        messages=[Segment.dynamic("q")],
    )
    with pytest.raises(RenderError, match="second has cache ttl 1h after system first with ttl 5m"):
        render_anthropic(prompt, model=MODEL, max_tokens=10)


def test_automatic_1h_after_caller_5m_raises() -> None:
    prompt = Prompt(
        system=[Segment.static("a", cache_control={"type": "ephemeral", "ttl": "5m"})],
        messages=[Segment.dynamic("q")],
    )
    with pytest.raises(RenderError, match="automatic caching has cache ttl 1h"):
        render_anthropic(prompt, model=MODEL, max_tokens=10, automatic=True, automatic_ttl="1h")


def test_own_markers_before_a_caller_1h_marker_become_1h(
    anthropic_client: anthropic.Anthropic, api: MockProvider
) -> None:
    prompt = Prompt(
        system=LONG_INSTRUCTIONS,
        messages=[
            {"role": "user", "content": "hi", "cache_control": {"type": "ephemeral", "ttl": "1h"}},
            Segment.dynamic("q"),
        ],
    )
    body = send(
        anthropic_client, api, prompt, ttl={Stability.STATIC: "5m", Stability.VERSIONED: "5m"}
    )
    assert [ttl for _, _, ttl in marked_blocks(body)] == ["1h", "1h"]


def test_tier_ttls_that_put_5m_before_1h_raise() -> None:
    with pytest.raises(RenderError, match="longer TTLs must come first"):
        render_anthropic(
            support_prompt(),
            model=MODEL,
            max_tokens=10,
            ttl={Stability.STATIC: "5m", Stability.SESSION: "1h"},
        )


def test_non_anthropic_caller_marker_raises() -> None:
    prompt = Prompt(
        system=[Segment.static("a", cache_control={"type": "persistent"})],
        messages=[Segment.dynamic("q")],
    )
    with pytest.raises(RenderError, match="is not an Anthropic marker"):
        render_anthropic(prompt, model=MODEL, max_tokens=10)


def test_prefix_below_model_minimum_warns_with_counts() -> None:
    prompt = Prompt(system="Be brief.", messages=[Segment.dynamic("hi")])
    with pytest.warns(
        UncachedPrefixWarning, match=r"below the 1024-token minimum of claude-sonnet-5"
    ):
        render_anthropic(prompt, model=MODEL, max_tokens=10)


def test_prefix_above_model_minimum_does_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        render_anthropic(support_prompt(), model=MODEL, max_tokens=10)


def test_minimum_comes_from_the_model_table() -> None:
    # ~2.3k tokens: above Sonnet 5's 1024, below Haiku 4.5's 4096.
    with pytest.warns(UncachedPrefixWarning, match="4096-token minimum of claude-haiku-4-5"):
        render_anthropic(support_prompt(), model="claude-haiku-4-5-20251001", max_tokens=10)


def test_unknown_model_warns_instead_of_guessing() -> None:
    with pytest.warns(
        UnknownModelWarning, match="'claude-imaginary-9' is not in prefixkit's data table"
    ):
        render_anthropic(support_prompt(), model="claude-imaginary-9", max_tokens=10)


def test_system_message_mid_conversation_is_sent_as_a_system_message(
    anthropic_client: anthropic.Anthropic, api: MockProvider
) -> None:
    prompt = Prompt(
        system=LONG_INSTRUCTIONS,
        messages=[
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
            {"role": "system", "content": "The user is now on the premium plan."},
            Segment.dynamic("q"),
        ],
    )
    body = send(anthropic_client, api, prompt)
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "system", "user"]
    assert body["messages"][2]["content"][0]["text"] == "The user is now on the premium plan."


def test_prompt_without_messages_raises() -> None:
    with pytest.raises(RenderError, match="no messages"):
        render_anthropic(Prompt(system="x"), model=MODEL, max_tokens=10)


def test_extra_request_parameters_pass_through_but_cannot_override_layout() -> None:
    metadata = {"user_id": "u-42"}
    kwargs: dict[str, object] = dict(
        render_anthropic(support_prompt(), model=MODEL, max_tokens=10, metadata=metadata)
    )
    assert kwargs["metadata"] == metadata
    with pytest.raises(RenderError, match=r"sets system \(give it as Prompt\(system=...\)\)"):
        render_anthropic(support_prompt(), model=MODEL, max_tokens=10, system="other")


def test_openai_shaped_tools_are_converted() -> None:
    prompt = Prompt(
        tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
        system=LONG_INSTRUCTIONS,
        messages=[Segment.dynamic("q")],
    )
    kwargs = render_anthropic(prompt, model=MODEL, max_tokens=10)
    assert kwargs["tools"] == [{"name": "f", "input_schema": {"type": "object"}}]


def test_render_does_not_mutate_the_prompt() -> None:
    prompt = support_prompt()
    before = copy.deepcopy(prompt)
    kwargs = render_anthropic(prompt, model=MODEL, max_tokens=10)
    kwargs["system"][0]["text"] = "changed"
    assert prompt == before
    assert render_anthropic(prompt, model=MODEL, max_tokens=10)["system"][0]["text"] != "changed"


def test_unknown_caller_ttl_raises() -> None:
    prompt = Prompt(
        system=[Segment.static("a", cache_control={"type": "ephemeral", "ttl": "2h"}, name="x")],
        messages=[Segment.dynamic("q")],
    )
    with pytest.raises(RenderError, match="cache ttl '2h' of system x is not one of 1h, 5m"):
        render_anthropic(prompt, model=MODEL, max_tokens=10)
