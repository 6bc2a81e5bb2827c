"""Which message content a chat template reads, as vLLM 0.32 decides it.

vLLM hands a template each message's content in one of two forms: ``"string"`` (the text
parts joined with newlines) or ``"openai"`` (the list of parts, each ``{"type": "text",
"text": ...}``). With ``--chat-template-content-format auto`` (prefixkit's engines) it
picks ``"openai"`` when the template loops over a message's content, found in the
template's syntax tree (``vllm/renderers/hf.py``, ``_detect_content_format``); this module
is that search, ported (Apache-2.0, the vLLM authors), so that the router renders a
conversation as the engine does. `developer_role_supported` is vLLM's test of whether a
template knows the ``developer`` role (else vLLM makes those messages ``system`` ones).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Literal

import jinja2
import jinja2.nodes

__all__ = ["ContentFormat", "content_format", "developer_role_supported"]

ContentFormat = Literal["string", "openai"]


def content_format(environment: jinja2.Environment, template: str) -> ContentFormat:
    """``"openai"`` when `template` (parsed in `environment`, transformers' own) loops
    over a message's content, else ``"string"`` (also for a template that does not parse,
    vLLM's default)."""
    try:
        root = environment.parse(template)
        next(_content_loops(root))
    except StopIteration:
        return "string"
    except Exception:  # vLLM logs and falls back to its default, "string"
        return "string"
    return "openai"


def developer_role_supported(template: str) -> bool:
    return '"developer"' in template or "'developer'" in template


def _is_var(node: jinja2.nodes.Node, name: str) -> bool:
    return isinstance(node, jinja2.nodes.Name) and node.ctx == "load" and node.name == name


def _is_attr(node: jinja2.nodes.Node, name: str, key: str) -> bool:
    if isinstance(node, jinja2.nodes.Getitem):
        return (
            _is_var(node.node, name)
            and isinstance(node.arg, jinja2.nodes.Const)
            and node.arg.value == key
        )
    if isinstance(node, jinja2.nodes.Getattr):
        return _is_var(node.node, name) and node.attr == key
    return False


def _is_var_or_elems(node: jinja2.nodes.Node, name: str, key: str | None = None) -> bool:
    if isinstance(node, jinja2.nodes.Filter):
        return node.node is not None and _is_var_or_elems(node.node, name, key)
    if isinstance(node, jinja2.nodes.Test):
        return _is_var_or_elems(node.node, name, key)
    if isinstance(node, jinja2.nodes.Getitem) and isinstance(node.arg, jinja2.nodes.Slice):
        return _is_var_or_elems(node.node, name, key)
    return _is_attr(node, name, key) if key else _is_var(node, name)


def _names_bound_to(root: jinja2.nodes.Node, name: str) -> Iterator[str]:
    yield name
    related = deque([name])
    while related:
        current = related.popleft()
        for assign in root.find_all(jinja2.nodes.Assign):
            if _is_var_or_elems(assign.node, current):
                target = assign.target
                assert isinstance(target, jinja2.nodes.Name)
                yield target.name
                if target.name != current:
                    related.append(target.name)


def _message_names(root: jinja2.nodes.Node) -> Iterator[str]:
    """The loop variables of ``{% for message in messages %}`` loops."""
    messages = list(_names_bound_to(root, "messages"))
    for loop in root.find_all(jinja2.nodes.For):
        for name in messages:
            if _is_var_or_elems(loop.iter, name):
                assert isinstance(loop.target, jinja2.nodes.Name)
                yield loop.target.name
                break


def _content_loops(root: jinja2.nodes.Node) -> Iterator[str]:
    """The loops over a message's content, or over a macro parameter given it."""
    messages = list(_message_names(root))
    params_by_loop: dict[int, set[str]] = {}
    in_macros: set[int] = set()
    for macro in root.find_all(jinja2.nodes.Macro):
        param_names = {arg.name for arg in macro.args}
        params: set[str] = set()
        for call in root.find_all(jinja2.nodes.Call):
            if isinstance(call.node, jinja2.nodes.Name) and call.node.name == macro.name:
                for i, arg in enumerate(call.args):
                    if i < len(macro.args) and any(
                        _is_var_or_elems(arg, name, "content") for name in messages
                    ):
                        params.add(macro.args[i].name)
                for keyword in call.kwargs:
                    if (
                        isinstance(keyword, jinja2.nodes.Keyword)
                        and keyword.key in param_names
                        and any(_is_var_or_elems(keyword.value, n, "content") for n in messages)
                    ):
                        params.add(keyword.key)
        for loop in macro.find_all(jinja2.nodes.For):
            in_macros.add(id(loop))
            if params:
                params_by_loop[id(loop)] = params
    for loop in root.find_all(jinja2.nodes.For):
        target = loop.target
        if any(_is_var_or_elems(loop.iter, name, "content") for name in messages):
            assert isinstance(target, jinja2.nodes.Name)
            yield target.name
            continue
        params_of_loop = params_by_loop.get(id(loop))
        if isinstance(loop.iter, jinja2.nodes.Name) and (
            (params_of_loop is not None and loop.iter.name in params_of_loop)
            or (id(loop) not in in_macros and loop.iter.name == "content")
        ):
            assert isinstance(target, jinja2.nodes.Name)
            yield target.name
