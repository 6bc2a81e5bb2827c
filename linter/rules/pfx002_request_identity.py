"""PFX002 request-identity-in-cached-segment."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ..analysis.position import sent_once_at_end
from ..analysis.syntax import dotted_parts
from ..catalog import is_shared_owner
from ..context import LintContext
from ..finding import Finding
from ..rule import PythonRule

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
    `settings.*`) are stable and never count. The message says how much fixed
    text follows the value; a value that ends a prompt sent once, with only the
    user turn after it, is not reported (nothing reusable follows it), and
    neither is a tenant's (or organisation's, team's) value given to an object
    its function builds and returns: an agent made per tenant with that
    tenant's prompt serves all its users and caches once per tenant.

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

    def check(self, context: LintContext) -> Iterator[Finding]:
        """Report each identity value once, where it enters the prompt."""
        for segment, taint in context.segment_taints:
            if taint.kind != "identity":
                continue
            origin = taint.origin
            owner = dotted_parts(origin) if isinstance(origin, cst.BaseExpression) else None
            if context.built_for_later(segment) and is_shared_owner(owner or []):
                continue  # an agent built per tenant and handed back: reused as is
            following = context.following(segment, taint)
            if sent_once_at_end(
                following, segment, context.parents(segment.function), context.analysis
            ):
                continue  # it ends a prompt sent once, with only the user turn after it
            after = f"; {following.describe()}" if following and not following.at_end else ""
            yield context.finding(
                self.code,
                taint.origin,
                f"{taint.detail} differs per user or request and reaches {segment.label} "
                f"(line {context.line_of(segment.node)}){after}: the cache splits into one "
                "entry per user; move it into the user turn (or a session segment) after the "
                "cached part",
            )
