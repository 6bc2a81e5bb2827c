"""`prefixkit warm` on real vLLM: after warming a new prompt version for a tenant, that
tenant's first real request (rendered by render_vllm, sent with the official openai client)
finds the whole static prefix in the cache; a tenant not warmed finds none of it."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import openai
import pytest
from prefixkit.cli.main import main
from prefixkit.sdk import HFTokenizer, Prompt, PromptRegistry, Segment, render_vllm, write_lock

if TYPE_CHECKING:
    from tests.conftest import EmbeddedEngine

pytestmark = pytest.mark.engine

SECRET = "engine-warm-up-secret-0123456789"


def _first_request_cached(
    engine: EmbeddedEngine, registry: PromptRegistry, tenant: str, question: str
) -> int:
    prompt = Prompt(system=[registry.load("support", "v2")], messages=[Segment.dynamic(question)])
    kwargs = render_vllm(
        prompt,
        model=engine.model,
        tokenizer=HFTokenizer(engine.config.model),
        block_size=engine.block_size,
        tenant=tenant,
        salt_secret=SECRET,
        max_tokens=1,
        temperature=0,
    )
    client = openai.OpenAI(base_url=f"{engine.base_url}/v1", api_key="unused")
    usage = client.chat.completions.create(**kwargs).usage
    assert usage is not None and usage.prompt_tokens_details is not None
    return usage.prompt_tokens_details.cached_tokens or 0


def test_a_warmed_tenants_first_request_finds_the_whole_prefix_cached(
    engine: EmbeddedEngine,
    make_document: Callable[[int, str], str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = tmp_path / "prompts"
    root.mkdir()
    (root / "support@v2.md").write_text(make_document(700, f"warm-{uuid.uuid4()}"))
    write_lock(root)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "serve.json").write_text(
        json.dumps({"endpoint": engine.base_url, "router": None, "replicas": [engine.base_url]})
    )
    tenants = tmp_path / "tenants.toml"
    tenants.write_text(f'secret = "{SECRET}"\n[tenants]\nacme = "key-a"\nglobex = "key-g"\n')

    where = ["--root", str(root), "--run-dir", str(run_dir), "--tenants", str(tenants)]
    code = main(["warm", "support@v2", *where, "--tenant", "acme", "--json"])

    (result,) = json.loads(capsys.readouterr().out)["results"]
    assert code == 0
    assert (result["tenant"], result["cached_before"]) == ("acme", 0)
    assert result["cached_after"] == result["prefix_tokens"] >= 640
    registry = PromptRegistry(root)
    acme = _first_request_cached(engine, registry, "acme", "How much is egress to Europe?")
    globex = _first_request_cached(engine, registry, "globex", "How much is egress to Europe?")
    assert (acme, globex) == (result["prefix_tokens"], 0)
