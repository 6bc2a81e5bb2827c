"""How vLLM 0.32's API server (FastAPI) routes, reads and refuses requests, for the fake
replica: a route takes exactly its methods (no HEAD beside GET), a path no route takes answers
404 and a method its route does not take 405 (``{"detail": ...}``), a JSON body is read only
as ``application/json``, and an error is vLLM's ``{"error": {...}}`` (Anthropic's shape on
the Messages routes).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .anthropic_answers import anthropic_error

__all__ = [
    "Endpoint",
    "checked_salt",
    "detail",
    "fixed",
    "json_body",
    "json_object",
    "not_routed",
    "route",
]

Endpoint = Callable[[Request], Awaitable[Response]]

_SALT_FORBIDDEN = frozenset("@/\\\x00")  # vLLM 0.32's check of cache_salt
_SALT_MAX = 128


class Refused(Exception):
    """A request vLLM answers with an error: its status, message, type and parameter (an
    answer of the fake replica, never raised to a program: not part of the error tree)."""

    def __init__(
        self, status: int, message: str, kind: str = "BadRequestError", param: str | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.kind, self.param = status, message, kind, param

    def answer(self, anthropic: bool = False) -> JSONResponse:
        if anthropic:
            return JSONResponse(anthropic_error(self.kind, self.message), self.status)
        error = {"message": self.message, "type": self.kind, "param": self.param}
        return JSONResponse({"error": {**error, "code": self.status}}, self.status)


def detail(status: int, message: str) -> Refused:
    """An ``HTTPException`` a vLLM handler raises, which vLLM answers in its error shape with
    the status's phrase as the type."""
    return Refused(status, message, {400: "Bad Request"}[status])


def not_routed(request: Request, error: Exception) -> Response:
    """FastAPI's answer for a path no route takes (404) or a method its route does not (405)."""
    assert isinstance(error, HTTPException)
    return JSONResponse({"detail": error.detail}, error.status_code, headers=error.headers)


async def json_body(request: Request) -> Any:
    """The JSON body of a route that takes one, as vLLM reads it."""
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/json":
        raise detail(400, "Unsupported Media Type: Only 'application/json' is allowed")
    try:
        return await request.json()
    except ValueError as error:
        raise detail(400, f"JSON decode error: {error}") from error


async def json_object(request: Request) -> dict[str, Any]:
    body = await json_body(request)
    if not isinstance(body, dict):
        raise detail(400, "Request body must be a JSON object")
    return body


def fixed(content: dict[str, Any] | None) -> Endpoint:
    """An endpoint answering `content` (200; an empty body for None) whatever it is sent."""

    async def answer(request: Request) -> Response:
        return Response(status_code=200) if content is None else JSONResponse(content)

    return answer


def route(path: str, endpoint: Endpoint, *methods: str) -> Route:
    """A route taking exactly `methods`, as FastAPI's (Starlette's adds HEAD to GET)."""
    routed = Route(path, endpoint, methods=list(methods))
    routed.methods = set(methods)
    return routed


def checked_salt(body: dict[str, Any], model: str, *, model_required: bool = False) -> str | None:
    """The ``cache_salt`` of a generation request to a replica serving `model`, once its model
    and salt pass vLLM's checks."""
    asked = body.get("model")
    if asked is None and model_required:
        raise Refused(400, "Field required: model", param="model")
    if asked is not None and asked != model:
        raise Refused(
            404, f"The model `{asked}` does not exist. Valid aliases: {model}.", "NotFoundError"
        )
    salt = body.get("cache_salt")
    if salt is not None and (not isinstance(salt, str) or not salt):
        raise Refused(
            400,
            "Parameter 'cache_salt' must be a non-empty string if provided.",
            param="cache_salt",
        )
    if salt is not None and (len(salt) > _SALT_MAX or _SALT_FORBIDDEN & set(salt)):
        raise Refused(
            400,
            "Parameter 'cache_salt' must be at most 128 characters and must not contain "
            "'@', '/', '\\\\', or NUL.",
            param="cache_salt",
        )
    return salt
