"""Data tables the rules consult: volatile callables, identity names, cached-segment markers.

Provider facts and naming heuristics live here, not in rule logic, so a wrong
entry is corrected in one place. Users extend the volatile and cached-segment
tables through `[tool.prefixkit.lint]` (see `config`).
"""

from __future__ import annotations

import re

__all__ = [
    "CACHED_KEYWORDS",
    "CACHE_MARKER_KEYS",
    "MAX_CACHE_MARKERS",
    "MESSAGE_CLASSES",
    "SEGMENT_CONSTRUCTORS",
    "SET_METHODS",
    "STABLE_ROOTS",
    "STRING_METHODS",
    "SYSTEM_MESSAGE_CLASSES",
    "TRANSPARENT_FUNCTIONS",
    "UNSORTED_JSON_FUNCTIONS",
    "VOLATILE_CALLABLES",
    "is_identity_name",
    "is_volatile_callable",
    "name_words",
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

# Serialisers whose key order follows insertion order unless sort_keys=True.
UNSORTED_JSON_FUNCTIONS: frozenset[str] = frozenset({"json.dumps", "simplejson.dumps"})

# Plain functions that pass their arguments' content into their result.
TRANSPARENT_FUNCTIONS: frozenset[str] = frozenset(
    {
        "builtins.str",
        "builtins.repr",
        "builtins.format",
        "builtins.dict",
        "builtins.list",
        "builtins.tuple",
        "textwrap.dedent",
        "textwrap.indent",
        "textwrap.fill",
        "string.Template",
    }
)

# Chat message classes (matched on the last dotted part): their content is their arguments.
MESSAGE_CLASSES: frozenset[str] = frozenset(
    {"SystemMessage", "HumanMessage", "AIMessage", "ChatMessage", "ToolMessage"}
)

# Methods that pass their arguments (not only their receiver) into the result.
STRING_METHODS: frozenset[str] = frozenset(
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

# Set methods that return a set when called on a set.
SET_METHODS: frozenset[str] = frozenset(
    {"union", "intersection", "difference", "symmetric_difference", "copy"}
)

# Keyword arguments whose value is part of the cached prefix of a request.
CACHED_KEYWORDS: frozenset[str] = frozenset({"system", "instructions", "tools"})

# Keys that put a cache breakpoint on a content block (Anthropic, OpenAI).
CACHE_MARKER_KEYS: frozenset[str] = frozenset({"cache_control", "prompt_cache_breakpoint"})

# Anthropic and OpenAI both allow at most 4 explicit cache writes per request.
MAX_CACHE_MARKERS = 4

# LangChain-style system message classes (matched on the last dotted part).
SYSTEM_MESSAGE_CLASSES: frozenset[str] = frozenset({"SystemMessage"})

# prefixkit's own constructors of cached segments (matched on the last two parts).
SEGMENT_CONSTRUCTORS: frozenset[str] = frozenset({"Segment.static", "Segment.versioned"})

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
    }
)
_IDENTITY_SUFFIXES = frozenset({"id", "ids", "uuid", "guid", "name", "email", "handle", "phone"})
_IDENTITY_WORDS = frozenset(
    {
        "email",
        "username",
        "fullname",
        "firstname",
        "lastname",
        "displayname",
        "user",
        "customer",
    }
)
_WORD_SPLIT = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")


def name_words(name: str) -> list[str]:
    """Lower-case words of an identifier: `userId` and `user_id` give ['user', 'id']."""
    return [word.lower() for word in _WORD_SPLIT.split(name) if word]


def is_identity_name(parts: list[str]) -> bool:
    """Whether a dotted name (`request.user.email` as parts) names per-request identity.

    True for `user_id`, `customerEmail`, `tenant.name`, `request.id`, `email`,
    `username`; false for `tool_name`, `model_name`, `self.name`, `request.headers`.
    """
    if not parts:
        return False
    last = name_words(parts[-1])
    if not last:
        return False
    if "".join(last) in _IDENTITY_WORDS:
        return True
    if last[-1] not in _IDENTITY_SUFFIXES:
        return False
    earlier = [word for part in parts[:-1] for word in name_words(part)] + last[:-1]
    return any(word in _ENTITIES for word in earlier)


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
