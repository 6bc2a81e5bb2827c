"""Data tables the rules consult: volatile callables, identity names, cached-segment markers.

Provider facts and naming heuristics live here, not in rule logic, so a wrong
entry is corrected in one place. Users extend the volatile and cached-segment
tables through `[tool.prefixkit.lint]` (see `config`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "CACHED_KEYWORDS",
    "CACHE_MARKER_KEYS",
    "CONSTRUCTOR_METHODS",
    "DAILY_CALLABLES",
    "INSTRUCTION_PROVIDER_CONTEXTS",
    "MAX_CACHE_MARKERS",
    "MESSAGE_CLASSES",
    "MESSAGE_FACTORY_METHODS",
    "PER_PROCESS_CALLABLES",
    "PROMPT_DECORATORS",
    "PROMPT_ENTRY_POINTS",
    "PROMPT_TEMPLATE_CLASSES",
    "SEGMENT_CONSTRUCTORS",
    "SET_METHODS",
    "STABLE_ROOTS",
    "STRING_METHODS",
    "SYSTEM_MESSAGE_CLASSES",
    "SYSTEM_MESSAGE_METHODS",
    "SYSTEM_PROMPT_ATTRIBUTES",
    "SYSTEM_ROLES",
    "TEMPLATE_CONSTRUCTORS",
    "TOOL_BASE_CLASSES",
    "TOOL_FIELDS",
    "TRANSPARENT_FUNCTIONS",
    "TRIGGER_WORDS",
    "TURN_ROLES",
    "UNSORTED_JSON_FUNCTIONS",
    "VOLATILE_CALLABLES",
    "PromptEntryPoint",
    "is_configuration_name",
    "is_dict_shaped_call",
    "is_identity_name",
    "is_message_class",
    "is_shared_owner",
    "is_system_role",
    "is_turn_role",
    "is_volatile_callable",
    "name_words",
    "prompt_entry_point",
    "segment_call_tails",
    "volatile_period",
]

# Calls whose result differs between two requests (or two processes).
# An entry ending in ".*" matches every callable under that prefix.
VOLATILE_CALLABLES: frozenset[str] = frozenset(
    {
        "datetime.datetime.now",
        "datetime.datetime.utcnow",
        "datetime.datetime.today",
        "datetime.date.today",
        "time.time",
        "time.time_ns",
        "time.monotonic",
        "time.monotonic_ns",
        "time.perf_counter",
        "time.perf_counter_ns",
        "time.process_time",
        "time.localtime",
        "time.gmtime",
        "time.strftime",
        "time.ctime",
        "time.asctime",
        "uuid.uuid1",
        "uuid.uuid4",
        "secrets.*",
        "os.getpid",
        "os.getppid",
        "os.urandom",
        "socket.gethostname",
        "socket.getfqdn",
        "platform.node",
        "random.random",
        "random.randint",
        "random.randrange",
        "random.choice",
        "random.choices",
        "random.sample",
        "random.uniform",
        "random.getrandbits",
        "random.randbytes",
        "numpy.random.*",
        "pendulum.now",
        "pendulum.today",
        "arrow.now",
        "arrow.utcnow",
    }
)

# Volatile calls whose value changes once a day, not per call.
DAILY_CALLABLES: frozenset[str] = frozenset({"datetime.date.today", "pendulum.today"})

# Volatile calls whose value is fixed for a process (or a machine) but differs
# between processes, workers and hosts.
PER_PROCESS_CALLABLES: frozenset[str] = frozenset(
    {"os.getpid", "os.getppid", "socket.gethostname", "socket.getfqdn", "platform.node"}
)

# Serialisers whose key order follows insertion order unless sort_keys=True.
UNSORTED_JSON_FUNCTIONS: frozenset[str] = frozenset({"json.dumps", "simplejson.dumps"})

# Plain functions that pass their arguments' content into their result (`int(time.time())`
# still changes every second).
TRANSPARENT_FUNCTIONS: frozenset[str] = frozenset(
    {
        "builtins.str",
        "builtins.repr",
        "builtins.format",
        "builtins.dict",
        "builtins.list",
        "builtins.tuple",
        "builtins.int",
        "builtins.float",
        "builtins.round",
        "textwrap.dedent",
        "textwrap.indent",
        "textwrap.fill",
        "string.Template",
    }
)

# Chat message and prompt template classes (matched on the last dotted part, LangChain
# and LlamaIndex): their content is their arguments.
MESSAGE_CLASSES: frozenset[str] = frozenset(
    {
        "SystemMessage",
        "HumanMessage",
        "AIMessage",
        "ChatMessage",
        "ToolMessage",
        "SystemMessagePromptTemplate",
        "HumanMessagePromptTemplate",
        "AIMessagePromptTemplate",
        "ChatMessagePromptTemplate",
        "PromptTemplate",
        "ChatPromptTemplate",
        "RichPromptTemplate",
    }
)

# Methods that build a chat message from their arguments: camel's
# `BaseMessage.make_assistant_message(role_name=..., content=...)`, Haystack's
# `ChatMessage.from_system(text)` / `.from_user(...)`, LlamaIndex's `ChatMessage.from_str(...)`.
MESSAGE_FACTORY_METHODS: frozenset[str] = frozenset(
    {
        "make_assistant_message",
        "make_user_message",
        "make_system_message",
        "from_system",
        "from_user",
        "from_assistant",
        "from_str",
    }
)

# Methods that pass their arguments (not only their receiver) into the result:
# string formatting and templating, and the message factories.
STRING_METHODS: frozenset[str] = (
    frozenset(
        {
            "format",
            "format_map",
            "join",
            "replace",
            "substitute",
            "safe_substitute",
            "render",
            "from_template",
            "partial",
        }
    )
    | MESSAGE_FACTORY_METHODS
)

# Set methods that return a set when called on a set.
SET_METHODS: frozenset[str] = frozenset(
    {"union", "intersection", "difference", "symmetric_difference", "copy"}
)

# Keyword arguments whose value is part of the cached prefix of a request, whatever the
# callee: provider clients (`system=`, `instructions=`, `tools=`), pydantic-ai
# `Agent(system_prompt=..., instructions=...)`, openai-agents, swarm and smolagents
# `instructions=`, autogen and camel `system_message=`, MetaGPT's
# `llm.aask(msg, system_msgs=[...])`, Gemini's `system_instruction=` (google-genai
# `GenerateContentConfig`, `GenerativeModel`, Vertex AI) and other agents'
# `system_prompt=`. Generic names
# (`instruction=`, `description=`, `prompt=`) count only on a framework's own classes:
# see `PROMPT_ENTRY_POINTS`.
CACHED_KEYWORDS: frozenset[str] = frozenset(
    {
        "system",
        "instructions",
        "tools",
        "system_prompt",
        "system_message",
        "system_msgs",
        "system_instruction",
    }
)

# Decorators (attribute names: `@agent.system_prompt`, `@agent.instructions`, pydantic-ai)
# whose function's return value is a system prompt.
PROMPT_DECORATORS: frozenset[str] = frozenset({"system_prompt", "instructions"})

# Base classes of tool classes whose definition is sent with every request
# (smolagents `Tool`, LangChain and crewAI `BaseTool`), and the fields that define them.
TOOL_BASE_CLASSES: frozenset[str] = frozenset({"Tool", "BaseTool"})
TOOL_FIELDS: frozenset[str] = frozenset({"description", "inputs"})

# Message roles whose content is cached (the start of the prefix).
SYSTEM_ROLES: frozenset[str] = frozenset({"system", "developer"})

# Message roles of the conversation's turns: what the user sends, what the model answers
# and what a tool or function call returns (OpenAI's "tool" and legacy "function" results,
# LangChain's "human" and "ai"). Their content is request content or output at the
# conversation's tail, never the start of the prefix.
TURN_ROLES: frozenset[str] = frozenset({"user", "assistant", "tool", "function", "human", "ai"})

# Keys that put a cache breakpoint on a content block (Anthropic, OpenAI).
CACHE_MARKER_KEYS: frozenset[str] = frozenset({"cache_control", "prompt_cache_breakpoint"})

# Anthropic and OpenAI both allow at most 4 explicit cache writes per request.
MAX_CACHE_MARKERS = 4

# System message classes (matched on the last dotted part): LangChain's message and
# template, and the OpenAI SDK's typed message params.
SYSTEM_MESSAGE_CLASSES: frozenset[str] = frozenset(
    {
        "SystemMessage",
        "SystemMessagePromptTemplate",
        "ChatCompletionSystemMessageParam",
        "ChatCompletionDeveloperMessageParam",
    }
)

# Prompt templates whose template text is built once and sent as the start of a prompt
# (LangChain, LlamaIndex): `PromptTemplate(template)` and `PromptTemplate.from_template(...)`.
PROMPT_TEMPLATE_CLASSES: frozenset[str] = frozenset({"PromptTemplate", "RichPromptTemplate"})

# Class methods that build a message or template from its text.
TEMPLATE_CONSTRUCTORS: frozenset[str] = frozenset({"from_template"})

# Words without one of which a module cannot build a cached segment (the linter only
# parses such a module, without analysing it): keywords, roles, classes, markers.
TRIGGER_WORDS: tuple[str, ...] = (
    "system",
    "SYSTEM",
    "instructions",
    "tools",
    "cache_control",
    "prompt_cache_breakpoint",
    "Segment",
    "SystemMessage",
    "PromptTemplate",
    "Tool",
    "developer",
    "instruction",
    "from_system",
    # packages of the frameworks in PROMPT_ENTRY_POINTS
    "agno",
    "phi",
    "google.adk",
    "crewai",
    "langgraph",
    "camel",
    "browser_use",
    "autogen",
    "agents",
)

# prefixkit's own constructors of cached segments (matched on the last two parts).
SEGMENT_CONSTRUCTORS: frozenset[str] = frozenset({"Segment.static", "Segment.versioned"})


def segment_call_tails(extra_callables: frozenset[str] = frozenset()) -> frozenset[str]:
    """Last names of the callables that may build a cached segment from their arguments
    (`SystemMessage`, `from_template`, `static`, ...; plus configured ones): their
    qualified names are checked where a call is found."""
    return (
        SYSTEM_MESSAGE_CLASSES
        | PROMPT_TEMPLATE_CLASSES
        | TEMPLATE_CONSTRUCTORS
        | {name.rsplit(".", 1)[-1] for name in SEGMENT_CONSTRUCTORS}
        | {name.rsplit(".", 1)[-1] for name in extra_callables}
    )


# Roots of deployment settings: stable for the life of a process, never per request.
STABLE_ROOTS: frozenset[str] = frozenset(
    {"os.environ", "os.getenv", "settings", "config", "conf", "cfg", "SETTINGS", "CONFIG"}
)

_ENTITIES = frozenset(
    {
        "user",
        "customer",
        "client",
        "tenant",
        "account",
        "org",
        "organization",
        "session",
        "request",
        "conversation",
        "thread",
        "member",
        "patient",
        "caller",
        "visitor",
        "subscriber",
        "context",
    }
)
# Owners whose name is a person's (or a tenant's): `customer.name`, `tenant.name`, and
# a name held in a run context or a user's session (swarm's context_variables["name"],
# Streamlit's st.session_state.company_name).
_PERSONS = frozenset(
    {
        "session",
        "user",
        "customer",
        "tenant",
        "account",
        "org",
        "organization",
        "member",
        "patient",
        "caller",
        "visitor",
        "subscriber",
        "person",
        "people",
        "employee",
        "student",
        "contact",
        "participant",
        "recipient",
        "sender",
        "guest",
        "human",
        "holder",
        "context",
    }
)
# Owners whose name is a label: a configured MCP server or API client, a tool, a field.
_THINGS = frozenset(
    {
        "client",
        "server",
        "tool",
        "tools",
        "field",
        "fields",
        "model",
        "agent",
        "assistant",
        "bot",
        "function",
        "file",
        "node",
        "step",
        "task",
        "column",
        "schema",
        "provider",
        "service",
        "plugin",
        "app",
        "index",
        "collection",
        "project",
        "class",
        "type",
    }
)
# Identifiers that name a person wherever they appear.
_IDENTITY_WORDS = frozenset(
    {
        "email",
        "username",
        "fullname",
        "firstname",
        "lastname",
        "user",
        "customer",
    }
)
# Words that are a person's name on a person, a label on anything else.
_NAME_WORDS = frozenset({"name", "displayname", "handle"})
_IDENTITY_SUFFIXES = frozenset(
    {"id", "ids", "uuid", "guid", "email", "phone", "context", "profile"}
)
# Owners many users share (a tenant's agent serves all of its users): an agent built per
# tenant with that tenant's prompt caches once per tenant, which is what a tenant wants.
_SHARED_OWNERS = frozenset({"tenant", "org", "organization", "workspace", "team", "company"})
# Owners that are one person (or one conversation).
_ONE_PERSON = frozenset(
    {"user", "customer", "member", "patient", "caller", "visitor", "person", "session"}
)
_WORD_SPLIT = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")


def name_words(name: str) -> list[str]:
    """Lower-case words of an identifier: `userId` and `user_id` give ['user', 'id']."""
    return [word.lower() for word in _WORD_SPLIT.split(name) if word]


def is_configuration_name(name: str) -> bool:
    """Whether a parameter's name says it holds configuration, not a request's data:
    settings (`config`, `data_config`, `settings`, `options`) or the prompt's own text
    given from outside (`system_prompt`, `instructions`, `prompt_template`)."""
    words = set(name_words(name))
    return bool(words & _CONFIGURATION_WORDS) or name in _PROMPT_PARAMETERS


def is_shared_owner(parts: list[str]) -> bool:
    """Whether a dotted name (`tenant.name`, `org_id`) names an owner many users share,
    and no one person (`tenant.user.email` names a person)."""
    words = {word for part in parts for word in name_words(part)}
    return bool(words & _SHARED_OWNERS) and not words & _ONE_PERSON


def is_identity_name(parts: list[str]) -> bool:
    """Whether a dotted name (`request.user.email` as parts) names per-request identity.

    True for `user_id`, `customerEmail`, `tenant.name`, `user.display_name`,
    `request.id`, `email`, `username`; false for `tool_name`, `model_name`,
    `self.name`, `request.headers`, and for a constant's name (`Role.USER`,
    `DEFAULT_USER_ID`). A name (`name`, `display_name`, `handle`) is
    identity only when its nearest owner is a person (`customer_name`,
    `request.user.name`), not a thing (`mcp_client.name`, `field.display_name`).
    """
    if not parts or parts[-1].isupper():
        return False  # a constant (`Role.USER`, `DEFAULT_USER`): the same for every request
    last = name_words(parts[-1])
    if not last:
        return False
    if "".join(last) in _IDENTITY_WORDS:
        return True
    earlier = [word for part in parts[:-1] for word in name_words(part)]
    if "".join(last[-2:]) in _NAME_WORDS:
        earlier += last[:-2]
    elif last[-1] in _NAME_WORDS:
        earlier += last[:-1]
    else:
        return last[-1] in _IDENTITY_SUFFIXES and any(
            word in _ENTITIES for word in earlier + last[:-1]
        )
    # the nearest owner decides: `user.name` is a person's, `user.mcp_client.name` a label
    for word in reversed(earlier):
        if word in _PERSONS:
            return True
        if word in _THINGS:
            return False
    return False


def volatile_period(qualified_name: str) -> str:
    """When a volatile callable's value changes: "request", "day" or "process"."""
    if qualified_name in DAILY_CALLABLES:
        return "day"
    if qualified_name in PER_PROCESS_CALLABLES:
        return "process"
    return "request"


def _tails(names: frozenset[str]) -> set[str]:
    return {name.rsplit(".", 1)[-1] for name in names}


def is_message_class(names: frozenset[str]) -> bool:
    """Whether a callee (its qualified names and spelling) builds a message from its arguments.

    The known classes, any class named `*Message` (camel's `BaseMessage`, MetaGPT's
    `UserMessage`, autogen's `TextMessage`) and the SDKs' typed `*Param`s.
    """
    return any(
        tail in MESSAGE_CLASSES or tail.endswith(("Message", "Param")) for tail in _tails(names)
    )


def is_dict_shaped_call(names: frozenset[str]) -> bool:
    """Whether a call builds a dict from its keywords: `dict(...)` or an SDK's typed param."""
    return "builtins.dict" in names or any(tail.endswith("Param") for tail in _tails(names))


def is_system_role(role: str | None) -> bool:
    """Whether a role (`"system"`, `MessageRole.SYSTEM`'s last part) starts the prefix."""
    return role is not None and role.lower() in SYSTEM_ROLES


def is_turn_role(role: str | None) -> bool:
    """Whether a role (`"user"`, `"TOOL"`, `Role.FUNCTION`'s last part) is a conversation turn."""
    return role is not None and role.lower() in TURN_ROLES


def is_volatile_callable(qualified_name: str, extra: frozenset[str] = frozenset()) -> bool:
    """Whether a call to `qualified_name` returns a different value on each request."""
    for table in (VOLATILE_CALLABLES, extra):
        if qualified_name in table:
            return True
        parts = qualified_name.split(".")
        for end in range(1, len(parts)):
            if ".".join(parts[:end]) + ".*" in table:
                return True
    return False


@dataclass(frozen=True)
class PromptEntryPoint:
    """A framework's agent class (or factory) whose arguments make up its system prompt.

    It matches a callee whose qualified name lies under one of `packages` and ends
    in one of `names` (`agno.agent.Agent`): an unrelated `Agent(description=...)`
    never does. `keywords` are the arguments the framework puts into the system
    prompt, `positional` the index of a positional argument that is the system
    prompt, and `datetime_flags` the boolean arguments that make the framework
    write the current date and time into it (`datetime_note` says where).
    `part` names what the keywords become. `after_datetime` lists, per callee, the
    parameters that make the framework write reusable content after the time (the
    flag breaks caching only then), `own_prompt` the parameters that replace the
    framework's system prompt and `builds_prompt` the ones that turn it off when false
    (the flag does nothing then).
    """

    framework: str
    packages: tuple[str, ...]
    names: frozenset[str]
    keywords: frozenset[str]
    positional: int | None = None
    datetime_flags: frozenset[str] = frozenset()
    datetime_note: str = ""
    part: str = "its system prompt"
    after_datetime: tuple[tuple[str, str, str], ...] = ()
    own_prompt: frozenset[str] = frozenset()
    builds_prompt: frozenset[str] = frozenset()

    def after_time(self, callee: str) -> dict[str, str]:
        """What the framework writes after the time for `callee` (`Agent`, `Team`):
        parameter -> the content it turns on."""
        return {param: what for tail, param, what in self.after_datetime if tail == callee}

    def matches(self, qualified_name: str) -> bool:
        """Whether `qualified_name` is one of this entry point's callables."""
        package, _, tail = qualified_name.rpartition(".")
        return tail in self.names and any(
            package == root or package.startswith(f"{root}.") for root in self.packages
        )


_AGNO_DATETIME = (
    "agno writes `The current time is {datetime.now()}` (to the microsecond, unless "
    "`datetime_format` is set) into the system message's <additional_information>, after the "
    "description, role and instructions"
)


def _agno_after_datetime() -> tuple[tuple[str, str, str], ...]:
    """What agno (1.x to 3.x, `get_system_message` of `agent/_messages.py` and
    `team/_messages.py`) writes after the time, and the parameters that turn it on. A
    team writes its members, knowledge, memories and session summary before the time."""
    both = (
        ("add_location_to_context", "the location"),
        ("add_location_to_instructions", "the location"),
        ("add_name_to_context", "the name"),
        ("add_name_to_instructions", "the name"),
        ("tools", "the tool instructions"),
        ("expected_output", "the expected output"),
        ("additional_context", "the additional context"),
        ("success_criteria", "the success criteria"),
        ("skills", "the skills"),
        ("add_session_state_to_context", "the session state"),
        ("use_json_mode", "the JSON output format"),
        ("additional_input", "the additional input messages"),
        ("add_history_to_context", "the conversation history"),
        ("add_history_to_messages", "the conversation history"),
        ("num_history_runs", "the conversation history"),
        ("num_history_responses", "the conversation history"),
    )
    agent_only = (
        ("add_memories_to_context", "the user's memories"),
        ("enable_user_memories", "the user's memories"),
        ("enable_agentic_memory", "the user's memories"),
        ("add_session_summary_to_context", "the session summary"),
        ("enable_session_summaries", "the session summary"),
        ("add_learnings_to_context", "the learnings"),
        ("learning", "the learnings"),
        ("knowledge", "the knowledge base's instructions"),
    )
    team_only = (("enable_team_history", "the conversation history"),)
    return (
        *(("Agent", param, what) for param, what in both + agent_only),
        *(("Team", param, what) for param, what in both + team_only),
    )


# Framework agent classes and factories whose arguments form the system prompt (a
# function given there, such as Google ADK's InstructionProvider or agno's callable
# instructions, contributes its return value).
PROMPT_ENTRY_POINTS: tuple[PromptEntryPoint, ...] = (
    PromptEntryPoint(
        "Google ADK",
        ("google.adk",),
        frozenset({"Agent", "LlmAgent"}),
        frozenset({"instruction", "global_instruction", "static_instruction"}),
    ),
    PromptEntryPoint(
        "agno",
        ("agno", "phi"),
        frozenset({"Agent", "Team"}),
        frozenset({"description", "role", "instructions", "expected_output", "additional_context"}),
        datetime_flags=frozenset({"add_datetime_to_context", "add_datetime_to_instructions"}),
        datetime_note=_AGNO_DATETIME,
        after_datetime=_agno_after_datetime(),
        own_prompt=frozenset({"system_message"}),
        builds_prompt=frozenset({"build_context", "create_default_system_message"}),
    ),
    PromptEntryPoint(
        "crewAI",
        ("crewai",),
        frozenset({"Agent"}),
        frozenset({"role", "goal", "backstory", "system_template"}),
    ),
    PromptEntryPoint(
        "LangGraph",
        ("langgraph",),
        frozenset({"create_react_agent"}),
        frozenset({"prompt", "state_modifier", "messages_modifier"}),
    ),
    PromptEntryPoint(
        "camel", ("camel",), frozenset({"ChatAgent"}), frozenset({"system_message"}), positional=0
    ),
    # AutoGen 0.2 / AG2: `AssistantAgent(name, system_message)`
    PromptEntryPoint(
        "AutoGen",
        ("autogen",),
        frozenset({"ConversableAgent", "AssistantAgent"}),
        frozenset({"system_message"}),
        positional=1,
    ),
    # the handoff tool the parent agent is given carries this description
    PromptEntryPoint(
        "openai-agents",
        ("agents",),
        frozenset({"Agent"}),
        frozenset({"handoff_description"}),
        part="the handoff tool of every agent that hands off to it",
    ),
    PromptEntryPoint(
        "browser-use",
        ("browser_use",),
        frozenset({"Agent"}),
        frozenset({"override_system_message", "extend_system_message"}),
    ),
)

# Attributes and class fields that hold a system prompt, whatever the object:
# `self.llm.system_prompt = ...` (MetaGPT), `agent.system_message = ...`, and a class
# body's `system_prompt: str = ...` (pydantic models of agents and roles).
# Methods that build an object: what they compute is fixed for the object's life.
CONSTRUCTOR_METHODS: frozenset[str] = frozenset({"__init__", "__post_init__"})
SYSTEM_PROMPT_ATTRIBUTES: frozenset[str] = frozenset(
    {"system_prompt", "system_message", "system_instruction"}
)
_CONFIGURATION_WORDS = frozenset({"config", "configuration", "settings", "cfg", "conf", "options"})
_PROMPT_PARAMETERS = SYSTEM_PROMPT_ATTRIBUTES | {"instructions", "template", "prompt_template"}

# Methods whose first argument (or `content=` / `text=`) is the text of a system message:
# Haystack's `ChatMessage.from_system(text)`, Semantic Kernel's
# `ChatHistory.add_system_message(content)`, AutoGen 0.2's
# `agent.update_system_message(system_message)`.
SYSTEM_MESSAGE_METHODS: frozenset[str] = frozenset(
    {"from_system", "add_system_message", "update_system_message"}
)

# Context types whose functions returning `str` are instruction providers, called on
# every request for the system instruction: (framework, packages, class name).
INSTRUCTION_PROVIDER_CONTEXTS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("Google ADK", ("google.adk",), "ReadonlyContext"),
)


def prompt_entry_point(names: frozenset[str]) -> PromptEntryPoint | None:
    """The framework entry point a callee (its qualified names) is, if any."""
    for entry in PROMPT_ENTRY_POINTS:
        if any(entry.matches(name) for name in names):
            return entry
    return None
