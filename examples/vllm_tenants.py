"""Self-hosted vLLM with tenants: each tenant's repeated prefix hits, tenants never share.

Two tenants send the Northwind support app's prompt (versioned system prompt, shared
documents) twice each. The gateway in front of vLLM authenticates each API key and sets
`cache_salt` to the tenant's HMAC salt, so the second request of a tenant reuses its first
one's KV blocks while the other tenant's identical prompt starts cold.

    python examples/vllm_tenants.py --dry-run
        # no engine: prefixkit's real gateway in front of a fake vLLM replica
        # (prefixkit.testing) that caches whole blocks keyed by vLLM's block hash
    prefixkit serve --embedded --tenants tenants.toml        # in another terminal, then:
    python examples/vllm_tenants.py --base-url http://127.0.0.1:8000/v1 \\
        --key acme=KEY_OF_ACME --key globex=KEY_OF_GLOBEX

`--tokenizer` is the served model's folder (default: the embedded SmolLM2 model that
`prefixkit serve --embedded` prepares).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

import openai
from prefixkit.engine_adapter import Tenants, Topology, deploy
from prefixkit.sdk import HFTokenizer, VLLMClient
from prefixkit.testing.fake_vllm import FakeVLLM, free_port

sys.path.insert(0, str(Path(__file__).resolve().parent))

from support_app.assistant import first_turn, load_documents, load_system_prompt

DEFAULT_TOKENIZER = Path.home() / ".cache" / "prefixkit" / "models" / "SmolLM2-135M-Instruct"
BLOCK_SIZE = 32
QUESTION = "Which storage class is cheapest for backups we almost never read?"


def parse_keys(pairs: list[str]) -> dict[str, str]:
    keys = {}
    for pair in pairs:
        tenant, sep, key = pair.partition("=")
        if not sep or not tenant or not key:
            raise SystemExit(f"--key {pair!r}: expected TENANT=API_KEY")
        keys[tenant] = key
    return keys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="the gateway + a fake vLLM")
    parser.add_argument("--base-url", default="http://127.0.0.1:8000/v1", help="the gateway")
    parser.add_argument("--key", action="append", default=[], metavar="TENANT=API_KEY")
    parser.add_argument("--model", default="smollm2-135m-instruct", help="served model name")
    parser.add_argument("--tokenizer", type=Path, default=DEFAULT_TOKENIZER)
    parser.add_argument("--block-size", type=int, default=BLOCK_SIZE)
    args = parser.parse_args(argv)
    if not args.tokenizer.is_dir():
        raise SystemExit(
            f"no tokenizer folder at {args.tokenizer}: run `prefixkit serve --embedded` once "
            "(it prepares the model) or pass --tokenizer MODEL_DIR"
        )
    tokenizer = HFTokenizer(args.tokenizer)
    keys = parse_keys(args.key) or {"acme": "key-acme", "globex": "key-globex"}
    prompt = first_turn(load_system_prompt(), load_documents(), QUESTION)
    with contextlib.ExitStack() as stack:
        base_url = args.base_url
        if args.dry_run:
            base_url = stack.enter_context(dry_run_gateway(keys, args.model, args.block_size))
        print(f"{'tenant':<8}{'request':>8}{'prompt tok':>12}{'cached tok':>12}")
        for tenant in keys:
            official = openai.OpenAI(base_url=base_url, api_key=keys[tenant], max_retries=0)
            client = VLLMClient(client=official, tokenizer=tokenizer, block_size=args.block_size)
            for attempt in (1, 2):
                _, stats = client.complete(prompt, model=args.model, max_tokens=1)
                print(f"{tenant:<8}{attempt:>8}{stats.input_tokens:>12}{stats.cached_tokens:>12}")
    return 0


@contextlib.contextmanager
def dry_run_gateway(keys: dict[str, str], model: str, block_size: int) -> Iterator[str]:
    """prefixkit's gateway (`deploy` with tenants) in front of a fake vLLM replica; yields
    the gateway's OpenAI base URL."""
    tenants = Tenants({key: tenant for tenant, key in keys.items()}, "dry-run-secret-0123456789")
    with (
        FakeVLLM(model=model, block_size=block_size) as replica,
        deploy([replica.endpoint], Topology(port=free_port()), tenants=tenants) as deployment,
    ):
        yield f"{deployment.url}/v1"


if __name__ == "__main__":
    sys.exit(main())
