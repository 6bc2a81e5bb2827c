"""The oracle of the security tests: what a real engine serves, from the committed snapshots
of its ``/openapi.json`` (tests/data/engine_routes), never from the gateway's own table.

A route "could run as generation" when it is a POST whose request schema has a
``cache_salt`` field (every generation request type of vLLM has one), or a POST whose body
the schema does not describe (``/invocations``, ``/collective_rpc``...: the engine reads it
as it likes, so it counts as generation). An engine matches a request on its
percent-decoded path, as Starlette routes it.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SNAPSHOTS = Path(__file__).parent.parent / "data" / "engine_routes"
VLLM_0_32 = "vllm-0.32-openapi.json"
RAY_VLLM_0_29 = "ray-serve-llm-vllm-0.29-openapi.json"


@dataclass(frozen=True)
class EngineRoute:
    method: str
    template: str
    pattern: re.Pattern[str]
    generation: bool


@functools.cache
def engine_routes(snapshot: str) -> tuple[EngineRoute, ...]:
    return routes_of(json.loads((SNAPSHOTS / snapshot).read_text()))


def routes_of(spec: dict[str, Any]) -> tuple[EngineRoute, ...]:
    """The routes of an engine's ``/openapi.json``."""
    schemas = spec["components"]["schemas"]
    routes = []
    for template, operations in spec["paths"].items():
        pattern = re.compile("".join(_part(p) for p in re.split(r"(\{[^}]+\})", template)))
        for method, operation in operations.items():
            generation = method == "post" and _may_generate(operation, schemas)
            routes.append(EngineRoute(method.upper(), template, pattern, generation))
    return tuple(routes)


def could_generate(snapshot: str, method: str, path: str) -> bool:
    """Whether the engine of `snapshot` would run `method` `path` (decoded) as generation."""
    return any(
        route.generation and route.method == method and route.pattern.fullmatch(path)
        for route in engine_routes(snapshot)
    )


def generation_routes(snapshot: str) -> list[str]:
    return sorted({r.template for r in engine_routes(snapshot) if r.generation})


def generation_templates_of(spec: dict[str, Any]) -> list[str]:
    """The path templates of the routes an engine's ``/openapi.json`` could run as
    generation."""
    return sorted({r.template for r in routes_of(spec) if r.generation})


def _part(piece: str) -> str:
    return "[^/]+" if piece.startswith("{") else re.escape(piece)


def _may_generate(operation: dict[str, Any], schemas: dict[str, Any]) -> bool:
    body = operation.get("requestBody")
    if body is None:
        return True
    names = []
    for content in body["content"].values():
        names += _refs(content["schema"])
    if not names:
        return True
    return any("cache_salt" in schemas[name].get("properties", {}) for name in names)


def _refs(schema: dict[str, Any]) -> list[str]:
    if "$ref" in schema:
        return [schema["$ref"].rsplit("/", 1)[1]]
    found = []
    for key in ("anyOf", "oneOf", "allOf"):
        for item in schema.get(key, []):
            found += _refs(item)
    return found
