"""`prefixkit warm` on the Ray backend: each replica, pinned through the gateway, caches a
new prompt version's prefix under the tenant's salt, and the tenant's first real request
(render_vllm, the official openai client, through the gateway) finds all of it cached."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path

import openai
import pytest
from prefixkit.cli.main import main
from prefixkit.engine_adapter import RayDeployment
from prefixkit.sdk import HFTokenizer, Prompt, PromptRegistry, Segment, render_vllm, write_lock

from tests.ray.conftest import KEYS

pytestmark = pytest.mark.ray


def test_every_replica_is_warmed_and_the_first_request_finds_the_prefix(
    ray_deployment: RayDeployment,
    tenants_file: Path,
    make_document: Callable[[int, str], str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = tmp_path / "prompts"
    root.mkdir()
    (root / "support@v7.md").write_text(make_document(400, f"ray-warm-{uuid.uuid4()}"))
    write_lock(root)
    where = ["--root", str(root), "--run-dir", str(ray_deployment.run_dir)]
    code = main(
        ["warm", "support@v7", *where, "--tenants", str(tenants_file), "--tenant", "acme", "--json"]
    )

    results = json.loads(capsys.readouterr().out)["results"]
    assert code == 0
    # both warm requests found nothing cached: the pins sent them to two different replicas
    assert [(r["target"], r["cached_before"]) for r in results] == [
        ("replica 0", 0),
        ("replica 1", 0),
    ]
    assert all(r["cached_after"] == r["prefix_tokens"] >= 384 for r in results)

    spec = json.loads((ray_deployment.run_dir / "ray-spec.json").read_text())["app_args"]
    model = spec["llm_config"]["model_loading_config"]
    kwargs = render_vllm(
        Prompt(
            system=[PromptRegistry(root).load("support", "v7")],
            messages=[Segment.dynamic("Which harbour is closest?")],
        ),
        model=model["model_id"],
        tokenizer=HFTokenizer(model["model_source"]),
        block_size=spec["llm_config"]["engine_kwargs"]["block_size"],
        max_tokens=1,
        temperature=0,
    )
    client = openai.OpenAI(base_url=f"{ray_deployment.url}/v1", api_key=KEYS["acme"])
    usage = client.chat.completions.create(**kwargs).usage
    assert usage is not None and usage.prompt_tokens_details is not None
    assert usage.prompt_tokens_details.cached_tokens == results[0]["prefix_tokens"]
