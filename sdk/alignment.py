"""Block-aligned static prefixes for engines that cache whole KV blocks (vLLM).

vLLM caches a prompt in full blocks of `block_size` tokens (16 on GPU, a
multiple of 32 on CPU); a block is reused only if every token in it matches.
If the static prefix ends mid-block, the tokens of that last partial block are
recomputed on every request. `align_static_prefix` appends inert whitespace to
the last static segment (its `Segment.padding`, added after canonicalisation so
it survives it) until the static prefix ends exactly on a block boundary of the
FULL rendered token sequence: the chat template, BOS and tool definitions
included, as the model's own tokenizer produces it.

How: the boundary's character offset in the rendered chat text is found by
rendering the prompt with two different one-character paddings and taking the
first position where they differ. Candidate paddings (runs of newlines, then
runs of spaces, then newlines followed by spaces; shortest first) are scored
on a short window before the boundary (BPE merges are local to whitespace
runs), then the winner is verified on the whole sequence: the tokens of the
text up to the boundary must be a prefix of the tokens of the whole text, and
their count a multiple of `block_size`. Anything that fails is reported,
never silently accepted.

    prompt, report = align_static_prefix(prompt, tokenizer, block_size=32)
    report.aligned, report.static_tokens, report.pad_tokens, report.reason

`messages` maps a `Prompt` to the chat messages of the request; the vLLM
renderer passes its own so that alignment and the request agree.
`template_messages` turns them into what vLLM hands the chat template (text
parts joined by newlines, missing content as "", tool-call arguments parsed
into dicts), so the local rendering matches the server's.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .canonical import sha256_hex
from .errors import AlignmentError
from .openai_request import chat_segment_messages
from .prompt import Part, Prompt
from .segment import Segment
from .tokenizer import HFTokenizer

__all__ = [
    "AlignmentReport",
    "MessagesFn",
    "align_static_prefix",
    "chat_messages",
    "template_messages",
]

MessagesFn = Callable[[Prompt], list[dict[str, Any]]]

# Characters of rendered text before the boundary used to score candidate
# paddings; BPE merges never reach further back than the whitespace run.
_WINDOW_CHARS = 256


def chat_messages(prompt: Prompt) -> list[dict[str, Any]]:
    """Default chat messages of a prompt: one system message, then one message per segment.

    System segments are joined by a blank line into a single system message
    (templates accept one); context and message text segments become one
    message each, with the segment's role and the text as a string.
    Structured segments become OpenAI Chat messages (`render_openai_chat`'s
    shape: assistant `tool_calls`, role "tool" results, image parts), with
    text-only part lists sent as one string. Tools go to the template
    separately.
    """
    rendered: list[dict[str, Any]] = []
    if prompt.system:
        rendered.append({"role": "system", "content": "\n\n".join(s.text for s in prompt.system)})
    for segment in (*prompt.context, *prompt.messages):
        if not segment.blocks:
            rendered.append({"role": segment.role, "content": segment.text})
            continue
        for message in chat_segment_messages(segment):
            rendered.append(_text_as_string(message))
    return rendered


def _text_as_string(message: dict[str, Any]) -> dict[str, Any]:
    content = message.get("content")
    if isinstance(content, list) and all(
        isinstance(part, Mapping) and set(part) == {"type", "text"} and part["type"] == "text"
        for part in content
    ):
        return {**message, "content": "\n".join(part["text"] for part in content)}
    return message


def template_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Request messages as vLLM hands them to the chat template."""
    shaped: list[dict[str, Any]] = []
    for message in messages:
        item = dict(_text_as_string(dict(message)))
        if item.get("content") is None:
            item["content"] = ""
        calls = item.get("tool_calls")
        if isinstance(calls, list):
            item["tool_calls"] = [
                {
                    **call,
                    "function": {
                        **call["function"],
                        "arguments": json.loads(call["function"].get("arguments") or "{}"),
                    },
                }
                if isinstance(call.get("function", {}).get("arguments", ""), str)
                else call
                for call in calls
            ]
        shaped.append(item)
    return shaped


@dataclass(frozen=True)
class AlignmentReport:
    """The outcome of `align_static_prefix`.

    `static_tokens`: tokens of the full sequence up to the end of the static
    prefix (padding included); `pad_tokens`: how many of them the padding added;
    `padding`: the whitespace appended; `token_ids`: the whole rendered
    sequence of the returned prompt; `reason`: why it is not aligned (None when
    it is).
    """

    aligned: bool
    block_size: int
    static_tokens: int
    pad_tokens: int
    padding: str
    total_tokens: int
    token_ids: tuple[int, ...]
    reason: str | None = None


def _replace_segment(prompt: Prompt, index: int, segment: Segment) -> Prompt:
    groups: dict[Part, list[Segment]] = {"tools": [], "system": [], "context": [], "messages": []}
    for position, (part, current) in enumerate(prompt.parts()):
        groups[part].append(segment if position == index else current)
    return Prompt(
        tools=groups["tools"],
        system=groups["system"],
        context=groups["context"],
        messages=groups["messages"],
        name=prompt.name,
        sort_tools=prompt.sort_tools,
    )


def _candidate_batches(max_chars: int) -> Iterator[list[str]]:
    """Inert paddings in a fixed order: runs of newlines, runs of spaces, then mixes.

    Pure runs come first because they are the most common case (one token per
    character for most vocabularies) and cheap to try; alternating spaces and
    tabs cover byte-level BPEs that merge every pure run into a few tokens (GPT-2
    style vocabularies such as SmolLM2's: one token per character); mixes
    (newlines then spaces) by increasing length cover the rest.
    """
    yield ["\n" * length for length in range(1, max_chars + 1)]
    yield [" " * length for length in range(1, max_chars + 1)]
    yield [(" \t" * max_chars)[:length] for length in range(1, max_chars + 1)]
    for length in range(2, max_chars + 1):
        yield ["\n" * newlines + " " * (length - newlines) for newlines in range(length - 1, 0, -1)]


_search_memo: dict[tuple[str, str, int, int], str | None] = {}
_search_lock = threading.Lock()


def _max_pad_chars(budget: int) -> int:
    # Whitespace runs may merge into fewer tokens than characters; twice the
    # budget (plus slack) leaves room for that and bounds the search.
    return 2 * budget + 2


def _search_padding(
    tokenizer: HFTokenizer, window: str, needed: int, block_size: int, budget: int
) -> str | None:
    """The first candidate padding that adds `needed` tokens (mod block size) within budget."""
    key = (tokenizer.name, sha256_hex(window), block_size, budget)
    with _search_lock:
        if key in _search_memo:
            return _search_memo[key]
    base = len(tokenizer.encode(window))
    found: str | None = None
    for pads in _candidate_batches(_max_pad_chars(budget)):
        counts = tokenizer.encode_batch([window + pad for pad in pads])
        found = next(
            (
                pad
                for pad, ids in zip(pads, counts, strict=True)
                if len(ids) - base <= budget and (len(ids) - base) % block_size == needed
            ),
            None,
        )
        if found is not None:
            break
    with _search_lock:
        _search_memo[key] = found
    return found


def align_static_prefix(
    prompt: Prompt,
    tokenizer: HFTokenizer,
    block_size: int,
    *,
    max_pad_tokens: int | None = None,
    messages: MessagesFn = chat_messages,
    tools: Sequence[Mapping[str, Any]] | None = None,
    add_generation_prompt: bool = True,
    chat_template_kwargs: Mapping[str, Any] | None = None,
) -> tuple[Prompt, AlignmentReport]:
    """Pad the static prefix to end on a `block_size` boundary of the rendered tokens.

    Returns the padded prompt (the input itself when no padding is applied)
    and a report. Padding is skipped, with the reason in the report, when it
    would take more than `max_pad_tokens` tokens (default: `block_size`), when
    the prompt has no static text segment to pad, or when the chat template
    does not keep the padding verbatim. Raises `AlignmentError` for a
    non-positive `block_size`. Existing padding on the last static segment is
    replaced. `tools` are the tool dicts exactly as the server hands them to the
    chat template (templates print them with `tojson` in dict order, so a
    server that re-serialises tools changes their tokens); by default the
    prompt's own canonical `tool_dicts()`. `chat_template_kwargs` are the
    request's template variables (`{"enable_thinking": False}`), applied as the
    server applies them, so the boundary is found in the text it renders.
    """
    if block_size < 1:
        raise AlignmentError(
            f"block_size must be a positive number of tokens, got {block_size}",
            block_size=block_size,
        )
    budget = block_size if max_pad_tokens is None else max_pad_tokens
    template_tools = (prompt.tool_dicts() if tools is None else list(tools)) or None

    def render(candidate: Prompt) -> str:
        return tokenizer.chat_text(
            template_messages(messages(candidate)),
            tools=template_tools,
            add_generation_prompt=add_generation_prompt,
            chat_template_kwargs=chat_template_kwargs,
        )

    def not_aligned(reason: str, static_tokens: int = 0) -> tuple[Prompt, AlignmentReport]:
        ids = tuple(tokenizer.encode(render(prompt)))
        report = AlignmentReport(False, block_size, static_tokens, 0, "", len(ids), ids, reason)
        return prompt, report

    static = prompt.static_segments()
    if not static:
        return not_aligned("the prompt has no static prefix (no STATIC/VERSIONED segment first)")
    index = len(static) - 1
    part, last = list(prompt.parts())[index]
    if part == "tools":
        return not_aligned(
            "the static prefix ends with a tool definition, which cannot carry padding: "
            "add a static system segment"
        )
    base = _replace_segment(prompt, index, dataclasses.replace(last, padding=""))
    with_space = render(_replace_segment(base, index, dataclasses.replace(last, padding=" ")))
    with_newline = render(_replace_segment(base, index, dataclasses.replace(last, padding="\n")))
    boundary = next(
        (i for i, (a, b) in enumerate(zip(with_space, with_newline, strict=False)) if a != b),
        None,
    )
    base_text = render(base)
    if boundary is None or base_text != with_space[:boundary] + with_space[boundary + 1 :]:
        return not_aligned(
            f"the chat template does not keep trailing whitespace of {last.label} verbatim "
            "(it trims or rewrites message content), so padding cannot move the boundary"
        )
    head = base_text[:boundary]
    static_tokens = len(tokenizer.encode(head))
    needed = -static_tokens % block_size
    if needed == 0:
        padding = ""
    elif needed > budget:
        return not_aligned(
            f"the static prefix has {static_tokens} tokens; reaching the next multiple of "
            f"{block_size} needs {needed} pad tokens, over the budget of {budget}",
            static_tokens,
        )
    else:
        # The window starts after the last special token (template markers split
        # tokenisation), so scoring on it matches scoring on the whole head.
        start = max(
            (head.rfind(s) + len(s) for s in tokenizer.special_tokens if s in head), default=0
        )
        window = head[max(start, len(head) - _WINDOW_CHARS) :]
        found = _search_padding(tokenizer, window, needed, block_size, budget)
        if found is None:
            return not_aligned(
                f"no whitespace padding of up to {_max_pad_chars(budget)} characters adds {needed} "
                f"tokens (mod {block_size}) within the budget of {budget} with this tokenizer",
                static_tokens,
            )
        padding = found
    padded = _replace_segment(base, index, dataclasses.replace(last, padding=padding))
    full_text = render(padded)
    end = boundary + len(padding)
    full_ids = tokenizer.encode(full_text)
    prefix_ids = tokenizer.encode(full_text[:end])
    if full_text[:end] != head + padding:
        return not_aligned("the chat template changed the padded text; padding not applied")
    if full_ids[: len(prefix_ids)] != prefix_ids:
        return not_aligned(
            "tokens of the static prefix merge with the text after it, so no block boundary "
            f"can fall there: end {last.label} at a message boundary",
            static_tokens,
        )
    if len(prefix_ids) % block_size:
        return not_aligned(
            f"padding scored on a window did not align the full sequence "
            f"({len(prefix_ids)} tokens); the tokenizer merges across the boundary",
            static_tokens,
        )
    report = AlignmentReport(
        aligned=True,
        block_size=block_size,
        static_tokens=len(prefix_ids),
        pad_tokens=len(prefix_ids) - static_tokens,
        padding=padding,
        total_tokens=len(full_ids),
        token_ids=tuple(full_ids),
    )
    return (prompt if padded == prompt else padded), report
