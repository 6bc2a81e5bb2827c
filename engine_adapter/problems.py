"""A configuration's problems, each with the settings it concerns, their value and a message
that says what to change: what `EngineConfig` and `RaySettings` turn pydantic's validation
errors into, so that their errors carry the offending setting (`EngineConfigError.field`,
`DeploymentConfigError.parts`).

A model validator that checks settings together raises `Problems`; pydantic keeps it in its
error, and `validation_problems` returns those problems next to the fields' own.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import ValidationError

# `Problems` never leaves a model's validation (it becomes `EngineConfigError` or
# `DeploymentConfigError`), so it is not among the public errors
__all__ = ["Problem", "validation_problems"]


@dataclass(frozen=True)
class Problem:
    """One problem: the settings concerned (the first is the one to change), the first
    one's value, and the message."""

    settings: tuple[str, ...]
    value: object
    message: str


class Problems(ValueError):
    """Settings that do not fit together, raised by a model validator."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("; ".join(problem.message for problem in problems))
        self.problems = problems


def validation_problems(error: ValidationError) -> list[Problem]:
    """Every problem pydantic found, in its order: a field's own (``field: message``) or
    those a model validator raised as `Problems`."""
    problems: list[Problem] = []
    for item in error.errors():
        cause = item.get("ctx", {}).get("error")
        if isinstance(cause, Problems):
            problems += cause.problems
            continue
        where = ".".join(str(part) for part in item["loc"])
        message = item["msg"].removeprefix("Value error, ")
        problems.append(
            Problem((where,), item.get("input"), f"{where}: {message}" if where else message)
        )
    return problems
