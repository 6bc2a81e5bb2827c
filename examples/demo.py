"""`make demo`: the whole prefixkit story on real vLLM (CPU) and a small local model.

1. Install the vLLM CPU engine into its own virtualenv and prepare SmolLM2-135M-Instruct
   (first run only; both are cached under ~/.cache/prefixkit).
2. Start one vLLM replica with prefix caching and the tenant gateway in front of it.
3. Three tenants of the Northwind support app talk to it through the SDK: the system prompt
   comes from `examples/support_app/prompts/` verified against its `prefixkit.lock`, the
   retrieved documents are shared, and each conversation grows turn by turn. Every request
   is printed as it completes (tenant, turn, prompt tokens, cached tokens, TTFT).
4. A summary: hit rate, cold vs warm TTFT, prefill tokens saved, and a proof that no tenant
   was served from another tenant's cache.
5. A roll-out mid-run: one tenant's next request uses the registered prompt's next version
   (`support@v4`, one policy line changed). The static-prefix guard the clients were given
   (`guard=`) names the miss: the segment, the first KV-cache block that changed, the
   tokens lost and the cause. The same roll-out through the official `anthropic` client on
   `prefixkit.testing`'s recording transport with `diagnostics=True` prints the provider's
   own reason.
6. `prefixkit lint` on the app (clean) and on a deliberately broken copy (findings).
7. Every process the demo started is stopped, also on Ctrl-C.

    python examples/demo.py [--turns 3] [--conversations 2] [--port 18400]
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from prefixkit.engine_adapter import (
    Tenants,
    Topology,
    deploy,
    fetch_cache_metrics,
    prepare_embedded,
)
from prefixkit.sdk import (
    AnthropicClient,
    CacheMiss,
    HFTokenizer,
    Prompt,
    StaticPrefixGuard,
    VLLMClient,
    render_vllm,
)
from prefixkit.testing.providers import MockProvider
from rich.console import Console
from rich.table import Table

EXAMPLES = Path(__file__).resolve().parent
sys.path.insert(0, str(EXAMPLES))

from support_app.assistant import first_turn, load_documents, load_system_prompt  # noqa: E402

TENANTS = ("acme", "globex", "initech")
VERSION, ROLLOUT = "v3", "v4"  # support@v4 raises the refund escalation threshold to 800 EUR
ROLLOUT_QUESTIONS = (
    "Last week's outage cost us a day of work. Can we get a refund?",
    "How long does a refund take to arrive?",
)
ANTHROPIC_MODEL = "claude-sonnet-4-5"
QUESTIONS = (
    (
        "How much would 2 TB in the archive class cost us per month?",
        "And if we read back 100 GB of it once a month?",
        "Could a lifecycle rule move it there automatically after 30 days?",
    ),
    (
        "Our nightly function times out after 15 minutes. Can you raise the limit?",
        "How would we split the work then?",
        "What is the largest message we can put on the queue?",
    ),
)
MAX_TOKENS = 24


@dataclass(frozen=True)
class Result:
    """One request as the demo saw it."""

    tenant: str
    conversation: int
    turn: int
    prompt_tokens: int
    cached_tokens: int
    ttft_seconds: float
    own_prefix_bound: int  # cache hits this tenant's own earlier requests can explain


@dataclass(frozen=True)
class Sent:
    """What one earlier request put into the tenant's cache: its prompt and its reply."""

    prompt_ids: list[int]
    output_tokens: int


def own_prefix_bound(prompt_ids: list[int], earlier: list[Sent]) -> int:
    """The most cached tokens this tenant's own earlier requests can explain.

    vLLM caches every full block of an earlier sequence, generated tokens included, so an
    earlier request explains the common prefix of the prompts and, when this prompt
    continues past the whole earlier prompt (a next turn), up to its output tokens more.
    """
    bound = 0
    for request in earlier:
        limit = min(len(prompt_ids), len(request.prompt_ids))
        common = next((i for i in range(limit) if prompt_ids[i] != request.prompt_ids[i]), limit)
        if common == len(request.prompt_ids):
            common += request.output_tokens
        bound = max(bound, common)
    return bound


def step(console: Console, number: int, text: str) -> None:
    console.print(f"\n[bold cyan][{number}/6][/] {text}")


def progress(console: Console) -> Callable[[str], None]:
    """A report function for long steps: elapsed-time ticks ("... (12 s)") overwrite one
    line on a terminal and are thinned to one every 15 s in a log."""
    last_tick = [0.0]

    def report(message: str) -> None:
        if not message.endswith(" s)"):
            console.print(f"    {message}")
        elif console.is_terminal:
            console.print(f"    {message}", end="\r")
        elif time.monotonic() - last_tick[0] >= 15:
            last_tick[0] = time.monotonic()
            console.print(f"    {message}")

    return report


def tenant_clients(
    gateway_url: str, keys: dict[str, str], tokenizer: HFTokenizer, block_size: int
) -> dict[str, VLLMClient]:
    """One SDK client per tenant, each with its own static-prefix guard: the guard compares a
    request with the previous one of the same prompt name, and each tenant has its own cache."""
    return {
        tenant: VLLMClient(
            f"{gateway_url}/v1",
            tokenizer=tokenizer,
            block_size=block_size,
            api_key=keys[tenant],
            guard=StaticPrefixGuard(),
        )
        for tenant in TENANTS
    }


def run_workload(
    console: Console,
    clients: dict[str, VLLMClient],
    model: str,
    tokenizer: HFTokenizer,
    block_size: int,
    turns: int,
    conversations: int,
) -> list[Result]:
    """Send every tenant's conversations turn by turn; print one row per request."""
    system, documents = load_system_prompt(VERSION), load_documents()
    prompts: dict[tuple[str, int], Prompt] = {}
    replies: dict[tuple[str, int], str] = {}
    sent: dict[str, list[Sent]] = {tenant: [] for tenant in TENANTS}
    results: list[Result] = []
    console.print(
        f"{'tenant':<9}{'conv':>5}{'turn':>5}{'prompt tok':>12}{'cached tok':>12}{'TTFT ms':>10}"
    )
    for turn in range(turns):
        for conversation in range(conversations):
            for tenant in TENANTS:
                question = QUESTIONS[conversation % len(QUESTIONS)][turn % 3]
                key = (tenant, conversation)
                prompts[key] = (
                    first_turn(system, documents, question)
                    if turn == 0
                    else prompts[key].next_turn(replies[key], question)
                )
                prompt = prompts[key]
                # The ids the server will see (same template, same alignment as the chat call).
                ids = render_vllm(
                    prompt, model=model, tokenizer=tokenizer, block_size=block_size, token_ids=True
                )["prompt"]
                bound = own_prefix_bound(ids, sent[tenant])
                streamed = clients[tenant].stream_chat(
                    prompt,
                    model=model,
                    max_tokens=MAX_TOKENS,
                    temperature=0.0,
                    tool_choice="none",
                )
                replies[key] = streamed.text
                sent[tenant].append(Sent(ids, streamed.stats.output_tokens))
                result = Result(
                    tenant,
                    conversation + 1,
                    turn + 1,
                    streamed.stats.input_tokens,
                    streamed.stats.cached_tokens,
                    streamed.ttft_seconds or streamed.total_seconds,
                    bound,
                )
                results.append(result)
                console.print(
                    f"{tenant:<9}{result.conversation:>5}{result.turn:>5}"
                    f"{result.prompt_tokens:>12}{result.cached_tokens:>12}"
                    f"{result.ttft_seconds * 1000:>10.0f}"
                )
    return results


def summarise(console: Console, results: list[Result], engine_hit_rate: float) -> bool:
    """Print the summary table; returns whether tenant isolation held."""
    prompt_tokens = sum(r.prompt_tokens for r in results)
    cached_tokens = sum(r.cached_tokens for r in results)
    cold = [r.ttft_seconds for r in results if r.cached_tokens == 0]
    warm = [r.ttft_seconds for r in results if r.cached_tokens > 0]
    leaks = [r for r in results if r.cached_tokens > r.own_prefix_bound]
    firsts = [r for r in results if r.conversation == 1 and r.turn == 1]
    table = Table(title="prefixkit demo: summary", show_header=False)
    table.add_row("requests", str(len(results)))
    table.add_row("prompt tokens / cached tokens", f"{prompt_tokens:,} / {cached_tokens:,}")
    table.add_row("token hit rate (client usage)", f"{cached_tokens / max(prompt_tokens, 1):.1%}")
    table.add_row("prefix-cache hit rate (engine /metrics)", f"{engine_hit_rate:.1%}")
    table.add_row("prefill tokens saved", f"{cached_tokens:,}")
    if cold and warm:
        ratio = statistics.median(cold) / statistics.median(warm)
        table.add_row(
            "TTFT median cold / warm",
            f"{statistics.median(cold) * 1000:.0f} ms / {statistics.median(warm) * 1000:.0f} ms"
            f"  ({ratio:.1f}x faster warm)",
        )
    table.add_row(
        "each tenant's first request (same prefix as the others)",
        ", ".join(f"{r.tenant}: {r.cached_tokens} cached" for r in firsts),
    )
    verdict = (
        "[green]held[/]: every hit is explained by the tenant's own earlier requests"
        if not leaks
        else f"[red]VIOLATED[/] in {len(leaks)} request(s)"
    )
    table.add_row("tenant isolation", verdict)
    console.print(table)
    return not leaks


def describe_miss(console: Console, miss: CacheMiss, block_size: int) -> None:
    """Print what a miss names: the segment, the block, the tokens lost, the cause, the fix."""
    console.print(f"      segment:     {miss.segment}")
    if miss.block is not None:
        start = miss.block * block_size
        console.print(f"      block:       {miss.block} (tokens {start}-{start + block_size - 1})")
    lost = "unknown" if miss.missed_tokens is None else f"{miss.missed_tokens:,}"
    console.print(f"      tokens lost: {lost}")
    console.print(f"      cause:       {miss.reason}")
    for line in textwrap.wrap(miss.detail, width=70):
        console.print(f"      {line}")


def roll_out(
    console: Console, client: VLLMClient, tenant: str, model: str, block_size: int
) -> bool:
    """One tenant's next requests on the prompt's next version: the engine's miss named by
    the guard, then the same roll-out on Anthropic's recording transport with diagnostics.
    Returns whether both named the changed segment."""
    system, documents = load_system_prompt(ROLLOUT), load_documents()
    expected = system.label
    console.print(f"    {tenant}'s next requests use {expected} (one policy line changed)")
    outcome: list[bool] = []
    for number, question in enumerate(ROLLOUT_QUESTIONS, start=1):
        streamed = client.stream_chat(
            first_turn(system, documents, question),
            model=model,
            max_tokens=MAX_TOKENS,
            temperature=0.0,
            tool_choice="none",
        )
        stats, miss = streamed.stats, streamed.stats.miss
        console.print(
            f"    request {number} on {ROLLOUT}: {stats.input_tokens:,} prompt tokens, "
            f"{stats.cached_tokens:,} cached"
        )
        if number == 1:
            if miss is None:
                console.print("    [red]the guard explained no miss[/]")
                return False
            console.print("    local explanation (VLLMClient, guard=StaticPrefixGuard()):")
            describe_miss(console, miss, block_size)
            outcome.append(miss.segment == expected)
        elif miss is not None:
            console.print(f"    [red]unexpected miss[/]: {miss}")
            return False
    console.print(
        f"    as expected after a roll-out: {ROLLOUT}'s first request rewrote the cache from the"
    )
    console.print("    changed block on, and the request after it read what the first one wrote")

    console.print("    the same roll-out on Anthropic (official anthropic client on the")
    console.print("    recording transport of prefixkit.testing, diagnostics=True):")
    mock = MockProvider()
    with mock.anthropic_client() as sdk:
        claude = AnthropicClient(sdk, diagnostics=True, guard=StaticPrefixGuard())
        for version in (VERSION, ROLLOUT):
            prompt = first_turn(load_system_prompt(version), documents, ROLLOUT_QUESTIONS[0])
            _, stats = claude.create(prompt, model=ANTHROPIC_MODEL, max_tokens=MAX_TOKENS)
    miss = stats.miss
    if miss is None or miss.source != "provider":
        console.print(f"    [red]no provider reason[/]: {miss}")
        return False
    missed = "unknown" if miss.missed_tokens is None else f"{miss.missed_tokens:,}"
    console.print(f"    provider reason: {miss.provider_reason} ({missed} tokens missed)")
    console.print(f"      read as {miss.reason}; the guard adds the segment: {miss.segment}")
    outcome.append(miss.segment == expected)
    return all(outcome)


def lint(console: Console, target: Path) -> int:
    relative = target.relative_to(EXAMPLES.parent)
    command = [sys.executable, "-m", "prefixkit.cli.main", "lint", str(relative)]
    console.print(f"$ prefixkit lint {relative}")
    completed = subprocess.run(command, cwd=EXAMPLES.parent, check=False)
    return completed.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=3, choices=(1, 2, 3))
    parser.add_argument("--conversations", type=int, default=2)
    parser.add_argument("--port", type=int, default=18400, help="engine port (gateway: +90)")
    args = parser.parse_args(argv)
    console = Console(highlight=False)
    started = time.monotonic()

    step(console, 1, "engine and model (installed on first use, then cached)")
    report = progress(console)
    # The client side needs tokenizers only: silence transformers' "PyTorch was not found".
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    base = prepare_embedded(report)
    tokenizer = HFTokenizer(base.model)
    keys = {tenant: f"pk-{tenant}-{secrets.token_hex(8)}" for tenant in TENANTS}
    tenants = Tenants({key: tenant for tenant, key in keys.items()}, secrets.token_hex(32))
    topology = Topology(engine_port=args.port, port=args.port + 90)
    step(console, 2, f"starting vLLM on port {args.port} and the tenant gateway")
    with deploy(base, topology, tenants=tenants, kv_events=False, report=report) as deployment:
        (engine_url,) = deployment.replica_urls
        step(console, 3, f"{len(TENANTS)} tenants, shared docs, growing conversations")
        clients = tenant_clients(deployment.url, keys, tokenizer, base.block_size)
        before = fetch_cache_metrics(engine_url)
        results = run_workload(
            console,
            clients,
            base.name,
            tokenizer,
            base.block_size,
            args.turns,
            args.conversations,
        )
        engine_rate = fetch_cache_metrics(engine_url).since(before).hit_rate
        step(console, 4, "summary")
        isolated = summarise(console, results, engine_rate)
        step(console, 5, f"a roll-out mid-run: support@{VERSION} -> support@{ROLLOUT}")
        explained = roll_out(console, clients[TENANTS[0]], TENANTS[0], base.name, base.block_size)
    console.print("    engine and gateway stopped")
    step(console, 6, "the linter on the app and on a deliberately broken copy")
    clean = lint(console, EXAMPLES / "support_app")
    broken = lint(console, EXAMPLES / "broken_app")
    console.print(f"\ndone in {time.monotonic() - started:.0f} s")
    return 0 if isolated and explained and clean == 0 and broken == 1 else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        # The engine and gateway context managers have already stopped their processes.
        print("\ninterrupted: every process the demo started has been stopped", file=sys.stderr)
        sys.exit(130)
