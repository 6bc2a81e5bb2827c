"""Errors carry what they describe: a program can act on the attributes, not only print
the message."""

from __future__ import annotations

import json
import math
import pickle
from pathlib import Path
from typing import Any

import pytest
from prefixkit.sdk import (
    AlignmentError,
    CanonicalError,
    HFTokenizer,
    LayoutError,
    LockfileError,
    MissingExtraError,
    Prompt,
    PromptDriftError,
    PromptNotFoundError,
    PromptRegistry,
    RenderError,
    SaltError,
    Segment,
    StaticPrefixChangedError,
    StaticPrefixChangedWarning,
    StaticPrefixGuard,
    TiktokenTokenizer,
    TokenizerError,
    ToolCall,
    ToolResult,
    UsageError,
    VLLMClient,
    align_static_prefix,
    canonical_json,
    read_lock,
    render_anthropic,
    render_vllm,
    require_extra,
    tenant_salt,
    write_lock,
)


def guarded(day: str) -> Prompt:
    return Prompt(
        system=[Segment.static("You are Harbor."), Segment.static(f"Today is {day}.", name="day")],
        messages=[Segment.dynamic("Hi")],
        name="support",
    )


def test_layout_error_names_both_segments_in_conflict_and_their_positions() -> None:
    with pytest.raises(LayoutError) as excinfo:
        Prompt(
            system=[
                Segment.dynamic("Today is Monday.", name="date"),
                Segment.static("Rules.", name="rules"),
            ]
        )
    error = excinfo.value
    assert (error.label, error.position) == ("rules", 1)
    assert (error.earlier_label, error.earlier_position) == ("date", 0)


def test_canonical_error_gives_the_value_and_its_json_path() -> None:
    with pytest.raises(CanonicalError) as excinfo:
        canonical_json({"limits": [1, float("nan")]})
    assert excinfo.value.path == "$.limits[1]"
    assert isinstance(excinfo.value.value, float) and math.isnan(excinfo.value.value)


def test_prompt_not_found_error_gives_the_name_version_and_what_exists(prompt_root: Path) -> None:
    write_lock(prompt_root)
    with pytest.raises(PromptNotFoundError) as excinfo:
        PromptRegistry(prompt_root).load("support", version="v9")
    error = excinfo.value
    assert (error.root, error.name, error.version) == (prompt_root, "support", "v9")
    assert error.available == ("v1", "v2")


def test_lockfile_error_gives_the_lock_path_and_the_wrong_key(tmp_path: Path) -> None:
    lock = tmp_path / "prefixkit.lock"
    lock.write_text(json.dumps({"lock_version": 1, "prompts": {"support@v1": []}}))
    with pytest.raises(LockfileError) as excinfo:
        read_lock(lock)
    assert (excinfo.value.path, excinfo.value.key) == (lock, "prompts.support@v1")


def test_prompt_drift_error_carries_the_drift_with_both_digests(prompt_root: Path) -> None:
    write_lock(prompt_root)
    path = prompt_root / "support@v2.md"
    path.write_text(path.read_text() + "\nAlways answer in French.\n")
    with pytest.raises(PromptDriftError) as excinfo:
        PromptRegistry(prompt_root).load("support", version="v2")
    drift = excinfo.value.drift
    assert excinfo.value.path == path
    assert (drift.key, drift.kind) == ("support@v2", "changed")
    assert (
        drift.expected == read_lock(prompt_root.parent / "prefixkit.lock").entries[drift.key].sha256
    )
    assert drift.actual is not None and drift.actual != drift.expected
    assert "+Always answer in French." in drift.diff


def test_static_prefix_changed_error_gives_the_prompt_segment_and_digests() -> None:
    guard = StaticPrefixGuard()
    monday, tuesday = guarded("Monday"), guarded("Tuesday")
    guard.check(monday)
    with pytest.raises(StaticPrefixChangedError) as excinfo:
        guard.check(tuesday)
    error = excinfo.value
    assert (error.prompt_name, error.position, error.label) == ("support", 1, "day")
    assert error.first_digest == monday.static_prefix_digest
    assert error.digest == tuesday.static_prefix_digest


def test_static_prefix_changed_warning_carries_the_same_data() -> None:
    guard = StaticPrefixGuard(mode="warn")
    guard.check(guarded("Monday"))
    with pytest.warns(StaticPrefixChangedWarning) as record:
        guard.check(guarded("Tuesday"))
    warning = record[0].message
    assert isinstance(warning, StaticPrefixChangedWarning)
    assert (warning.prompt_name, warning.position, warning.label) == ("support", 1, "day")


def test_tokenizer_error_names_the_tokenizer_asked_for() -> None:
    with pytest.raises(TokenizerError) as excinfo:
        TiktokenTokenizer.for_model("no-such-model")
    assert excinfo.value.tokenizer == "no-such-model"


def test_alignment_error_gives_the_block_size(hf_tokenizer: HFTokenizer) -> None:
    with pytest.raises(AlignmentError) as excinfo:
        align_static_prefix(guarded("Monday"), hf_tokenizer, 0)
    assert excinfo.value.block_size == 0


@pytest.mark.parametrize(
    ("tenant", "secret", "empty"), [("", "a long secret", "tenant"), ("acme", "", "secret")]
)
def test_salt_error_says_which_input_is_empty(tenant: str, secret: str, empty: str) -> None:
    with pytest.raises(SaltError) as excinfo:
        tenant_salt(tenant, secret)
    assert excinfo.value.empty == empty


def test_render_error_gives_the_provider_model_and_segment() -> None:
    prompt = Prompt(system=[Segment.static("You are Harbor.")], messages=[Segment.session(" ")])
    with pytest.raises(RenderError) as excinfo:
        render_anthropic(prompt, model="claude-sonnet-4-5", max_tokens=64)
    error = excinfo.value
    assert (error.provider, error.segment) == ("anthropic", prompt.messages[0].label)


def test_render_error_of_a_request_names_the_model() -> None:
    with pytest.raises(RenderError) as excinfo:
        render_anthropic(Prompt(system="You are Harbor."), model="claude-sonnet-4-5", max_tokens=64)
    assert (excinfo.value.provider, excinfo.value.model) == ("anthropic", "claude-sonnet-4-5")


def test_usage_error_gives_the_argument_and_its_value() -> None:
    mode: Any = "loud"  # not a GuardMode: the mistake under test
    with pytest.raises(UsageError) as excinfo:
        StaticPrefixGuard(mode=mode)
    assert (excinfo.value.argument, excinfo.value.value) == ("mode", "loud")


def test_missing_extra_error_gives_the_extra_and_the_missing_modules() -> None:
    with pytest.raises(MissingExtraError) as excinfo:
        require_extra("lint", "prefixkit lint", "json", "no_such_module_for_this_test")
    assert excinfo.value.extra == "lint"
    assert excinfo.value.missing == ("no_such_module_for_this_test",)


def test_errors_keep_their_data_across_processes(prompt_root: Path) -> None:
    write_lock(prompt_root)
    (prompt_root / "greeting.md").write_text("Hello there, changed.\n")
    with pytest.raises(PromptDriftError) as excinfo:
        PromptRegistry(prompt_root).load("greeting")
    copy = pickle.loads(pickle.dumps(excinfo.value))
    assert type(copy) is PromptDriftError
    assert (str(copy), copy.drift, copy.path) == (
        str(excinfo.value),
        excinfo.value.drift,
        excinfo.value.path,
    )


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda: ToolCall("call_1", "decide", None), "give a dict, or the JSON text"),  # type: ignore[arg-type]
        (lambda: ToolResult("call_1", None), "give text, or Text and Image blocks"),  # type: ignore[arg-type]
    ],
)
def test_a_tool_turn_of_the_wrong_type_says_what_to_give(make: Any, says: str) -> None:
    with pytest.raises(CanonicalError, match=says) as raised:
        make()
    assert raised.value.value is None


def test_tool_arguments_that_are_not_json_name_the_call_when_an_object_is_needed() -> None:
    call = ToolCall("call_7", "decide", '{"amount": 12')  # cut off by the model
    prompt = Prompt(
        system=["You decide refunds. " * 300],
        messages=[
            Segment.session("Refund?"),
            Segment.session([call], role="assistant"),
            Segment.session([ToolResult("call_7", "done")]),
            Segment.dynamic("And now?"),
        ],
    )
    with pytest.raises(RenderError, match="not JSON") as raised:
        render_anthropic(prompt, model="claude-sonnet-4-5", max_tokens=5)
    assert "call_7" in str(raised.value) and raised.value.segment == "tool call call_7"


@pytest.mark.parametrize("content", [None, 42, 3.5])
def test_segment_content_that_is_not_text_blocks_or_json_says_what_to_give(
    content: Any,
) -> None:
    with pytest.raises(CanonicalError, match="give text, a list of content blocks") as raised:
        Segment.dynamic(content)
    assert raised.value.value == content


def test_a_lone_surrogate_is_refused_where_the_text_is_given_naming_where() -> None:
    with pytest.raises(CanonicalError, match=r"lone surrogate \('\\ud83d' at character 7\)"):
        Segment.dynamic("pasted \ud83d text")


def test_vllm_client_given_an_openai_client_first_says_to_pass_it_as_client(
    hf_tokenizer: HFTokenizer,
) -> None:
    import openai

    official = openai.OpenAI(base_url="http://127.0.0.1:1/v1", api_key="x")
    with pytest.raises(UsageError, match=r"pass an OpenAI client as client="):
        VLLMClient(official, tokenizer=hf_tokenizer, block_size=32)  # type: ignore[arg-type]


def test_render_vllm_with_a_tokenizer_without_a_chat_template_names_the_one_to_give() -> None:
    prompt = Prompt(system="You are Harbor.", messages=[Segment.dynamic("q")])
    tiktoken = TiktokenTokenizer("cl100k_base")
    with pytest.raises(UsageError, match=r"HFTokenizer\(<the model folder>\)"):
        render_vllm(prompt, model="m", tokenizer=tiktoken, block_size=32)  # type: ignore[call-overload]
