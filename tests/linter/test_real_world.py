"""Real-world-shaped apps (a support assistant, every framework entry point): written the
cache-safe way they are silent as a whole, and each break put into them is reported where
it is made."""

from __future__ import annotations

from pathlib import Path

import pytest
from prefixkit.linter import LintConfig, lint_source

CLEAN_APP = '''
"""A support assistant that keeps its prefix byte-identical."""
from __future__ import annotations

import json
import logging
import os
import time
import uuid
from datetime import datetime as dt

import anthropic
from langchain_core.messages import HumanMessage, SystemMessage

from prefixkit.sdk import Prompt, Segment
from .settings import settings
from .prompts import SUPPORT_PROMPT  # a constant imported from another module

log = logging.getLogger(__name__)
PRODUCT = "Northwind Cloud"
REGION = os.environ.get("REGION", "eu-central")
MODEL = settings.model_name
HOUR = {"type": "ephemeral", "ttl": "1h"}
FIVE = {"type": "ephemeral", "ttl": "5m"}
ENABLED_TOOLS = {"open_ticket", "status_page", "refund"}
SCHEMAS = {name: {"type": "object", "title": name} for name in ("open_ticket", "status_page", "refund")}
ANSWER_FORMAT = "Reply as JSON: " + json.dumps({"answer": "str", "sources": ["str"]}, sort_keys=True)
SYSTEM = f"""You are the support assistant for {PRODUCT} ({REGION}).
{SUPPORT_PROMPT}
{ANSWER_FORMAT}"""


def tool_definitions() -> list[dict]:
    return [
        {"name": name, "input_schema": SCHEMAS[name]}
        for name in sorted(ENABLED_TOOLS)
    ]


class SupportAgent:
    """Rolling breakpoint on the latest user turn; static system first."""

    def __init__(self, client: anthropic.Anthropic, user_id: str, user_name: str):
        self.client = client
        self.user_id = user_id
        self.user_name = user_name
        self.history: list[dict] = []
        self.started = dt.now()

    def system_blocks(self) -> list[dict]:
        return [
            {"type": "text", "text": SYSTEM, "cache_control": HOUR},
            {"type": "text", "text": "Policies: " + ", ".join(sorted(ENABLED_TOOLS)), "cache_control": FIVE},
        ]

    def ask(self, question: str, summary: str | None = None):
        started = time.perf_counter()
        stamp = dt.now().strftime("%H:%M")
        turn = {
            "role": "user",
            "content": [
                {"type": "text", "text": f"[{stamp}] {self.user_name} ({self.user_id}): {question}",
                 "cache_control": {"type": "ephemeral"}},
            ],
        }
        if summary:
            turn["content"].insert(0, {"type": "text", "text": f"Summary: {summary}"})
        self.history.append(turn)
        reply = self.client.messages.create(
            model=MODEL,
            max_tokens=1024,
            tools=[*tool_definitions()[:-1], {**tool_definitions()[-1], "cache_control": HOUR}],
            system=self.system_blocks(),
            messages=self.history,
            metadata={"user_id": self.user_id},
            extra_headers={"Idempotency-Key": str(uuid.uuid4()), "X-Request-Start": str(time.time())},
        )
        log.info("answered %s in %.2fs (session %s since %s)", self.user_id,
                 time.perf_counter() - started, uuid.uuid4(), self.started)
        return reply


def openai_messages(history: list[dict], question: str, user_email: str) -> list[dict]:
    return [
        {"role": "developer", "content": SYSTEM},
        *history,
        {"role": "user", "content": f"{user_email} asks at {time.ctime()}: {question}"},
    ]


def chain_input(question: str) -> list:
    return [SystemMessage(content=SYSTEM), HumanMessage(content=f"{dt.now():%Y-%m-%d} {question}")]


def prefixkit_prompt(docs: str, question: str, customer_name: str) -> Prompt:
    return Prompt(
        tools=tool_definitions(),
        system=[Segment.static(SYSTEM), Segment.versioned(ANSWER_FORMAT, version="3")],
        context=[Segment.session(docs)],
        messages=[Segment.dynamic(f"{customer_name} at {dt.now():%H:%M}: {question}")],
    )


def responses_call(client, question: str, request_id: str):
    return client.responses.create(
        model=MODEL,
        instructions=SYSTEM,
        input=f"{request_id}: {question}",
        prompt_cache_key=f"support-{settings.tenant_id}",
        user=request_id,
    )
'''


def test_breaking_the_clean_app_is_caught_at_the_right_places(tmp_path: Path) -> None:
    broken = (
        CLEAN_APP.replace("for name in sorted(ENABLED_TOOLS)", "for name in ENABLED_TOOLS")
        .replace(
            '{"type": "text", "text": SYSTEM, "cache_control": HOUR}',
            '{"type": "text", "text": SYSTEM + f" Now: {dt.now():%H:%M}", "cache_control": HOUR}',
        )
        .replace(
            '{"role": "developer", "content": SYSTEM}',
            '{"role": "developer", "content": f"{SYSTEM} for {user_email}"}',
        )
        .replace(
            'json.dumps({"answer": "str", "sources": ["str"]}, sort_keys=True)',
            'json.dumps({name: "str" for name in ENABLED_TOOLS})',
        )
        .replace(
            'return [SystemMessage(content=SYSTEM), HumanMessage(content=f"{dt.now():%Y-%m-%d} {question}")]',
            "return [HumanMessage(content=question), SystemMessage(content=SYSTEM)]",
        )
    )
    path = tmp_path / "assistant.py"
    findings = lint_source(broken, path, LintConfig(root=tmp_path))
    assert sorted({f.code for f in findings}) == [
        "PFX001",
        "PFX002",
        "PFX003",
        "PFX004",
        "PFX005",
        "PFX008",
    ]


FRAMEWORK_APP = '''
"""One assistant written against several agent frameworks, each keeping its prefix stable."""
from __future__ import annotations

import time
import uuid
from datetime import date, datetime

from agents import Agent as OpenAIAgent
from autogen_agentchat.agents import AssistantAgent
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.prompts import ChatPromptTemplate, PromptTemplate
from llama_index.core.llms import ChatMessage, MessageRole
from pydantic_ai import Agent, RunContext

from .settings import settings

RULES = "You answer questions about invoices. Cite the invoice number."
TOOL_NAMES = ["lookup_invoice", "list_payments"]

support = Agent(settings.model, system_prompt=RULES, instructions="Reply in English.")


@support.system_prompt
def policy() -> str:
    return f"Refunds need approval above {settings.refund_limit} EUR."


@support.instructions
def style(ctx: RunContext[None]) -> str:
    return "Use short sentences."


def triage_instructions(ctx, agent) -> str:
    return f"You are {agent.name}. Hand off refunds."


triage = OpenAIAgent(name="triage", instructions=triage_instructions)
planner = AssistantAgent("planner", model_client=None, system_message=RULES)
chat = ChatPromptTemplate.from_messages([("system", RULES), ("human", "{question}")])
qa = PromptTemplate.from_template("Context: {context}\\nToday: {today}\\nQuestion: {question}")


async def ask(question: str, user_name: str):
    stamp = datetime.now().isoformat()
    result = await support.run(f"[{stamp}] {user_name}: {question}")
    await planner.run(task=f"{date.today()} {question}")
    qa.format(context="", today=date.today().isoformat(), question=question)
    langchain = [SystemMessage(RULES), HumanMessage(f"{time.time()} {question}")]
    llama_index = [
        ChatMessage(role=MessageRole.SYSTEM, content=RULES),
        ChatMessage(role=MessageRole.USER, content=f"{uuid.uuid4()} {question}"),
    ]
    openai = [
        dict(role="system", content=RULES),
        dict(role="user", content=f"{user_name} asks at {stamp}: {question}"),
    ]
    return result, langchain, llama_index, openai
'''


@pytest.mark.parametrize(
    ("source", "name"), [(CLEAN_APP, "assistant.py"), (FRAMEWORK_APP, "frameworks.py")]
)
def test_a_cache_safe_app_is_silent(tmp_path: Path, source: str, name: str) -> None:
    path = tmp_path / "app" / name
    path.parent.mkdir()
    findings = lint_source(source, path, LintConfig(root=tmp_path))
    assert findings == [], "\n".join(f"{f.code} {f.start} {f.message}" for f in findings)


def test_breaking_the_framework_app_is_caught_at_each_entry_point(tmp_path: Path) -> None:
    broken = (
        FRAMEWORK_APP.replace(
            'return f"Refunds need approval above {settings.refund_limit} EUR."',
            'return f"Refunds need approval above {settings.refund_limit} EUR. {datetime.now()}"',
        )
        .replace('return "Use short sentences."', 'return f"Today is {date.today()}."')
        .replace('f"You are {agent.name}. Hand off refunds."', 'f"Run {uuid.uuid4()}."')
        .replace('("system", RULES)', '("system", RULES + str(time.time()))')
        .replace(
            "ChatMessage(role=MessageRole.SYSTEM, content=RULES)",
            "ChatMessage(role=MessageRole.SYSTEM, content=f'{RULES} {stamp}')",
        )
        .replace(
            'dict(role="system", content=RULES)',
            'dict(role="system", content=f"{RULES} for {user_name}")',
        )
    )
    path = tmp_path / "frameworks.py"
    findings = lint_source(broken, path, LintConfig(root=tmp_path))
    lines = broken.splitlines()
    reported = sorted({(f.code, lines[f.start.row - 1].strip()[:30]) for f in findings})
    assert reported == [
        ("PFX001", "chat = ChatPromptTemplate.from"),
        ("PFX001", 'return f"Refunds need approval'),
        ("PFX001", 'return f"Run {uuid.uuid4()}."'),
        ("PFX001", 'return f"Today is {date.today('),
        ("PFX001", "stamp = datetime.now().isoform"),
        ("PFX002", 'dict(role="system", content=f"'),
    ]
