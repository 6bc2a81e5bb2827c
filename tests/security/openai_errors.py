"""What every refusal of the gateway must look like: OpenAI's error shape, which the official
clients parse (``{"error": {"message", "type", "code", "param"}}``)."""

from __future__ import annotations

import json
from typing import Any


def openai_error(body: bytes | str) -> dict[str, Any]:
    """The ``error`` object of an answer, checked to be in OpenAI's shape with a message."""
    error = json.loads(body)["error"]
    assert set(error) == {"message", "type", "code", "param"}, error
    assert isinstance(error["message"], str) and error["message"], error
    assert isinstance(error["code"], str) and error["code"] == error["type"], error
    return dict(error)
