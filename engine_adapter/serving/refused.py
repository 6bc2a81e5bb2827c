"""`Refused`: a request the serving app answers itself with an error, in OpenAI's shape.

Raised (or, by `gateway.admit`, returned) wherever a request is turned away: the gateway
(key, target, route), a body's admission (`bodies`), a bound (`limits`), a routing stage
(a pin to no replica, no replica to tokenize). It is an answer, never raised to a
program, so it is not part of the error tree; it pickles, so a worker process can raise it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starlette.responses import JSONResponse

__all__ = ["error_body"]  # `Refused` is internal to the serving app (module docstring)


def error_body(message: str, code: str, param: str | None = None) -> dict[str, object]:
    """An error in OpenAI's shape, which the official clients raise as `APIError`."""
    return {"error": {"message": message, "type": code, "code": code, "param": param}}


class Refused(Exception):
    """The HTTP status, a message naming what is wrong and how to fix it, OpenAI's error
    code, and the request field at fault (if one)."""

    def __init__(self, status: int, message: str, code: str, param: str | None = None) -> None:
        super().__init__(status, message, code, param)
        self.status = status
        self.message = message
        self.code = code
        self.param = param

    def response(self) -> JSONResponse:
        """The answer; it closes the connection, since the request's body may be unread
        (a client could otherwise hold the connection open by trickling it)."""
        from starlette.responses import JSONResponse

        body = error_body(self.message, self.code, self.param)
        return JSONResponse(body, self.status, headers={"connection": "close"})
