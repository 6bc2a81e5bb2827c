"""PFX001 volatile-value-in-cached-segment."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ..analysis.bindings import Env
from ..analysis.cached_segments import CachedSegment, DatetimeFlag, datetime_flags
from ..analysis.taint import Taint
from ..catalog import DAILY_CALLABLES
from ..context import LintContext
from ..finding import Finding
from ..rule import Invalid, PythonRule, Valid

__all__ = ["VolatileValueInCachedSegment"]


class VolatileValueInCachedSegment(PythonRule):
    """A clock, date, uuid, random number, pid or hostname reaches a cached segment.

    Cached segments are what the provider caches: `system=`, `instructions=`,
    `tools=`, `system_prompt=`, `system_message=`, `system_msgs=` and
    `system_instruction=` arguments (provider clients of every kind, Gemini,
    pydantic-ai, openai-agents, swarm, smolagents, autogen, camel, MetaGPT),
    the framework agents' own system-prompt arguments (Google ADK
    `instruction=` and its InstructionProviders, agno `description=` /
    `instructions=` / `additional_context=`, crewAI `role=` / `goal=` /
    `backstory=`, LangGraph `create_react_agent(prompt=...)`, camel
    `ChatAgent`'s first argument, openai-agents `handoff_description=`),
    `x.system_prompt = ...` attributes and `system_prompt` class fields, the
    return value of `@agent.system_prompt` / `@agent.instructions` functions
    and of functions given as `instructions=`, system and developer messages
    (dicts, `dict(role=...)`, the SDKs' typed params, LangChain `("system",
    ...)` tuples, `SystemMessage`, LlamaIndex `ChatMessage(role=MessageRole.SYSTEM)`,
    Haystack `ChatMessage.from_system`, Semantic Kernel `add_system_message`),
    prompt templates' text, blocks carrying `cache_control` or
    `prompt_cache_breakpoint`, and prefixkit's `Segment.static` /
    `Segment.versioned` (see "How the linter works" in the linter guide).
    agno's `add_datetime_to_context=True` is reported too: agno then writes
    the current time into the system message. A random pick among a few fixed
    options (`random.choice` / `choices` / `sample` over a literal list or
    tuple of constants, a name bound only to one, or `range(len(x))`, an index
    into one collection) is not reported: each variant caches on its own.
    Neither is a message appended at the end of an existing history
    (`state["messages"] + [SystemMessage(...)]`, `history.append(msg)`,
    `[*history, msg]`): it is the new last turn, after everything cached.
    Values are followed through f-strings, `.format`, `%`, `+`, `"".join`,
    message factories, variables, back from a parameter to what the module's
    calls pass for it, the functions and methods of the same module, and the
    functions, static and class methods and module constants imported from
    the project's other modules (never from installed packages); imports are
    resolved under aliases. A value computed in another module is reported on
    the call or name that brings it in, naming the file and line where it is
    computed.

    The message says when the value changes: on every request (a clock or
    uuid computed per call), once a day (`date.today()`, or a clock formatted
    to the day), or on every process start (computed once when the module is
    loaded, or a pid or hostname). A value at the very end of the cached text
    is reported with what it still costs (the messages after it). A volatile
    value in the latest user message is not reported: that is where it belongs.

    ## Why it breaks caching
    A provider reuses a cached prefix only when it is byte-identical. A
    timestamp or uuid in the system prompt makes every request's prefix new:
    every call pays a cache write (1.25x input price on Anthropic) and never
    reads one, and nothing reports the miss.

    ## Example
    ```python
    from datetime import datetime as dt

    SYSTEM = f"You are a support agent. Today is {dt.now():%Y-%m-%d}."
    client.messages.create(model=MODEL, system=SYSTEM, messages=messages)
    ```

    ## Use instead
    ```python
    SYSTEM = "You are a support agent."
    today = f"Today is {dt.now():%Y-%m-%d}."
    client.messages.create(
        model=MODEL,
        system=SYSTEM,
        messages=[*history, {"role": "user", "content": f"{today}\\n{question}"}],
    )
    ```
    """

    code = "PFX001"
    name = "volatile-value-in-cached-segment"
    VALID = (
        # the latest user message may change on every request
        Valid(
            "import datetime\n"
            "SYSTEM = 'You are a support agent.'\n"
            "def ask(client, question):\n"
            "    now = datetime.datetime.now().isoformat()\n"
            "    return client.messages.create(\n"
            "        system=SYSTEM,\n"
            "        messages=[{'role': 'user', 'content': f'[{now}] {question}'}],\n"
            "    )\n"
        ),
        # headers, idempotency keys and metadata are not part of the prompt
        Valid(
            "import uuid\n"
            "def ask(client, messages):\n"
            "    return client.messages.create(\n"
            "        system='You are terse.',\n"
            "        messages=messages,\n"
            "        extra_headers={'Idempotency-Key': str(uuid.uuid4())},\n"
            "        metadata={'request_id': uuid.uuid4().hex},\n"
            "    )\n"
        ),
        # logging and timing around the call
        Valid(
            "import logging, time\n"
            "log = logging.getLogger(__name__)\n"
            "SYSTEM = 'You summarise tickets.'\n"
            "def summarise(client, ticket):\n"
            "    started = time.perf_counter()\n"
            "    reply = client.messages.create(system=SYSTEM, messages=[{'role': 'user', 'content': ticket}])\n"
            "    log.info('summarised in %.2fs at %s', time.perf_counter() - started, time.time())\n"
            "    return reply\n"
        ),
        # f-strings over constants and environment settings
        Valid(
            "import os\n"
            "from myapp.settings import settings\n"
            "PRODUCT = 'Acme Cloud'\n"
            "VERSION = '2.3'\n"
            'SYSTEM = f\'You support {PRODUCT} {VERSION} in {os.environ.get("REGION", "eu")}.\'\n'
            "SYSTEM_LONG = SYSTEM + f' Plan limits: {settings.plan_limits}. Locale: {os.getenv(\"LOCALE\")}'\n"
            "def ask(client, q):\n"
            "    return client.messages.create(system=SYSTEM_LONG, messages=[{'role': 'user', 'content': q}])\n"
        ),
        # a volatile value in a dynamic prefixkit segment is fine
        Valid(
            "from datetime import datetime\n"
            "from prefixkit.sdk import Prompt, Segment\n"
            "def build(question):\n"
            "    return Prompt(\n"
            "        system=[Segment.static('You are helpful.')],\n"
            "        messages=[Segment.dynamic(f'{datetime.now():%H:%M} {question}')],\n"
            "    )\n"
        ),
        # a rolling breakpoint on the latest user turn is the recommended pattern
        Valid(
            "import time\n"
            "def ask(client, history, question):\n"
            "    turn = {'role': 'user', 'content': [\n"
            "        {'type': 'text', 'text': f'{time.strftime(\"%H:%M\")} {question}',\n"
            "         'cache_control': {'type': 'ephemeral'}},\n"
            "    ]}\n"
            "    return client.messages.create(system='Be brief.', messages=[*history, turn])\n"
        ),
        # a helper that logs a timestamp but returns a constant
        Valid(
            "import time, logging\n"
            "def system_prompt():\n"
            "    logging.debug('built at %s', time.time())\n"
            "    return 'You are a careful assistant.'\n"
            "def ask(client, q):\n"
            "    return client.messages.create(system=system_prompt(), messages=[{'role': 'user', 'content': q}])\n"
        ),
        # a request payload dict: its top-level cache_control does not make it a block
        Valid(
            "def params(model, messages, cache_control, user_profile_id):\n"
            "    return {'model': model, 'messages': messages, 'system': 'Be brief.',\n"
            "            'cache_control': cache_control, 'user_profile_id': user_profile_id}\n"
        ),
        # a local variable that shadows a clock name but holds a constant
        Valid(
            "def build(client, q):\n"
            "    now = 'the current release'\n"
            "    return client.responses.create(instructions=f'Describe {now}.', input=q)\n"
        ),
        # pydantic-ai: a static system prompt function, the date in the user prompt
        Valid(
            "from datetime import date\n"
            "from pydantic_ai import Agent\n"
            "agent = Agent('openai:gpt-4o', system_prompt='You answer SQL questions.')\n"
            "@agent.system_prompt\n"
            "def rules() -> str:\n"
            "    return 'Use ANSI SQL.'\n"
            "def ask(q):\n"
            "    return agent.run_sync(f'Today is {date.today()}. {q}')\n"
        ),
        # openai-agents: instructions built from the agent, not the clock
        Valid(
            "from agents import Agent\n"
            "def instructions(ctx, agent):\n"
            "    return f'You are {agent.name}. Be brief.'\n"
            "triage = Agent(name='triage', instructions=instructions)\n"
        ),
        # autogen: the clock goes in the task, not the system message
        Valid(
            "import datetime\n"
            "from autogen_agentchat.agents import AssistantAgent\n"
            "agent = AssistantAgent('helper', model_client=None, system_message='You plan trips.')\n"
            "async def plan(city):\n"
            "    return await agent.run(task=f'{datetime.datetime.now():%H:%M} plan {city}')\n"
        ),
        # LangChain: the clock in the human message and a template placeholder
        Valid(
            "from datetime import datetime\n"
            "from langchain_core.prompts import ChatPromptTemplate, PromptTemplate\n"
            "from langchain_core.messages import HumanMessage, SystemMessage\n"
            "chat = ChatPromptTemplate.from_messages([('system', 'You are terse.'), ('human', '{q}')])\n"
            "qa = PromptTemplate.from_template('Answer from context. Today: {today}. {q}')\n"
            "def invoke(q):\n"
            "    now = datetime.now()\n"
            "    qa.format(today=now.isoformat(), q=q)\n"
            "    return [SystemMessage('You are terse.'), HumanMessage(f'{now} {q}')]\n"
        ),
        # LlamaIndex: a user ChatMessage may carry the time
        Valid(
            "import time\n"
            "from llama_index.core.llms import ChatMessage, MessageRole\n"
            "def messages(q):\n"
            "    return [ChatMessage(role=MessageRole.SYSTEM, content='You cite sources.'),\n"
            "            ChatMessage(role=MessageRole.USER, content=f'{time.ctime()}: {q}')]\n"
        ),
        # a request kwargs dict: metadata and the user turn are not the prefix
        Valid(
            "import uuid, time\n"
            "def patch(new_kwargs, q):\n"
            "    new_kwargs['system'] = 'You are careful.'\n"
            "    new_kwargs['metadata'] = {'user_id': uuid.uuid4().hex}\n"
            "    new_kwargs['messages'] = [dict(role='user', content=f'{time.time()} {q}')]\n"
            "    return new_kwargs\n"
        ),
        # typed params and subscript-built blocks in the latest user turn
        Valid(
            "import time\n"
            "from anthropic.types import MessageParam, TextBlockParam\n"
            "from openai.types.chat import ChatCompletionUserMessageParam\n"
            "def turn(q):\n"
            "    block = {'type': 'text', 'text': f'{time.time()} {q}'}\n"
            "    block['cache_control'] = {'type': 'ephemeral'}\n"
            "    msg = {'role': 'user'}\n"
            "    msg['content'] = f'{time.time()} {q}'\n"
            "    return [MessageParam(role='user', content=[block, TextBlockParam(type='text',\n"
            "            text=f'{time.time()}', cache_control={'type': 'ephemeral'})]), msg,\n"
            "            ChatCompletionUserMessageParam(role='user', content=f'{time.time()}')]\n"
        ),
        # a module constant that is fixed text, and async/raw clients with the clock in the user turn
        Valid(
            "import datetime\n"
            "from anthropic import AsyncAnthropic\n"
            "RELEASED = 'Knowledge cut-off: 2025-01-01.'\n"
            "client = AsyncAnthropic()\n"
            "async def ask(q):\n"
            "    return await client.with_raw_response.messages.create(system=RELEASED,\n"
            "        messages=[{'role': 'user', 'content': f'{datetime.date.today()} {q}'}])\n"
        ),
        # aider's shape with the date moved out of the system prompt
        Valid(
            "from datetime import datetime\n"
            "class Coder:\n"
            "    def platform_info(self):\n"
            "        return f'- Shell: {self.shell}'\n"
            "    def fmt_system_prompt(self, prompt):\n"
            "        return prompt.format(platform=self.platform_info())\n"
            "    def messages(self, q):\n"
            "        today = datetime.now().strftime('%Y-%m-%d')\n"
            "        return [dict(role='system', content=self.fmt_system_prompt(self.main_system)),\n"
            "                dict(role='user', content=f'Date: {today}. {q}')]\n"
        ),
        # framework keywords count only on the framework's classes: a local `Agent` is not one
        Valid(
            "import datetime\n"
            "class Agent:\n"
            "    def __init__(self, description, instruction):\n"
            "        self.description, self.instruction = description, instruction\n"
            "job = Agent(description=f'Started {datetime.datetime.now()}', instruction='')\n"
        ),
        # agno without the datetime flag, the date in the message the agent runs with
        Valid(
            "import datetime\n"
            "from agno.agent import Agent\n"
            "agent = Agent(description='You investigate fraud.', add_datetime_to_context=False)\n"
            "def run(q):\n"
            "    return agent.run(f'Today is {datetime.date.today()}. {q}')\n"
        ),
        # camel: a static system message, the date in the step's user message
        Valid(
            "import datetime\n"
            "from camel.agents import ChatAgent\n"
            "agent = ChatAgent('You plan tasks.', model=None)\n"
            "def plan(q):\n"
            "    return agent.step(f'Today is {datetime.date.today()}. {q}')\n"
        ),
        # a parameter that reaches instructions=, every caller passing static text
        Valid(
            "import datetime\n"
            "class Operator:\n"
            "    def _call_model(self, model, system_prompt):\n"
            "        return self.client.responses.create(model=model, instructions=system_prompt,\n"
            "                                            input=[])\n"
            "    def act(self, q):\n"
            "        stamp = datetime.datetime.now()\n"
            "        return self._call_model('m', 'You operate a browser.'), stamp\n"
        ),
        # a message appended at the end of the conversation so far is its tail
        Valid(
            "import datetime\n"
            "from langchain_core.messages import SystemMessage\n"
            "def monitor(state):\n"
            "    note = f'Report received at {datetime.datetime.now():%H:%M}'\n"
            "    return {'messages': state['messages'] + [SystemMessage(content=note)]}\n"
        ),
        # a random pick among a few fixed options: each variant caches on its own
        Valid(
            "import random\n"
            "from langchain_core.messages import SystemMessage\n"
            "GREETINGS = ['Hi', 'Hello']\n"
            "def messages(q):\n"
            "    return [SystemMessage(content=f'{random.choice(GREETINGS)}! You help with billing.'), q]\n"
        ),
        Valid(
            "import random\n"
            "def ask(client, q, systems):\n"
            "    style = random.choice(('haiku', 'pirate', 'robot'))\n"
            "    part = random.choice(list(range(len(systems))))\n"
            "    system = systems[part] + f' Answer as a {style}.'\n"
            "    return client.messages.create(system=system, messages=[q])\n"
        ),
        # a str function of some other context type is not an instruction provider
        Valid(
            "import datetime\n"
            "from mylib import ReadonlyContext\n"
            "def banner(context: ReadonlyContext) -> str:\n"
            "    return f'Generated {datetime.datetime.now()}'\n"
        ),
        # AutoGen 0.2: a static system message, the date in the message that starts the chat
        Valid(
            "import datetime\n"
            "import autogen\n"
            "def chat(user, llm_config, q):\n"
            "    helper = autogen.AssistantAgent('helper', 'You help.', llm_config=llm_config)\n"
            "    return user.initiate_chat(helper, message=f'Today is {datetime.date.today()}. {q}')\n"
        ),
        # an attribute holding a fixed system prompt; the clock kept in another attribute
        Valid(
            "from datetime import datetime\n"
            "class Role:\n"
            "    system_prompt: str = 'You are an engineer.'\n"
            "    def start(self):\n"
            "        self.llm.system_prompt = self.system_prompt\n"
            "        self.started_at = datetime.now()\n"
        ),
        # an async helper returns (system, messages): the uuid of a tool call is in the messages
        Valid(
            "import uuid\n"
            "class Model:\n"
            "    async def _map(self, parts):\n"
            "        system = 'You are a careful assistant.'\n"
            "        messages = [{'role': 'assistant', 'content': [\n"
            "            {'type': 'tool_use', 'id': p.id or str(uuid.uuid4()), 'name': p.name}]}\n"
            "            for p in parts]\n"
            "        return system, messages\n"
            "    async def request(self, client, parts):\n"
            "        system, messages = await self._map(parts)\n"
            "        return await client.messages.create(system=system, messages=messages)\n"
        ),
    )
    INVALID = (
        Invalid(
            "from datetime import datetime as dt\n"
            "SYSTEM = f'You are a support agent. Today is {dt.now():%Y-%m-%d}.'\n"
            "def ask(client, messages):\n"
            "    return client.messages.create(system=SYSTEM, messages=messages)\n",
            line=2,
        ),
        Invalid(
            "import datetime\n"
            "def ask(client, q):\n"
            "    return client.chat.completions.create(model='m', messages=[\n"
            "        {'role': 'system', 'content': 'Date: ' + str(datetime.date.today())},\n"
            "        {'role': 'user', 'content': q},\n"
            "    ])\n",
            line=4,
        ),
        Invalid(
            "import uuid\n"
            "def ask(client, q):\n"
            "    header = 'Trace {}'.format(uuid.uuid4())\n"
            "    return client.responses.create(instructions=header + '\\nBe brief.', input=q)\n",
            line=3,
        ),
        # through a helper function and "".join
        Invalid(
            "import time\n"
            "def stamp():\n"
            "    return time.strftime('%Y-%m-%d %H:%M')\n"
            "def system_text(rules):\n"
            "    return ''.join(['Rules:\\n', rules, '\\nGenerated ', stamp()])\n"
            "def ask(client, q):\n"
            "    return client.messages.create(system=system_text('be kind'), messages=[q])\n",
            line=3,
        ),
        # a prompt builder class: attribute set in __init__ from the clock
        Invalid(
            "from datetime import datetime\n"
            "class SupportPrompt:\n"
            "    def __init__(self, product):\n"
            "        self.product = product\n"
            "        self.created = datetime.utcnow()\n"
            "    def system(self):\n"
            "        return 'Agent for %s (session started %s)' % (self.product, self.created)\n"
            "    def send(self, client, q):\n"
            "        return client.messages.create(system=self.system(), messages=[q])\n",
            line=5,
        ),
        # LangChain SystemMessage and a cache_control block; a random pick among
        # runtime data (the fixed-options twin is VALID)
        Invalid(
            "import random\n"
            "from langchain_core.messages import SystemMessage\n"
            "def messages(q, greetings):\n"
            "    return [SystemMessage(content=f'{random.choice(greetings)}! You help with billing.'), q]\n",
            line=4,
        ),
        # the same message put before the conversation so far: the prefix
        Invalid(
            "import datetime\n"
            "from langchain_core.messages import SystemMessage\n"
            "def monitor(state):\n"
            "    note = f'Report received at {datetime.datetime.now():%H:%M}'\n"
            "    return {'messages': [SystemMessage(content=note)] + state['messages']}\n",
            line=4,
        ),
        Invalid(
            "import random\n"
            "def ask(client, q):\n"
            "    system = f'Answer as style #{random.randint(1, 1000)}.'\n"
            "    return client.messages.create(system=system, messages=[q])\n",
            line=3,
        ),
        Invalid(
            "import socket\n"
            "BLOCK = {'type': 'text', 'text': f'Served by {socket.gethostname()}',\n"
            "         'cache_control': {'type': 'ephemeral'}}\n",
            line=2,
        ),
        # prefixkit's own static segment
        Invalid(
            "import os\n"
            "from prefixkit.sdk import Segment\n"
            "WORKER = Segment.static(f'worker {os.getpid()}: answer in English')\n",
            line=3,
        ),
        # a payload dict sent with **params
        Invalid(
            "import time\n"
            "def ask(client, q):\n"
            "    params = {'model': 'm', 'system': f'Epoch {time.time():.0f}', 'messages': [q]}\n"
            "    return client.messages.create(**params)\n",
            line=3,
        ),
        # tool definitions are cached too
        Invalid(
            "import time\n"
            "TOOLS = [{'name': 'search', 'description': f'Search (index built {time.time()})',\n"
            "          'input_schema': {'type': 'object'}}]\n"
            "def ask(client, q):\n"
            "    return client.messages.create(tools=TOOLS, messages=[q])\n",
            line=2,
        ),
        # flow through methods: aider builds its system prompt this way (per day)
        Invalid(
            "from datetime import datetime\n"
            "class Coder:\n"
            "    def get_platform_info(self):\n"
            "        text = f'- Shell: {self.shell}\\n'\n"
            "        dt = datetime.now().astimezone().strftime('%Y-%m-%d')\n"
            "        text += f'- Current date: {dt}\\n'\n"
            "        return text\n"
            "    def fmt_system_prompt(self, prompt):\n"
            "        platform_text = self.get_platform_info()\n"
            "        return prompt.format(platform=platform_text)\n"
            "    def format_chat_chunks(self):\n"
            "        main_sys = self.fmt_system_prompt(self.gpt_prompts.main_system)\n"
            "        return [dict(role='system', content=main_sys)]\n",
            line=5,
        ),
        # pydantic-ai: @agent.system_prompt and @agent.instructions functions, Agent(system_prompt=)
        Invalid(
            "from datetime import datetime\n"
            "from pydantic_ai import Agent\n"
            "cli_agent = Agent('openai:gpt-4o')\n"
            "@cli_agent.system_prompt\n"
            "def cli_system_prompt() -> str:\n"
            "    return f'The current date and time is {datetime.now()}.'\n",
            line=6,
        ),
        Invalid(
            "from datetime import date\n"
            "from pydantic_ai import Agent, RunContext\n"
            "agent = Agent('openai:gpt-4o')\n"
            "@agent.instructions\n"
            "async def add_date(ctx: RunContext[None]) -> str:\n"
            "    return f'Today is {date.today()}.'\n",
            line=6,
        ),
        Invalid(
            "import time\n"
            "from pydantic_ai import Agent\n"
            "def build():\n"
            "    return Agent('openai:gpt-4o', system_prompt=f'Session opened at {time.time()}')\n",
            line=4,
        ),
        # openai-agents / swarm: instructions given a function or a lambda
        Invalid(
            "import uuid\n"
            "from agents import Agent\n"
            "def instructions(ctx, agent):\n"
            "    return f'Trace {uuid.uuid4()}: you triage requests.'\n"
            "triage = Agent(name='triage', instructions=instructions)\n",
            line=4,
        ),
        Invalid(
            "import time\n"
            "from swarm import Agent\n"
            "agent = Agent(name='a', instructions=lambda context_variables: f'Epoch {time.time()}')\n",
            line=3,
        ),
        # autogen: system_message=
        Invalid(
            "import datetime\n"
            "from autogen_agentchat.agents import AssistantAgent\n"
            "def make(client):\n"
            "    now = datetime.datetime.now().isoformat()\n"
            "    return AssistantAgent('helper', model_client=client, system_message=f'It is {now}.')\n",
            line=4,
        ),
        # LangChain: ("system", ...) tuples, SystemMessagePromptTemplate, PromptTemplate
        Invalid(
            "from datetime import datetime\n"
            "from langchain_core.prompts import ChatPromptTemplate\n"
            "def prompt():\n"
            "    return ChatPromptTemplate.from_messages([\n"
            "        ('system', f'Now: {datetime.now():%H:%M}. You are terse.'), ('human', '{q}')])\n",
            line=5,
        ),
        Invalid(
            "import time\n"
            "from langchain_core.prompts import SystemMessagePromptTemplate, PromptTemplate\n"
            "def templates():\n"
            "    system = SystemMessagePromptTemplate.from_template(f'Run {time.time()}')\n"
            "    return system, PromptTemplate(template=f'{time.time()} {{q}}', input_variables=['q'])\n",
            line=4,
        ),
        # LlamaIndex: ChatMessage with MessageRole.SYSTEM
        Invalid(
            "import uuid\n"
            "from llama_index.core.llms import ChatMessage, MessageRole\n"
            "def messages(q):\n"
            "    return [ChatMessage(role=MessageRole.SYSTEM, content=f'Trace {uuid.uuid4()}'),\n"
            "            ChatMessage(role=MessageRole.USER, content=q)]\n",
            line=4,
        ),
        # request kwargs completed by assignment, and litellm
        Invalid(
            "import time\n"
            "def prepare(new_kwargs):\n"
            "    new_kwargs['system'] = f'Clock {time.time()}'\n"
            "    return new_kwargs\n",
            line=3,
        ),
        Invalid(
            "import random, litellm\n"
            "def ask(q):\n"
            "    return litellm.completion(model='gpt-4o', messages=[\n"
            "        dict(role='system', content=f'Seed {random.random()}'), dict(role='user', content=q)])\n",
            line=4,
        ),
        # the SDKs' typed params, and blocks completed by subscript assignment
        Invalid(
            "import time\n"
            "from anthropic.types.beta import BetaTextBlockParam\n"
            "def system():\n"
            "    return [BetaTextBlockParam(type='text', text=f'Now {time.time()}',\n"
            "                               cache_control={'type': 'ephemeral'})]\n",
            line=4,
        ),
        Invalid(
            "import uuid\n"
            "from openai.types.chat import ChatCompletionSystemMessageParam\n"
            "def messages(q):\n"
            "    return [ChatCompletionSystemMessageParam(role='system', content=f'Run {uuid.uuid4()}'),\n"
            "            {'role': 'user', 'content': q}]\n",
            line=4,
        ),
        Invalid(
            "import time\n"
            "from openai.types.responses import EasyInputMessageParam\n"
            "def ask(client, q):\n"
            "    return client.responses.create(model='m', input=[\n"
            "        EasyInputMessageParam(role='developer', content=f'{time.time()}'), q])\n",
            line=5,
        ),
        Invalid(
            "import uuid\n"
            "def system_blocks(rules):\n"
            "    block = {'type': 'text', 'text': f'{rules} (build {uuid.uuid4()})'}\n"
            "    block['cache_control'] = {'type': 'ephemeral'}\n"
            "    msg = {'role': 'system'}\n"
            "    msg['content'] = f'{uuid.uuid4()}'\n"
            "    return [block, msg]\n",
            line=3,
        ),
        # a module-level constant formatted at import: per process start and per day
        Invalid(
            "from datetime import datetime\n"
            "SYSTEM_PROMPT = f'You operate a computer. Today is {datetime.today().strftime(\"%A, %B %d, %Y\")}.'\n"
            "def ask(client, messages):\n"
            "    return client.beta.messages.create(system=[{'type': 'text', 'text': SYSTEM_PROMPT}],\n"
            "                                       messages=messages)\n",
            line=2,
        ),
        # raw, streaming, async and cloud clients are requests like any other
        Invalid(
            "import time\n"
            "from anthropic import AnthropicBedrock, AsyncAnthropicVertex\n"
            "bedrock = AnthropicBedrock()\n"
            "vertex = AsyncAnthropicVertex()\n"
            "def ask(q):\n"
            "    return bedrock.messages.with_raw_response.create(system=f'{time.time()}', messages=[q])\n"
            "async def stream(q):\n"
            "    async with vertex.messages.with_streaming_response.create(\n"
            "            system=f'{time.time()}', messages=[q]) as response:\n"
            "        return response\n",
            line=6,
        ),
        Invalid(
            "import datetime\n"
            "from openai import AsyncAzureOpenAI\n"
            "client = AsyncAzureOpenAI()\n"
            "async def ask(q):\n"
            "    return await client.chat.completions.create(model='m', messages=[\n"
            "        {'role': 'system', 'content': f'{datetime.datetime.utcnow()}'}, {'role': 'user', 'content': q}])\n",
            line=6,
        ),
        # autogen_core's SystemMessage kept on the agent (per day)
        Invalid(
            "import datetime\n"
            "from autogen_core.models import SystemMessage\n"
            "class SchedulingAgent:\n"
            "    def __init__(self, model_client):\n"
            "        self._system_messages = [SystemMessage(content=f'''You schedule meetings.\n"
            "Today's date is {datetime.datetime.now().strftime('%Y-%m-%d')}''')]\n",
            line=6,
        ),
        # a date placed last in the system prompt on purpose (crewAI): still reported, as ending it
        Invalid(
            "from datetime import datetime\n"
            "class Prompts:\n"
            "    def date_block(self):\n"
            "        return f'\\n\\nCurrent Date: {datetime.now().strftime(self.date_format)}'\n"
            "    def task_execution(self, client, q):\n"
            "        system = self.role_playing + self.date_block()\n"
            "        return client.messages.create(system=system, messages=[q])\n",
            line=4,
        ),
        # Google ADK: an InstructionProvider (a str function of a ReadonlyContext, given to
        # Agent(instruction=...) in another module), and global_instruction= itself
        Invalid(
            "from datetime import datetime\n"
            "from google.adk.agents.readonly_context import ReadonlyContext\n"
            "def instruction_provider(context: ReadonlyContext) -> str:\n"
            "    return (f'You build dashboards. State: {context.state}\\n'\n"
            "            f\"The current date is {datetime.now().strftime('%Y-%m-%d')}.\")\n",
            line=5,
        ),
        Invalid(
            "import time\n"
            "from google.adk.agents import LlmAgent as Worker\n"
            "root = Worker(name='root', model='gemini-2.0-flash',\n"
            "              global_instruction=f'Session started at {time.time()}.')\n",
            line=4,
        ),
        # agno: description= (like instructions=, expected_output=, additional_context=)
        # is the system message, here built by a helper of the same module
        Invalid(
            "from datetime import datetime\n"
            "from agno.agent import Agent\n"
            "def _build_system_prompt() -> str:\n"
            "    return TEMPLATE.format(today=datetime.now().strftime('%Y-%m-%d'))\n"
            "def investigate(model):\n"
            "    return Agent(model=model, description=_build_system_prompt(), markdown=True)\n",
            line=4,
        ),
        # agno's flag: the framework writes the current time into the system message
        Invalid(
            "from agno.agent import Agent\n"
            "agent = Agent(\n"
            "    instructions='You answer questions.',\n"
            "    add_datetime_to_context=True,\n"
            ")\n",
            line=4,
        ),
        # MetaGPT: llm.aask(req, system_msgs=[...]), the time in a method of the role
        Invalid(
            "from datetime import datetime\n"
            "class RoleZero:\n"
            "    def _get_prefix(self) -> str:\n"
            "        time_info = datetime.now().strftime('%Y-%m-%d %H:%M:%S')\n"
            "        return f'You are {self.profile}. The current time is {time_info}.'\n"
            "    async def _think(self, req):\n"
            "        system_prompt = self.system_prompt.format(role_info=self._get_prefix())\n"
            "        return await self.llm.aask(req, system_msgs=[system_prompt])\n",
            line=4,
        ),
        # camel: the system message wrapped in a message factory, and as the first argument
        Invalid(
            "import datetime\n"
            "from camel.agents import ChatAgent\n"
            "from camel.messages import BaseMessage\n"
            "def developer(model):\n"
            "    system_message = f'You write code. Current Date: {datetime.date.today()}.'\n"
            "    return ChatAgent(\n"
            "        system_message=BaseMessage.make_assistant_message(\n"
            "            role_name='Developer Agent', content=system_message),\n"
            "        model=model)\n",
            line=5,
        ),
        Invalid(
            "import datetime\n"
            "from camel.agents import ChatAgent\n"
            "def planner(model):\n"
            "    return ChatAgent(f'You plan tasks. The date is {datetime.date.today()}.', model=model)\n",
            line=4,
        ),
        Invalid(
            "import datetime\n"
            "from camel.agents import ChatAgent\n"
            "from camel.messages import BaseMessage\n"
            "def searcher(model):\n"
            "    sys_msg = BaseMessage.make_assistant_message(\n"
            "        role_name='Search Agent', content=f'You search. Today: {datetime.date.today()}')\n"
            "    return ChatAgent(system_message=sys_msg, model=model)\n",
            line=6,
        ),
        # a parameter that reaches instructions=, fed by a positional argument of a local call
        Invalid(
            "from datetime import datetime\n"
            "class OpenAIOperator:\n"
            "    def get_instructions(self) -> str:\n"
            "        return f\"You operate a browser. Today is {datetime.today().strftime('%A, %B %-d, %Y')}.\"\n"
            "    async def _call_model(self, model, system_prompt, tools):\n"
            "        return await self.client.responses.create(model=model, instructions=system_prompt,\n"
            "                                                  tools=tools, input=[])\n"
            "    async def act(self):\n"
            "        system_prompt = self.get_instructions()\n"
            "        return await self._call_model(self.model, system_prompt, [])\n",
            line=4,
        ),
        # Haystack's ChatMessage.from_system and Semantic Kernel's add_system_message
        Invalid(
            "from datetime import datetime\n"
            "from haystack.dataclasses import ChatMessage\n"
            "def messages(q):\n"
            "    return [ChatMessage.from_system(f'Now: {datetime.now()}'), ChatMessage.from_user(q)]\n",
            line=4,
        ),
        Invalid(
            "import uuid\n"
            "from semantic_kernel.contents import ChatHistory\n"
            "def history():\n"
            "    chat = ChatHistory()\n"
            "    chat.add_system_message(f'Run {uuid.uuid4()}: you answer questions.')\n"
            "    return chat\n",
            line=5,
        ),
        # crewAI's role, goal and backstory; LangGraph's prompt=
        Invalid(
            "from datetime import date\n"
            "from crewai import Agent\n"
            "def analyst():\n"
            "    return Agent(role='Analyst', goal='Report',\n"
            "                 backstory=f'You are an analyst. Today is {date.today()}.')\n",
            line=5,
        ),
        Invalid(
            "import time\n"
            "from langgraph.prebuilt import create_react_agent\n"
            "def agent(model, tools):\n"
            "    return create_react_agent(model, tools, prompt=f'Started {time.time()}.')\n",
            line=4,
        ),
        # Gemini's system_instruction= (google-genai, google-generativeai, Vertex AI)
        Invalid(
            "from datetime import datetime\n"
            "from google.genai import types\n"
            "def ask(client, q):\n"
            "    config = types.GenerateContentConfig(\n"
            "        system_instruction=f'You are a scheduler. Now: {datetime.now()}')\n"
            "    return client.models.generate_content(model='gemini-2.0-flash', contents=q,\n"
            "                                          config=config)\n",
            line=5,
        ),
        # AutoGen 0.2 / AG2: the system message as AssistantAgent's second argument
        Invalid(
            "import datetime\n"
            "import autogen\n"
            "def helper(llm_config):\n"
            "    return autogen.AssistantAgent('helper', f'Today is {datetime.date.today()}.',\n"
            "                                  llm_config=llm_config)\n",
            line=4,
        ),
        # openai-agents: handoff_description= becomes the parent's handoff tool description
        Invalid(
            "import time\n"
            "from agents import Agent\n"
            "billing = Agent(name='Billing', instructions='You handle billing.',\n"
            "                handoff_description=f'Billing desk (started {time.time()})')\n",
            line=4,
        ),
        # a system prompt set as an attribute (MetaGPT's `self.llm.system_prompt = ...`) or a
        # class field of an agent model
        Invalid(
            "from datetime import datetime\n"
            "class Role:\n"
            "    def _set_prefix(self):\n"
            "        self.llm.system_prompt = f'You are {self.profile}. Now: {datetime.now()}'\n",
            line=4,
        ),
        Invalid(
            "import time\n"
            "from pydantic import BaseModel\n"
            "class Engineer(BaseModel):\n"
            "    system_prompt: str = f'You write code. Session {int(time.time())}.'\n",
            line=4,
        ),
        # AutoGen 0.2: update_system_message(...) replaces the agent's system message
        Invalid(
            "from datetime import datetime\n"
            "def refresh(assistant):\n"
            "    assistant.update_system_message(f'You help. Now: {datetime.now()}')\n",
            line=3,
        ),
    )

    def check(self, context: LintContext) -> Iterator[Finding]:
        """Report each volatile origin once, where it is produced, saying when it changes."""
        for segment, taint in context.segment_taints:
            if taint.kind != "volatile":
                continue
            yield context.finding(self.code, taint.origin, _message(context, segment, taint))
        for flag in datetime_flags(context.index, context.analysis):
            yield context.finding(self.code, flag.node, _flag_message(flag))


def _flag_message(flag: DatetimeFlag) -> str:
    keyword = flag.node.keyword.value if flag.node.keyword is not None else "?"
    when = (
        "once a day (its `datetime_format` shows the date only)" if flag.daily else "on every run"
    )
    return (
        f"`{keyword}=` (true) puts the current time into {flag.entry.framework}'s system prompt: "
        f"{flag.entry.datetime_note}, so that prompt changes {when} and its cached prefix "
        f"stops matching from there on; drop the flag and put the date in the message you run "
        f"the agent with (the latest user message)"
    )


def _message(context: LintContext, segment: CachedSegment, taint: Taint) -> str:
    where = f"{segment.label} (line {context.line_of(segment.node)})"
    daily = ""
    if taint.period == "day" and _callable(taint) not in DAILY_CALLABLES:
        daily = " formatted to the day"
    detail = _subject(taint, daily)
    if taint.via is not None:
        daily = ""  # said in the subject
    if taint.period == "process":
        stale = ", and the date or time in it goes stale" if _is_date(taint) else ""
        if taint.via is not None and taint.via.at_import:
            return (
                f"{taint.via.describe(taint.detail)}, computed once when {taint.via.path} is "
                f"loaded, and reaches {where}: "
                "it changes on every process start (deploy, restart, each worker), so each "
                f"process writes its own cache entry{stale}; use a fixed value, or put it in "
                "the latest user message"
            )
        if context.analysis.at_import(taint.origin):
            return (
                f"{detail} is computed once, when the module is loaded (at import, or when "
                f"a notebook cell runs), and reaches {where}: it changes on every process start "
                f"(deploy, restart, each worker), so each process writes "
                f"its own cache entry{stale}; use a fixed value, or put it in the latest user "
                "message"
            )
        return (
            f"{detail} differs between processes and hosts and reaches {where}: each "
            "worker writes its own cache entry; use a fixed value, or put it in the latest "
            "user message"
        )
    tail = _at_tail(context, segment, taint)
    if taint.period == "day":
        if tail:
            return (
                f"{detail}{daily} changes once a day and ends {where}: the text before it "
                "stays cached, but once a day the messages after it are written to the cache "
                "again; acceptable for most apps, or move it into the latest user message"
            )
        return (
            f"{detail}{daily} changes once a day and reaches {where}: the prefix from "
            "there on is written to the cache again each day (and differs between servers in "
            "other time zones); put it at the end of the cached text if a daily rewrite is "
            "acceptable, or move it into the latest user message"
        )
    if tail:
        return (
            f"{detail} changes on every request and ends {where}: the text before it can "
            "still be cached, but the messages after it never are; move it into the latest "
            "user message"
        )
    return (
        f"{detail} changes on every request and reaches {where}, so the cached prefix "
        "never matches: move it after the cached part (e.g. into the latest user message)"
    )


def _subject(taint: Taint, daily: str) -> str:
    """What the message starts with: the value, or (from another module) where it comes from."""
    if taint.via is None:
        return taint.detail
    return f"{taint.via.describe(taint.detail + daily)}, which"


def _callable(taint: Taint) -> str:
    return taint.detail.strip("`").removesuffix("()")


def _is_date(taint: Taint) -> bool:
    return _callable(taint).split(".")[0] in ("datetime", "time", "pendulum", "arrow")


def _pieces(node: cst.BaseExpression) -> list[cst.BaseExpression] | None:
    """The parts of a text built by `+` or an f-string, in order (None for other shapes)."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add):
        return [*(_pieces(node.left) or [node.left]), node.right]
    if isinstance(node, cst.FormattedString):
        trailing = node.parts[-1] if node.parts else None
        if isinstance(trailing, cst.FormattedStringText) and trailing.value.strip():
            return None
        return [p.expression for p in node.parts if isinstance(p, cst.FormattedStringExpression)]
    return None


def _at_tail(context: LintContext, segment: CachedSegment, taint: Taint) -> bool:
    """Whether `taint` enters only through the last piece of the segment's text."""
    analysis = context.analysis
    values = analysis.resolve(segment.node, Env(segment.function))
    for value, env in values:
        pieces = _pieces(value)
        if pieces is None or len(pieces) < 2:
            return False
        if taint not in analysis.taints(pieces[-1], env) or any(
            taint in analysis.taints(piece, env) for piece in pieces[:-1]
        ):
            return False
    return bool(values)
