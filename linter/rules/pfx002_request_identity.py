"""PFX002 request-identity-in-cached-segment."""

from __future__ import annotations

from collections.abc import Iterator

from ..context import LintContext
from ..finding import Finding
from ..rule import Invalid, PythonRule, Valid

__all__ = ["RequestIdentityInCachedSegment"]


class RequestIdentityInCachedSegment(PythonRule):
    """A user, customer, tenant, session or request id, name or email reaches a cached segment.

    Identity is recognised by name: parameters, attributes and dict keys such
    as `user_id`, `customer.email`, `request.id`, `session_id`, `username`,
    `ctx["tenant_id"]`, `.get("customer_context")`, keys read from an agent's
    run context (`context_variables.get("name")`), and variables named like
    identity that are computed from the function's parameters
    (`customer_name = await ctx.deps.db.customer_name(...)`). A name
    (`.name`, `.display_name`) is identity on a person (`member.name`,
    `user.display_name`, `tenant.name`), not on a thing (`mcp_client.name`,
    `field.display_name`, `tool.name`). Deployment settings (`os.environ[...]`,
    `settings.*`) are stable and never count.

    ## Why it breaks caching
    A per-user value early in the prompt splits the cache into one entry per
    user: every new user (or session) pays a full cache write, and the shared
    instructions after the value are never reused across users.

    ## Example
    ```python
    def ask(client, user, question):
        system = f"You help {user.name} ({user.email}). Be concise."
        return client.messages.create(system=system, messages=[question])
    ```

    ## Use instead
    ```python
    SYSTEM = "You help the user named in the first message. Be concise."

    def ask(client, user, question):
        intro = {"role": "user", "content": f"I am {user.name}. {question}"}
        return client.messages.create(system=SYSTEM, messages=[intro])
    ```
    """

    code = "PFX002"
    name = "request-identity-in-cached-segment"
    VALID = (
        # identity in the user turn, in headers and in provider routing fields
        Valid(
            "SYSTEM = 'You are a billing assistant.'\n"
            "def ask(client, user_id, question):\n"
            "    return client.chat.completions.create(\n"
            "        model='m',\n"
            "        messages=[{'role': 'system', 'content': SYSTEM},\n"
            "                  {'role': 'user', 'content': f'({user_id}) {question}'}],\n"
            "        prompt_cache_key=f'billing-{user_id}',\n"
            "        extra_headers={'X-Request-Id': user_id},\n"
            "    )\n"
        ),
        # constants and settings that merely have identity-like names
        Valid(
            "import os\n"
            "from myapp.config import settings\n"
            "ASSISTANT_NAME = 'Ada'\n"
            "DEFAULT_USER_NAME = 'there'\n"
            "SYSTEM = f'You are {ASSISTANT_NAME}. Greet users as {DEFAULT_USER_NAME}. Org: {os.environ[\"ORG_ID\"]} {settings.tenant_name}'\n"
            "def ask(client, q):\n"
            "    return client.messages.create(system=SYSTEM, messages=[q])\n"
        ),
        # names of tools and models are not identity
        Valid(
            "def tool_spec(tool_name, model_name):\n"
            "    return {'name': tool_name, 'description': f'Runs on {model_name}'}\n"
            "TOOLS = [tool_spec('search', 'small'), tool_spec('fetch', 'small')]\n"
            "def ask(client, q):\n"
            "    return client.messages.create(tools=TOOLS, messages=[q])\n"
        ),
        # a payload dict with a top-level cache_control and a per-user routing field
        Valid(
            "def params(model, messages, user_profile_id):\n"
            "    return {'model': model, 'messages': messages, 'system': 'Be brief.',\n"
            "            'cache_control': {'type': 'ephemeral'}, 'user_profile_id': user_profile_id}\n"
        ),
        # a class attribute that is a constant
        Valid(
            "class Bot:\n"
            "    user_name = 'friend'\n"
            "    def system(self):\n"
            "        return f'Call everyone {self.user_name}.'\n"
            "    def ask(self, client, q):\n"
            "        return client.messages.create(system=self.system(), messages=[q])\n"
        ),
        # agent frameworks: per-user data in the user turn, run context without identity
        Valid(
            "from swarm import Agent\n"
            "def instructions(context_variables):\n"
            "    language = context_variables.get('language', 'English')\n"
            "    return f'You are a helpful agent. Answer in {language}.'\n"
            "agent = Agent(name='Agent', instructions=instructions)\n"
            "def run(client, context_variables):\n"
            "    name = context_variables['name']\n"
            "    return client.run(agent=agent, messages=[{'role': 'user', 'content': f'I am {name}'}])\n"
        ),
        Valid(
            "from pydantic_ai import Agent, RunContext\n"
            "support = Agent('openai:gpt-4o', instructions='You are a bank support agent.')\n"
            "async def answer(deps, question):\n"
            "    customer_name = await deps.db.customer_name(id=deps.customer_id)\n"
            "    return await support.run(f'{customer_name} asks: {question}', deps=deps)\n"
        ),
        # a conversation id unpacked next to the messages goes to `conversation=`, not the prompt
        Valid(
            "def server_side_state(model_settings):\n"
            "    state = model_settings.get('previous_response_id')\n"
            "    return state, model_settings.get('conversation_id'), []\n"
            "def ask(client, model_settings, instructions):\n"
            "    previous_id, conversation_id, messages = server_side_state(model_settings)\n"
            "    return client.responses.create(instructions=instructions + str(len(messages)),\n"
            "        conversation=conversation_id, previous_response_id=previous_id, input=messages)\n"
        ),
        # a session or user id used as a key selects a stored value; the id is not in it
        Valid(
            "TOOLS = {'basic': {'name': 'search', 'description': 'Search the docs.'}}\n"
            "def ask(client, session, cache, q):\n"
            "    tool = cache[f'{session.id}-documents']\n"
            "    return client.messages.create(tools=[TOOLS['basic'], tool], messages=[q])\n"
        ),
        # the names of things (a configured MCP server, an invoice field) are labels
        Valid(
            "def tools_for(mcp_clients):\n"
            "    return [{'name': f'{mcp_client.name}/search', 'description': 'Search.'}\n"
            "            for mcp_client in mcp_clients]\n"
            "def ask(client, mcp_clients, q):\n"
            "    return client.messages.create(tools=tools_for(mcp_clients), messages=[q])\n"
        ),
        Valid(
            "def ask(client, fields, q):\n"
            "    lines = [f'{f.display_name}: required' for f in fields]\n"
            "    system = 'Check these invoice fields:\\n' + '\\n'.join(lines)\n"
            "    return client.messages.create(system=system, messages=[q])\n"
        ),
        # `description=` of a class that is no framework's agent is not a prompt
        Valid(
            "class Agent:\n"
            "    def __init__(self, description):\n"
            "        self.description = description\n"
            "def job(user_email):\n"
            "    return Agent(description=f'Report for {user_email}')\n"
        ),
        # a parameter that reaches instructions=, its callers passing static text
        Valid(
            "class Operator:\n"
            "    def _call_model(self, system_prompt, user_input):\n"
            "        return self.client.responses.create(model='m', instructions=system_prompt,\n"
            "                                            input=user_input)\n"
            "    def act(self, user_email, q):\n"
            "        return self._call_model('You draft replies.', f'{user_email}: {q}')\n"
        ),
    )
    INVALID = (
        # a key naming the user's own entry: the value is the user's
        Invalid(
            "def ask(client, request, q):\n"
            "    system = f'Answer for {request[\"user_email\"]}.'\n"
            "    return client.messages.create(system=system, messages=[q])\n",
            line=2,
        ),
        # the same shapes on people: a member's name, a user's display name
        Invalid(
            "def ask(client, members, q):\n"
            "    system = 'Club members: ' + ', '.join(member.name for member in members)\n"
            "    return client.messages.create(system=system, messages=[q])\n",
            line=2,
        ),
        Invalid(
            "def ask(client, users, q):\n"
            "    lines = [f'{user.display_name}: reader' for user in users]\n"
            "    return client.messages.create(system='\\n'.join(lines), messages=[q])\n",
            line=2,
        ),
        Invalid(
            "def ask(client, user, question):\n"
            "    system = f'You help {user.name} ({user.email}). Be concise.'\n"
            "    return client.messages.create(system=system, messages=[question])\n",
            line=2,
        ),
        Invalid(
            "def build(tenant_id, question):\n"
            "    return [\n"
            "        {'role': 'developer', 'content': 'Tenant %s policies apply.' % tenant_id},\n"
            "        {'role': 'user', 'content': question},\n"
            "    ]\n",
            line=3,
        ),
        Invalid(
            "def ask(client, request, q):\n"
            "    return client.responses.create(instructions='Session ' + request['session_id'], input=q)\n",
            line=2,
        ),
        # a prompt builder class keeping the customer on self
        Invalid(
            "class PromptBuilder:\n"
            "    def __init__(self, customer_email):\n"
            "        self.customer_email = customer_email\n"
            "    def system(self):\n"
            "        return 'Reply to {}'.format(self.customer_email)\n"
            "    def ask(self, client, q):\n"
            "        return client.messages.create(system=self.system(), messages=[q])\n",
            line=5,
        ),
        Invalid(
            "from prefixkit.sdk import Segment\n"
            "def segments(username):\n"
            "    return [Segment.versioned(f'Assistant for {username}', version='v2')]\n",
            line=3,
        ),
        # pydantic-ai: a variable named like identity, computed from the run context
        Invalid(
            "from pydantic_ai import Agent, RunContext\n"
            "support = Agent('openai:gpt-4o')\n"
            "@support.instructions\n"
            "async def add_customer_name(ctx: RunContext[object]) -> str:\n"
            "    customer_name = await ctx.deps.db.customer_name(id=ctx.deps.customer_id)\n"
            '    return f"The customer\'s name is {customer_name!r}"\n',
            line=6,
        ),
        # swarm / openai-agents: instructions given a function that reads the run context
        Invalid(
            "from swarm import Agent\n"
            "def instructions(context_variables):\n"
            "    name = context_variables.get('name', 'User')\n"
            "    return f'You are a helpful agent. Greet the user by name ({name}).'\n"
            "agent = Agent(name='Agent', instructions=instructions)\n",
            line=3,
        ),
        Invalid(
            "from agents import Agent\n"
            "def triage_instructions(context_variables, agent):\n"
            "    customer_context = context_variables.get('customer_context', None)\n"
            "    return f'Triage the request. The customer context is: {customer_context}'\n"
            "triage = Agent(name='Triage', instructions=triage_instructions)\n",
            line=3,
        ),
        # autogen: system_message=
        Invalid(
            "from autogen_agentchat.agents import AssistantAgent\n"
            "def make(client, user_email):\n"
            "    return AssistantAgent('mail', model_client=client,\n"
            "                          system_message=f'You draft mail for {user_email}.')\n",
            line=4,
        ),
        # agno's additional_context= and crewAI's backstory= are the system prompt
        Invalid(
            "from agno.agent import Agent\n"
            "def assistant(model, customer_email):\n"
            "    return Agent(model=model, instructions='You answer billing questions.',\n"
            "                 additional_context=f'The customer is {customer_email}.')\n",
            line=4,
        ),
        Invalid(
            "from crewai import Agent\n"
            "def concierge(user):\n"
            "    return Agent(role='Concierge', goal='Plan trips',\n"
            "                 backstory=f'You plan trips for {user.name}.')\n",
            line=4,
        ),
        # a parameter that reaches instructions=, fed by the callers of the same module
        Invalid(
            "class Operator:\n"
            "    def _call_model(self, model, system_prompt):\n"
            "        return self.client.responses.create(model=model, instructions=system_prompt,\n"
            "                                            input=[])\n"
            "    def act(self, user_email):\n"
            "        return self._call_model('m', f'You draft replies for {user_email}.')\n",
            line=6,
        ),
    )

    def check(self, context: LintContext) -> Iterator[Finding]:
        """Report each identity value once, where it enters the prompt."""
        for segment, taint in context.segment_taints:
            if taint.kind != "identity":
                continue
            yield context.finding(
                self.code,
                taint.origin,
                f"{taint.detail} differs per user or request and reaches {segment.label} "
                f"(line {context.line_of(segment.node)}): the cache splits into one entry per "
                "user; move it into the user turn (or a session segment) after the cached part",
            )
