"""render_vllm: cache_salt per tenant, block-aligned static prefix, chat or token ids."""

from __future__ import annotations

import copy
import json
import uuid
from pathlib import Path
from typing import Any

import openai
import pytest
from prefixkit.sdk import (
    HFTokenizer,
    PrefixkitWarning,
    Prompt,
    RenderError,
    SaltError,
    Segment,
    TokenizerError,
    align_static_prefix,
    render_vllm,
    tenant_salt,
)
from prefixkit.testing.providers import MockProvider

from .prompts import plain

BLOCK = 32
SECRET = "test-salt-secret"
INSTRUCTIONS = (
    "Prefix caching stores the key and value tensors of a prompt's opening tokens. "
    "Answer in plain English, quote the price list, show the arithmetic. "
) * 8

TOOLS_TEMPLATE = (
    "{% if tools %}{{ '<|im_start|>system\\n# Tools\\n' }}"
    "{% for tool in tools %}{{ tool | tojson }}{{ '\\n' }}{% endfor %}{{ '<|im_end|>\\n' }}{% endif %}"
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


@pytest.fixture(scope="session")
def tools_tokenizer(
    hf_tokenizer_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> HFTokenizer:
    """The same vocabulary with a template that prints tool definitions with `tojson`."""
    folder = tmp_path_factory.mktemp("chatml-tools")
    (folder / "tokenizer.json").write_bytes((hf_tokenizer_dir / "tokenizer.json").read_bytes())
    config = json.loads((hf_tokenizer_dir / "tokenizer_config.json").read_text())
    config["chat_template"] = TOOLS_TEMPLATE
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return HFTokenizer(folder)


def prompt(question: str = "How much is egress?", *, tools: bool = False) -> Prompt:
    return Prompt(
        tools=[
            {
                "name": "lookup_invoice",
                "input_schema": {"type": "object", "properties": {"id": {"type": "string"}}},
            }
        ]
        if tools
        else None,
        system=[Segment.static(INSTRUCTIONS, name="instructions")],
        context=["Price list: egress $0.09/GB."],
        messages=[Segment.dynamic(question)],
    )


def static_boundary_tokens(tokenizer: HFTokenizer, text: str, static_text: str) -> list[int]:
    """Token ids of the chat text up to the end of the (padded) static system content."""
    end = text.index(static_text) + len(static_text)
    return tokenizer.encode(text[:end])


def test_chat_request_carries_the_tenant_salt_in_the_body(
    vllm_openai_client: openai.OpenAI, api: MockProvider, hf_tokenizer: HFTokenizer
) -> None:
    kwargs = render_vllm(
        prompt(),
        model="smollm2",
        tokenizer=hf_tokenizer,
        block_size=BLOCK,
        tenant="acme",
        salt_secret=SECRET,
        max_tokens=16,
    )
    vllm_openai_client.chat.completions.create(**kwargs)
    assert api.paths[-1] == "/v1/chat/completions"
    assert api.body["cache_salt"] == tenant_salt("acme", SECRET)
    assert len(api.body["cache_salt"]) == 64
    assert api.body["max_tokens"] == 16


def test_salts_are_stable_per_tenant_and_differ_across_tenants(
    hf_tokenizer: HFTokenizer,
) -> None:
    def salt(tenant: str, question: str) -> str:
        kwargs = render_vllm(
            prompt(question),
            model="m",
            tokenizer=hf_tokenizer,
            block_size=BLOCK,
            tenant=tenant,
            salt_secret=SECRET,
        )
        value: str = kwargs["extra_body"]["cache_salt"]
        return value

    assert salt("acme", "q1") == salt("acme", "q2")
    assert salt("acme", "q1") != salt("globex", "q1")


def test_no_tenant_means_no_salt(hf_tokenizer: HFTokenizer) -> None:
    kwargs = render_vllm(prompt(), model="m", tokenizer=hf_tokenizer, block_size=BLOCK)
    assert "extra_body" not in kwargs


def test_empty_salt_secret_raises(hf_tokenizer: HFTokenizer) -> None:
    with pytest.raises(SaltError, match="salt secret is empty"):
        render_vllm(
            prompt(),
            model="m",
            tokenizer=hf_tokenizer,
            block_size=BLOCK,
            tenant="acme",
            salt_secret="",
        )


def test_tenant_without_a_secret_or_the_variable_names_both_ways_to_give_one(
    hf_tokenizer: HFTokenizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PREFIXKIT_SALT_SECRET", raising=False)
    with pytest.raises(SaltError, match=r"salt_secret=\.\.\. or set PREFIXKIT_SALT_SECRET"):
        render_vllm(prompt(), model="m", tokenizer=hf_tokenizer, block_size=BLOCK, tenant="acme")


def test_tenant_without_salt_secret_is_salted_with_the_environment_variable(
    hf_tokenizer: HFTokenizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PREFIXKIT_SALT_SECRET", SECRET)
    kwargs = render_vllm(
        prompt(), model="m", tokenizer=hf_tokenizer, block_size=BLOCK, tenant="acme"
    )
    assert kwargs["extra_body"]["cache_salt"] == tenant_salt("acme", SECRET)


def test_static_prefix_ends_on_a_block_boundary_of_the_templated_chat(
    hf_tokenizer: HFTokenizer,
) -> None:
    kwargs = render_vllm(prompt(), model="m", tokenizer=hf_tokenizer, block_size=BLOCK)
    system = plain(kwargs)["messages"][0]["content"]
    assert system.startswith(INSTRUCTIONS.strip()) and system != INSTRUCTIONS.strip()
    text = hf_tokenizer.chat_text(kwargs["messages"])
    head = static_boundary_tokens(hf_tokenizer, text, system)
    assert len(head) % BLOCK == 0
    assert hf_tokenizer.encode(text)[: len(head)] == head


def test_token_id_prompt_is_the_aligned_sequence_sent_to_completions(
    vllm_openai_client: openai.OpenAI, api: MockProvider, hf_tokenizer: HFTokenizer
) -> None:
    chat = render_vllm(prompt(), model="m", tokenizer=hf_tokenizer, block_size=BLOCK)
    ids = render_vllm(
        prompt(),
        model="m",
        tokenizer=hf_tokenizer,
        block_size=BLOCK,
        token_ids=True,
        tenant="acme",
        salt_secret=SECRET,
    )
    vllm_openai_client.completions.create(**ids)
    assert api.paths[-1] == "/v1/completions"
    assert api.body["prompt"] == hf_tokenizer.chat_token_ids(chat["messages"])
    assert api.body["cache_salt"] == tenant_salt("acme", SECRET)


def test_alignment_uses_the_tool_shape_the_server_templates(tools_tokenizer: HFTokenizer) -> None:
    kwargs = render_vllm(prompt(tools=True), model="m", tokenizer=tools_tokenizer, block_size=BLOCK)
    assert kwargs["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "lookup_invoice",
                "description": None,
                "parameters": {"properties": {"id": {"type": "string"}}, "type": "object"},
            },
        }
    ]
    # What vLLM renders: its own tool dicts, in its field order.
    text = tools_tokenizer.chat_text(kwargs["messages"], tools=kwargs["tools"])
    head = static_boundary_tokens(tools_tokenizer, text, plain(kwargs)["messages"][0]["content"])
    assert len(head) % BLOCK == 0


def test_unalignable_prefix_warns_with_the_reason(hf_tokenizer: HFTokenizer) -> None:
    with pytest.warns(PrefixkitWarning, match="not aligned to 32-token blocks"):
        render_vllm(prompt(), model="m", tokenizer=hf_tokenizer, block_size=BLOCK, max_pad_tokens=0)


def test_align_false_sends_the_prompt_unpadded(hf_tokenizer: HFTokenizer) -> None:
    kwargs = render_vllm(prompt(), model="m", tokenizer=hf_tokenizer, block_size=BLOCK, align=False)
    assert kwargs["messages"][0]["content"] == INSTRUCTIONS.strip()


def test_extra_body_is_merged_with_the_salt(hf_tokenizer: HFTokenizer) -> None:
    kwargs = render_vllm(
        prompt(),
        model="m",
        tokenizer=hf_tokenizer,
        block_size=BLOCK,
        tenant="acme",
        salt_secret=SECRET,
        extra_body={"top_k": 5},
    )
    assert kwargs["extra_body"] == {"top_k": 5, "cache_salt": tenant_salt("acme", SECRET)}


def test_prompt_without_messages_raises(hf_tokenizer: HFTokenizer) -> None:
    with pytest.raises(RenderError, match="no messages"):
        render_vllm(Prompt(system="x"), model="m", tokenizer=hf_tokenizer, block_size=BLOCK)


def test_render_does_not_mutate_the_prompt(hf_tokenizer: HFTokenizer) -> None:
    original = prompt(tools=True)
    before = copy.deepcopy(original)
    render_vllm(original, model="m", tokenizer=hf_tokenizer, block_size=BLOCK, token_ids=True)
    assert original == before
    assert original.system[0].padding == ""


def test_tool_turns_render_as_chat_tool_calls_and_tool_messages_and_stay_aligned(
    vllm_openai_client: openai.OpenAI, api: MockProvider, hf_tokenizer: HFTokenizer
) -> None:
    from prefixkit.sdk import ToolCall, ToolResult

    conversation = prompt(tools=True).next_turn(
        [ToolCall("call_1", "lookup_invoice", {"id": "42"})], [ToolResult("call_1", "$45.00")]
    )
    kwargs = render_vllm(conversation, model="smollm2", tokenizer=hf_tokenizer, block_size=BLOCK)
    vllm_openai_client.chat.completions.create(**kwargs)
    *_, assistant, tool = api.body["messages"]
    assert assistant == {
        "role": "assistant",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "lookup_invoice", "arguments": '{"id":"42"}'},
            }
        ],
    }
    assert tool == {"role": "tool", "tool_call_id": "call_1", "content": "$45.00"}
    before = render_vllm(
        prompt(tools=True),
        model="smollm2",
        tokenizer=hf_tokenizer,
        block_size=BLOCK,
        token_ids=True,
    )["prompt"]
    after = render_vllm(
        conversation, model="smollm2", tokenizer=hf_tokenizer, block_size=BLOCK, token_ids=True
    )["prompt"]
    assert after[: len(before)] == before  # the previous request is a prefix of the next


# A system header that depends on a template variable, as reasoning models' templates
# do (`/no_think` when thinking is off): it sits before the static prefix's end, so a
# rendering without the request's chat_template_kwargs puts the boundary elsewhere.
THINKING_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' }}"
    "{% if message['role'] == 'system' and enable_thinking is defined and not enable_thinking %}"
    "{{ 'Reasoning mode: off. Answer directly, without thinking out loud first.\\n' }}"
    "{% endif %}"
    "{{ message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
NO_THINKING = {"enable_thinking": False}


@pytest.fixture(scope="session")
def thinking_tokenizer(
    hf_tokenizer_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> HFTokenizer:
    """The same vocabulary with a template whose system header reads `enable_thinking`."""
    folder = tmp_path_factory.mktemp("chatml-thinking")
    (folder / "tokenizer.json").write_bytes((hf_tokenizer_dir / "tokenizer.json").read_bytes())
    config = json.loads((hf_tokenizer_dir / "tokenizer_config.json").read_text())
    config["chat_template"] = THINKING_TEMPLATE
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return HFTokenizer(folder)


def test_the_thinking_template_renders_differently_with_the_kwarg(
    thinking_tokenizer: HFTokenizer,
) -> None:
    messages = [{"role": "system", "content": "x"}, {"role": "user", "content": "y"}]
    assert thinking_tokenizer.chat_text(messages) != thinking_tokenizer.chat_text(
        messages, chat_template_kwargs=NO_THINKING
    )


def test_token_ids_apply_the_requests_chat_template_kwargs(
    thinking_tokenizer: HFTokenizer,
) -> None:
    chat = render_vllm(
        prompt(),
        model="m",
        tokenizer=thinking_tokenizer,
        block_size=BLOCK,
        extra_body={"chat_template_kwargs": NO_THINKING},
    )
    ids = render_vllm(
        prompt(),
        model="m",
        tokenizer=thinking_tokenizer,
        block_size=BLOCK,
        token_ids=True,
        extra_body={"chat_template_kwargs": NO_THINKING},
    )
    assert ids["prompt"] == thinking_tokenizer.chat_token_ids(
        chat["messages"], chat_template_kwargs=NO_THINKING
    )


def test_the_prefix_is_aligned_in_the_text_the_server_renders_with_the_kwargs(
    vllm_openai_client: openai.OpenAI, api: MockProvider, thinking_tokenizer: HFTokenizer
) -> None:
    kwargs = render_vllm(
        prompt(),
        model="m",
        tokenizer=thinking_tokenizer,
        block_size=BLOCK,
        chat_template_kwargs=NO_THINKING,
    )
    vllm_openai_client.chat.completions.create(**kwargs)
    sent = api.body
    assert sent["chat_template_kwargs"] == NO_THINKING
    # What the server renders: the sent messages with the sent template kwargs.
    text = thinking_tokenizer.chat_text(
        sent["messages"], chat_template_kwargs=sent["chat_template_kwargs"]
    )
    head = static_boundary_tokens(thinking_tokenizer, text, sent["messages"][0]["content"])
    assert len(head) % BLOCK == 0
    assert thinking_tokenizer.encode(text)[: len(head)] == head


def test_token_id_requests_do_not_send_chat_template_kwargs(
    vllm_openai_client: openai.OpenAI, api: MockProvider, thinking_tokenizer: HFTokenizer
) -> None:
    ids = render_vllm(
        prompt(),
        model="m",
        tokenizer=thinking_tokenizer,
        block_size=BLOCK,
        token_ids=True,
        tenant="acme",
        salt_secret=SECRET,
        extra_body={"chat_template_kwargs": NO_THINKING, "top_k": 5},
    )
    vllm_openai_client.completions.create(**ids)
    assert "chat_template_kwargs" not in api.body
    assert api.body["top_k"] == 5


def test_chat_template_kwargs_cannot_replace_the_templates_own_arguments(
    thinking_tokenizer: HFTokenizer,
) -> None:
    with pytest.raises(TokenizerError, match="chat_template_kwargs cannot set 'tools'"):
        render_vllm(
            prompt(),
            model="m",
            tokenizer=thinking_tokenizer,
            block_size=BLOCK,
            chat_template_kwargs={"tools": []},
        )


@pytest.mark.engine
def test_the_engine_renders_the_token_count_prefixkit_computes_with_kwargs(engine: Any) -> None:
    """With chat_template_kwargs the engine's prompt is the sequence prefixkit aligned."""
    tokenizer = HFTokenizer(engine.config.model)
    marker = uuid.uuid4().hex
    instructions = (
        f"Session {marker}. You are the support assistant of a storage company. Answer from "
        "the price list only, show the arithmetic and quote the line you used. "
    ) * 12

    def support(question: str) -> Prompt:
        return Prompt(system=[Segment.static(instructions)], messages=[Segment.dynamic(question)])

    options: dict[str, Any] = {
        "model": engine.model,
        "tokenizer": tokenizer,
        "block_size": engine.block_size,
        "max_tokens": 1,
        "extra_body": {"chat_template_kwargs": NO_THINKING},
    }
    official = openai.OpenAI(base_url=f"{engine.base_url}/v1", api_key="EMPTY", max_retries=0)
    with official:
        ids = render_vllm(support("How much is egress?"), token_ids=True, **options)
        cold = official.chat.completions.create(
            **render_vllm(support("How much is egress?"), **options)
        )
        assert cold.usage is not None and cold.usage.prompt_tokens == len(ids["prompt"])
        _, report = align_static_prefix(
            support("q"), tokenizer, engine.block_size, chat_template_kwargs=NO_THINKING
        )
        assert report.aligned
        warm = official.chat.completions.create(
            **render_vllm(support("How much is storage?"), **options)
        )
        details = warm.usage.prompt_tokens_details if warm.usage is not None else None
        assert details is not None and (details.cached_tokens or 0) >= report.static_tokens
