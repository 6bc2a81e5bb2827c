"""The router's in-process prompt tokens (`PromptTokenizer`): vLLM 0.32's reading of each
route, on a tokenizer trained here; what it cannot reproduce it says (`Cannot`). The
comparison with the real engine is in test_prompt_tokens_engine.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import jinja2.sandbox
import pytest
from hypothesis import given
from hypothesis import strategies as st
from prefixkit.engine_adapter.routing.prompt_tokens import Cannot, PromptTokenizer, PromptTokens
from prefixkit.engine_adapter.routing.template_content import content_format
from transformers import AutoTokenizer

OPENAI_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}[{{ part['text'] }}]{% endfor %}{% endif %}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
TOOLS_TEMPLATE = (
    "{% if tools %}tools: {% for tool in tools %}{{ tool['function']['name'] }} {% endfor %}\n"
    "{% endif %}{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{{ message['content'] or '' }}{% for call in message.get('tool_calls') or [] %}"
    "call {{ call['function']['name'] }}({{ call['function']['arguments']['city'] }})"
    "{% endfor %}<|im_end|>\n{% endfor %}"
    "{% if style %}style: {{ style }}\n{% endif %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
DEVELOPER_TEMPLATE = (
    "{% for message in messages %}{% if message['role'] == 'developer' %}<dev>{% endif %}"
    "<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n{% endfor %}"
)


def _with_template(source: Path, target: Path, template: str) -> Path:
    shutil.copytree(source, target)
    config_path = target / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config["chat_template"] = template
    config_path.write_text(json.dumps(config))
    return target


@pytest.fixture(scope="module")
def chatml(hf_tokenizer_dir: Path) -> PromptTokenizer:
    loaded = PromptTokenizer.load(hf_tokenizer_dir)
    assert isinstance(loaded, PromptTokenizer), loaded
    return loaded


@pytest.fixture(scope="module")
def variant(hf_tokenizer_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    def load(template: str) -> PromptTokenizer:
        folder = _with_template(
            hf_tokenizer_dir, tmp_path_factory.mktemp("variant") / "m", template
        )
        loaded = PromptTokenizer.load(folder)
        assert isinstance(loaded, PromptTokenizer), loaded
        return loaded

    return load


def _ids(outcome: PromptTokens | Cannot) -> list[int]:
    assert isinstance(outcome, PromptTokens), outcome
    return outcome.token_ids


def _transformers_chat(folder: Path, messages: list[dict[str, Any]], **kwargs: Any) -> list[int]:
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    text = tokenizer.apply_chat_template(messages, tokenize=False, **kwargs)
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


texts = st.text(st.characters(codec="utf-8"), max_size=60)
conversations = st.lists(
    st.tuples(st.sampled_from(["system", "user", "assistant"]), texts), min_size=1, max_size=5
)


@given(conversations, st.booleans())
def test_chat_tokens_are_the_templates_text_tokenized_without_special_tokens(
    chatml: PromptTokenizer, hf_tokenizer_dir: Path, turns: list[tuple[str, str]], prompt: bool
) -> None:
    messages = [{"role": role, "content": text} for role, text in turns]
    expected = _transformers_chat(hf_tokenizer_dir, messages, add_generation_prompt=prompt)
    body = {"messages": messages, "add_generation_prompt": prompt}
    assert _ids(chatml.tokens("/v1/chat/completions", body)) == expected


@given(conversations)
def test_a_string_and_one_text_part_are_the_same_message(
    chatml: PromptTokenizer, turns: list[tuple[str, str]]
) -> None:
    as_strings = [{"role": role, "content": text} for role, text in turns]
    as_parts = [{"role": r, "content": [{"type": "text", "text": t}]} for r, t in turns]
    assert _ids(chatml.tokens("/v1/chat/completions", {"messages": as_parts})) == _ids(
        chatml.tokens("/v1/chat/completions", {"messages": as_strings})
    )


def test_text_parts_are_joined_with_newlines_and_empty_ones_dropped(
    chatml: PromptTokenizer,
) -> None:
    parts = [{"type": "text", "text": "one"}, {"type": "text", "text": ""}, "two"]
    joined = chatml.tokens(
        "/v1/chat/completions", {"messages": [{"role": "user", "content": "one\ntwo"}]}
    )
    assert _ids(
        chatml.tokens("/v1/chat/completions", {"messages": [{"role": "user", "content": parts}]})
    ) == _ids(joined)


def test_a_system_texts_billing_header_line_is_dropped(chatml: PromptTokenizer) -> None:
    def chat(system: str) -> dict[str, Any]:
        return {
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": "hi"}]
        }

    with_header = chat("x-anthropic-billing-header: cch=1\nBe kind.")
    assert _ids(chatml.tokens("/v1/chat/completions", with_header)) == _ids(
        chatml.tokens("/v1/chat/completions", chat("Be kind."))
    )


def test_an_openai_format_template_gets_the_parts(variant: Any) -> None:
    tokenizer = variant(OPENAI_TEMPLATE)
    parts = {"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, "b"]}]}
    bracketed = {
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            }
        ]
    }
    joined = {"messages": [{"role": "user", "content": "a\nb"}]}
    assert _ids(tokenizer.tokens("/v1/chat/completions", parts)) == _ids(
        tokenizer.tokens("/v1/chat/completions", bracketed)
    )
    assert _ids(tokenizer.tokens("/v1/chat/completions", parts)) != _ids(
        tokenizer.tokens("/v1/chat/completions", joined)
    )


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{% for m in messages %}{{ m['content'] }}{% endfor %}", "string"),
        (
            "{% for m in messages %}{% for p in m['content'] %}{{ p.text }}{% endfor %}{% endfor %}",
            "openai",
        ),
        (
            "{% for m in messages %}{% for p in m.content %}{{ p }}{% endfor %}{% endfor %}",
            "openai",
        ),
        (
            "{% macro show(c) %}{% for p in c %}{{ p.text }}{% endfor %}{% endmacro %}"
            "{% for m in messages %}{{ show(m.content) }}{% endfor %}",
            "openai",
        ),
        (
            "{% set ms = messages[1:] %}{% for m in ms %}{% for p in m.content %}x{% endfor %}{% endfor %}",
            "openai",
        ),
        ("{% for m in messages %", "string"),
    ],
)
def test_the_content_format_is_found_in_the_template(template: str, expected: str) -> None:
    assert content_format(jinja2.sandbox.ImmutableSandboxedEnvironment(), template) == expected


def test_tool_call_arguments_reach_the_template_as_an_object(variant: Any) -> None:
    tokenizer = variant(TOOLS_TEMPLATE)
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "weather", "arguments": '{"city": "Elm"}'},
    }
    with_call = {"messages": [{"role": "assistant", "content": None, "tool_calls": [call]}]}
    written = {"messages": [{"role": "assistant", "content": "call weather(Elm)"}]}
    assert _ids(tokenizer.tokens("/v1/chat/completions", with_call)) == _ids(
        tokenizer.tokens("/v1/chat/completions", written)
    )


def test_tools_and_the_template_kwargs_it_reads_change_the_prompt(variant: Any) -> None:
    tokenizer = variant(TOOLS_TEMPLATE)
    plain = {"messages": [{"role": "user", "content": "hi"}]}
    tool = {"type": "function", "function": {"name": "weather", "parameters": {}}}
    base = _ids(tokenizer.tokens("/v1/chat/completions", plain))
    assert _ids(tokenizer.tokens("/v1/chat/completions", {**plain, "tools": [tool]})) != base
    styled = {**plain, "chat_template_kwargs": {"style": "terse"}}
    assert _ids(tokenizer.tokens("/v1/chat/completions", styled)) != base
    unread = {**plain, "chat_template_kwargs": {"unknown_knob": 1}}
    assert _ids(tokenizer.tokens("/v1/chat/completions", unread)) == base


def test_loading_compiles_the_template_so_no_request_does(
    variant: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    tokenizer = variant(TOOLS_TEMPLATE)

    def compiling(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a request compiled a template")

    monkeypatch.setattr(jinja2.Environment, "parse", compiling)
    monkeypatch.setattr(jinja2.Environment, "from_string", compiling)
    tool = {"type": "function", "function": {"name": "weather", "parameters": {}}}
    user = {"role": "user", "content": "hi"}
    for path, body in [
        ("/v1/chat/completions", {"messages": [user]}),
        ("/v1/chat/completions", {"messages": [user], "tools": [tool]}),
        ("/v1/responses", {"input": "hi", "instructions": "Be brief."}),
        ("/v1/messages", {"system": "Be brief.", "messages": [user], "max_tokens": 8}),
    ]:
        assert isinstance(tokenizer.tokens(path, body), PromptTokens), path


def test_developer_messages_become_system_ones_where_the_template_lacks_the_role(
    chatml: PromptTokenizer, variant: Any
) -> None:
    developer = {
        "messages": [{"role": "user", "content": "q"}, {"role": "developer", "content": "d"}]
    }
    merged = {"messages": [{"role": "system", "content": "d"}, {"role": "user", "content": "q"}]}
    assert _ids(chatml.tokens("/v1/chat/completions", developer)) == _ids(
        chatml.tokens("/v1/chat/completions", merged)
    )
    knows = variant(DEVELOPER_TEMPLATE)
    assert _ids(knows.tokens("/v1/chat/completions", developer)) != _ids(
        knows.tokens("/v1/chat/completions", merged)
    )


# a template that reads every attribute of its loop, its tools and a kwarg of its own
LOOP_TEMPLATE = (
    "{% if tools %}{{ tools | tojson }}\n{% endif %}{% for message in messages %}"
    "{% if loop.first %}[{{ loop.length }} messages]{% endif %}"
    "{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.revindex0 }}/{{ loop.depth }}"
    " {{ loop.cycle('odd', 'even') }}{% if loop.changed(message['role']) %}*{% endif %}"
    "{% if loop.previtem %}<{{ loop.previtem['role'] }}{% endif %}"
    "{% if loop.nextitem %}>{{ loop.nextitem['role'] }}{% endif %}"
    "<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>"
    "{% if loop.last %}.{% endif %}\n{% endfor %}"
    "{% if style %}style: {{ style }}\n{% endif %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@pytest.fixture(scope="module")
def loop_folder(hf_tokenizer_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _with_template(hf_tokenizer_dir, tmp_path_factory.mktemp("loop") / "m", LOOP_TEMPLATE)


@pytest.fixture(scope="module")
def loop_tokenizer(loop_folder: Path) -> PromptTokenizer:
    loaded = PromptTokenizer.load(loop_folder)
    assert isinstance(loaded, PromptTokenizer), loaded
    return loaded


def test_a_template_is_rendered_directly_when_a_probe_renders_as_through_transformers(
    chatml: PromptTokenizer, loop_tokenizer: PromptTokenizer
) -> None:
    for tokenizer in (chatml, loop_tokenizer):
        template = tokenizer._tokenizer.get_chat_template(None, tools=None)
        assert tokenizer._direct_template(template) is not None


@given(
    conversations,
    st.booleans(),
    st.sampled_from([None, "terse", "<b>&"]),
    st.lists(st.sampled_from(["weather", "time", "café"]), max_size=2),
)
def test_the_direct_render_gives_the_tokens_of_transformers_render(
    loop_tokenizer: PromptTokenizer,
    loop_folder: Path,
    turns: list[tuple[str, str]],
    prompt: bool,
    style: str | None,
    names: list[str],
) -> None:
    messages = [{"role": role, "content": text} for role, text in turns]
    tools = [
        {"type": "function", "function": {"name": n, "description": None, "parameters": None}}
        for n in names
    ]
    body: dict[str, Any] = {"messages": messages, "add_generation_prompt": prompt}
    kwargs: dict[str, Any] = {"add_generation_prompt": prompt}
    if tools:
        body["tools"] = kwargs["tools"] = tools
    if style is not None:
        body["chat_template_kwargs"] = {"style": style}
        kwargs["style"] = style
    expected = _transformers_chat(loop_folder, messages, **kwargs)
    assert _ids(loop_tokenizer.tokens("/v1/chat/completions", body)) == expected


def test_a_tokenizer_with_a_render_of_its_own_is_not_rendered_directly(
    chatml: PromptTokenizer, hf_tokenizer_dir: Path
) -> None:
    tokenizer = AutoTokenizer.from_pretrained(str(hf_tokenizer_dir))

    class OwnRender(type(tokenizer)):  # type: ignore[misc]
        def apply_chat_template(self, *args: Any, **kwargs: Any) -> Any:
            return "marked " + super().apply_chat_template(*args, **kwargs)

    tokenizer.__class__ = OwnRender
    own = PromptTokenizer(tokenizer, hf_tokenizer_dir)
    body = {"messages": [{"role": "user", "content": "hi"}]}
    marked = _ids(own.tokens("/v1/chat/completions", body))
    assert marked[: len(tokenizer("marked ")["input_ids"])] == tokenizer("marked ")["input_ids"]
    assert marked != _ids(chatml.tokens("/v1/chat/completions", body))


def test_a_continued_final_message_is_rendered_as_transformers_renders_it(
    chatml: PromptTokenizer, hf_tokenizer_dir: Path
) -> None:
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hel"}]
    body = {"messages": messages, "add_generation_prompt": False, "continue_final_message": True}
    expected = _transformers_chat(hf_tokenizer_dir, messages, continue_final_message=True)
    assert _ids(chatml.tokens("/v1/chat/completions", body)) == expected


def test_a_completion_of_token_ids_is_those_ids(chatml: PromptTokenizer) -> None:
    assert _ids(chatml.tokens("/v1/completions", {"prompt": [5, 0, 9]})) == [5, 0, 9]


def test_a_responses_request_is_its_chat_conversation(chatml: PromptTokenizer) -> None:
    responses = {
        "instructions": "be brief",
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
    }
    chat = {
        "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    }
    assert _ids(chatml.tokens("/v1/responses", responses)) == _ids(
        chatml.tokens("/v1/chat/completions", chat)
    )


def test_an_anthropic_request_is_its_chat_conversation(chatml: PromptTokenizer) -> None:
    messages = {
        "system": [{"type": "text", "text": "be "}, {"type": "text", "text": "brief"}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    }
    chat = {
        "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    }
    assert _ids(chatml.tokens("/v1/messages", messages)) == _ids(
        chatml.tokens("/v1/chat/completions", chat)
    )


def test_the_salt_comes_with_the_tokens(chatml: PromptTokenizer) -> None:
    outcome = chatml.tokens("/v1/completions", {"prompt": [1, 2], "cache_salt": "tenant"})
    assert outcome == PromptTokens([1, 2], "tenant")


@pytest.mark.parametrize(
    ("path", "body", "reason"),
    [
        (
            "/v1/chat/completions",
            {
                "messages": [
                    {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}
                ]
            },
            "image_url",
        ),
        (
            "/v1/chat/completions",
            {"messages": [{"role": "user", "content": "x"}], "chat_template": "{{ 1 }}"},
            "chat_template",
        ),
        (
            "/v1/chat/completions",
            {"messages": [{"role": "user", "content": "x"}], "truncate_prompt_tokens": 5},
            "truncate_prompt_tokens",
        ),
        (
            "/v1/chat/completions",
            {
                "messages": [{"role": "user", "content": "x"}],
                "add_generation_prompt": True,
                "continue_final_message": True,
            },
            "continue_final_message",
        ),
        (
            "/v1/chat/completions",
            {
                "messages": [{"role": "user", "content": "x"}],
                "chat_template_kwargs": {"tokenize": True},
            },
            "tokenize",
        ),
        ("/v1/completions", {"prompt": ["one", "two"]}, "one string"),
        ("/v1/completions", {"prompt": [5, 1 << 64]}, "token ids"),
        ("/v1/completions", {"prompt": [5, -1]}, "token ids"),
        ("/v1/completions", {"prompt": "x", "suffix": "y"}, "suffix"),
        ("/v1/responses", {"input": "x", "previous_response_id": "resp_1"}, "previous_response_id"),
        ("/v1/responses", {"input": [{"type": "web_search_call", "id": "w"}]}, "web_search_call"),
        (
            "/v1/messages",
            {
                "messages": [{"role": "user", "content": "x"}],
                "thinking": {"type": "enabled", "budget_tokens": 5},
            },
            "thinking",
        ),
        ("/v1/embeddings", {"input": "x"}, "/v1/embeddings"),
    ],
)
def test_what_it_cannot_reproduce_it_says_with_the_reason(
    chatml: PromptTokenizer, path: str, body: dict[str, Any], reason: str
) -> None:
    outcome = chatml.tokens(path, body)
    assert isinstance(outcome, Cannot)
    assert reason in outcome.reason


def test_a_folder_without_a_fast_tokenizer_cannot_be_loaded(tmp_path: Path) -> None:
    outcome = PromptTokenizer.load(tmp_path)
    assert isinstance(outcome, Cannot)
    assert "tokenizer.json" in outcome.reason
