"""Print a lint rule's documentation (its section of docs/rules.md).

prefixkit rule PFX001        # what the rule finds, why it breaks caching, an example
prefixkit rule --all         # every rule: code and name
"""

from __future__ import annotations

import argparse

from prefixkit.sdk import UsageError

__all__ = ["configure", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the `prefixkit rule` arguments."""
    parser.add_argument("code", nargs="?", help="a rule code, e.g. PFX001")
    parser.add_argument("--all", action="store_true", help="list every rule's code and name")


def run(args: argparse.Namespace) -> int:
    """Print one rule's documentation, or with --all the code and name of every rule."""
    from prefixkit.linter.docs import rule_section
    from prefixkit.linter.rules import ALL_RULES

    known = ", ".join(rule.code for rule in ALL_RULES)
    if args.all:
        if args.code is not None:
            raise UsageError("give a rule code or --all, not both")
        for rule in ALL_RULES:
            print(f"{rule.code}  {rule.name}")
        return 0
    if args.code is None:
        raise UsageError(f"name a rule (one of {known}) or pass --all")
    chosen = [rule for rule in ALL_RULES if rule.code == args.code.strip().upper()]
    if not chosen:
        raise UsageError(f"unknown rule {args.code!r}: the rules are {known}")
    print(rule_section(chosen[0]), end="")
    return 0
