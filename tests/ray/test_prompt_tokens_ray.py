"""The Ray router's prompt tokens are those the Ray engine's vLLM (0.29) computes: for the
corpus the local engine's test sends (chat with tools, multi-turn, text parts, template
kwargs, generation prompt on and off, a continued final message, developer messages;
completions as text and as token ids), vLLM 0.29's own request renderer, run in the Ray
engine's interpreter on the same model folder, gives the token ids `PromptTokenizer`
gives. (Its block hashes are that vLLM's: `test_block_hashes.py`.)"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from prefixkit.engine_adapter.engine.smollm2 import ensure_smollm2
from prefixkit.engine_adapter.ray.install import ensure_ray_engine
from prefixkit.engine_adapter.ray.request_router import request_body
from prefixkit.engine_adapter.routing.prompt_tokens import PromptTokenizer, PromptTokens

from tests.routing.test_prompt_tokens_engine import Case, corpus

pytestmark = pytest.mark.ray

RAY_ROUTES = ("/v1/chat/completions", "/v1/completions")  # what Ray Serve's OpenAI app serves

# vLLM 0.29's renderer of OpenAI requests (what its API server runs before the engine)
_VLLM_RENDERER = """
import asyncio, json, sys
from vllm.config import ModelConfig, VllmConfig
from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
from vllm.entrypoints.openai.completion.protocol import CompletionRequest
from vllm.renderers import renderer_from_config
from vllm.renderers.online_renderer import OnlineRenderer

folder = sys.argv[1]
config = ModelConfig(model=folder, tokenizer=folder, max_model_len=4096)
renderer = OnlineRenderer(
    config,
    renderer_from_config(VllmConfig(model_config=config)),
    request_logger=None,
    chat_template=None,
    chat_template_content_format="auto",
)


async def render(path, body):
    if path == "/v1/chat/completions":
        rendered = await renderer.render_chat(ChatCompletionRequest(model=folder, **body))
        inputs = rendered[1] if isinstance(rendered, tuple) else rendered
    else:
        inputs = await renderer.render_completion(CompletionRequest(model=folder, **body))
    if not isinstance(inputs, list):
        return {"refused": str(inputs)}
    return list(inputs[0]["prompt_token_ids"])


async def main():
    requests = json.loads(sys.stdin.read())
    print(json.dumps([await render(path, body) for path, body in requests]))


asyncio.run(main())
"""


def _document(words: int, seed: str) -> str:
    return " ".join(f"{seed}-{i % 97} beside the river" for i in range(words))


CASES = [case for case in corpus(_document) if case.path in RAY_ROUTES]


@pytest.fixture(scope="module")
def model_dir() -> Path:
    return ensure_smollm2(lambda message: None)


@pytest.fixture(scope="module")
def engine_tokens(model_dir: Path) -> list[Any]:
    requests = [[case.path, {**case.body, **case.send}] for case in CASES]
    result = subprocess.run(
        [str(ensure_ray_engine()), "-c", _VLLM_RENDERER, str(model_dir)],
        input=json.dumps(requests),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rendered: list[Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return rendered


class _Request:
    """A request object as Ray Serve's OpenAI ingress hands it to the router: vLLM's
    pydantic model, of which only the fields the client set count."""

    def __init__(self, body: dict[str, Any]) -> None:
        self._body = body

    def model_dump(self, *, exclude_unset: bool) -> dict[str, Any]:
        assert exclude_unset
        return dict(self._body)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_the_ray_routers_prompt_tokens_are_vllm_029s(
    case: Case, model_dir: Path, engine_tokens: list[Any]
) -> None:
    tokenizer = PromptTokenizer.load(model_dir)
    assert isinstance(tokenizer, PromptTokenizer)
    body = {**case.body, **case.send}
    ours = tokenizer.tokens(*request_body(_Request(body)))
    assert isinstance(ours, PromptTokens), ours
    assert ours.token_ids == engine_tokens[CASES.index(case)]
