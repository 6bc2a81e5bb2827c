"""A prompt roll-out, warmed against not: TTFT of the first real request after a version change.

    .venv/bin/python bench/warm_rollout.py            # starts the embedded engine on 18060
    .venv/bin/python bench/warm_rollout.py --runs 5 --prefix-words 1500

Workload: a support app on the embedded vLLM CPU engine behind the tenant gateway (as
`prefixkit serve --embedded` deploys it). Each run rolls out two new versions of its system
prompt (about 2,000 tokens each, never seen by the engine): one is warmed with
`prefixkit.engine_adapter.serving.warmup.warm` for tenant acme on the replica directly (what
`prefixkit warm` does), the other is not. Then acme's first real request of each version
(rendered by `render_vllm`, streamed through the gateway with acme's API key, which salts
it) is timed. The order of the two alternates between runs.

Printed: per run, the warm-up's own time and, for each version, the first request's TTFT and
its cached tokens; then the medians, ranges and the ratio.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from contextlib import ExitStack
from typing import Any

import httpx
from chats import filler_text
from prefixkit.engine_adapter import (
    Tenants,
    Topology,
    deploy,
    prepare_embedded,
    registered_prompt,
    replica_targets,
    warm,
    warm_prefix,
)
from prefixkit.sdk import HFTokenizer, Prompt, Segment, render_vllm
from prefixkit.testing.ttft import StreamReading
from progress import report

SECRET = "bench-warm-rollout-secret-0123456789"
TENANTS = Tenants({"key-acme": "acme", "key-globex": "globex"}, SECRET)


def first_request(gateway: str, kwargs: dict[str, Any]) -> tuple[float, int, int]:
    """Stream one chat request through the gateway as acme: (TTFT s, cached, prompt tokens)."""
    body = {**kwargs, "stream": True, "stream_options": {"include_usage": True}}
    reading = StreamReading()
    with httpx.stream(
        "POST",
        f"{gateway}/v1/chat/completions",
        json=body,
        headers={"Authorization": "Bearer key-acme"},
        timeout=600,
    ) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            reading.feed(line)
    answer = reading.answer()
    return answer.ttft_s, answer.cached_tokens, answer.prompt_tokens


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine-port", type=int, default=18060)
    parser.add_argument("--gateway-port", type=int, default=18061)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--prefix-words", type=int, default=1500)
    args = parser.parse_args()

    rows: list[dict[str, Any]] = []
    with ExitStack() as stack:
        base = prepare_embedded(report)
        print("starting the embedded engine and the gateway ...", file=sys.stderr)
        deployment = stack.enter_context(
            deploy(
                base,
                Topology(engine_port=args.engine_port, port=args.gateway_port),
                tenants=TENANTS,
                kv_events=False,
                report=report,
            )
        )
        tokenizer = HFTokenizer(base.model)
        targets = replica_targets(deployment.replica_urls)
        # one request first, so neither arm pays the engine's first-request costs
        first_request(
            deployment.url,
            {"model": base.name, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1},
        )
        for run in range(args.runs):
            order = ("warmed", "not warmed") if run % 2 == 0 else ("not warmed", "warmed")
            for arm in order:
                version = f"v{run}-{uuid.uuid4().hex[:8]}"
                system = Segment.static(
                    f"You are ShopDesk's support assistant, prompt {version}. "
                    + filler_text(version, args.prefix_words),
                    name="support",
                    version=version,
                )
                warm_s = None
                if arm == "warmed":
                    prefix = warm_prefix(
                        f"support@{version}", registered_prompt(system), tokenizer, base.block_size
                    )
                    started = time.perf_counter()
                    result = warm(
                        [prefix], targets, model=base.name, tenants=TENANTS, tenant_ids=["acme"]
                    )
                    warm_s = time.perf_counter() - started
                    assert result.all_warmed, result
                question = Segment.dynamic(
                    f"[{version}] How much is egress from eu-west to us-east?"
                )
                kwargs = render_vllm(
                    Prompt(system=[system], messages=[question]),
                    model=base.name,
                    tokenizer=tokenizer,
                    block_size=base.block_size,
                    max_tokens=8,
                    temperature=0,
                )
                ttft, cached, prompt_tokens = first_request(deployment.url, kwargs)
                rows.append(
                    {
                        "run": run + 1,
                        "arm": arm,
                        "ttft": ttft,
                        "cached": cached,
                        "prompt_tokens": prompt_tokens,
                        "warm_s": warm_s,
                    }
                )
                print(
                    f"run {run + 1} {arm:>10}: first request TTFT {ttft * 1000:7.0f} ms, "
                    f"cached {cached:,} of {prompt_tokens:,} prompt tokens"
                    + (f"; warm-up took {warm_s * 1000:.0f} ms" if warm_s is not None else ""),
                    flush=True,
                )

    def column(arm: str, key: str) -> list[float]:
        return [row[key] for row in rows if row["arm"] == arm]

    warmed, cold = column("warmed", "ttft"), column("not warmed", "ttft")
    warm_cost = column("warmed", "warm_s")
    print(f"\n{args.runs} runs, 1 replica (embedded vLLM CPU, block size {base.block_size})")
    for label, values in (
        ("first request TTFT, not warmed", cold),
        ("first request TTFT, warmed", warmed),
        ("warm-up time (warm request + probe)", warm_cost),
    ):
        print(
            f"{label:<38} median {statistics.median(values) * 1000:7.0f} ms "
            f"(range {min(values) * 1000:.0f}-{max(values) * 1000:.0f} ms)"
        )
    ratios = sorted(c / w for c, w in zip(cold, warmed, strict=True))
    print(
        f"not warmed / warmed TTFT, per run: {', '.join(f'{r:.1f}x' for r in ratios)} "
        f"(median {statistics.median(ratios):.1f}x)"
    )
    cached = column("warmed", "cached")
    prompt = column("warmed", "prompt_tokens")
    print(
        f"cached tokens of the first request: warmed {min(cached):,.0f}-{max(cached):,.0f} of "
        f"{min(prompt):,.0f}-{max(prompt):,.0f}; not warmed {max(column('not warmed', 'cached')):,.0f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
