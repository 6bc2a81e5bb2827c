"""Self-hosted vLLM with tenants: each tenant's repeated prefix hits, tenants never share.

Two tenants send the Northwind support app's prompt (versioned system prompt, shared
documents) twice each. The gateway in front of vLLM authenticates each API key and sets
`cache_salt` to the tenant's HMAC salt, so the second request of a tenant reuses its first
one's KV blocks while the other tenant's identical prompt starts cold.

    python examples/vllm_tenants.py --dry-run
        # no server: a simulated gateway + vLLM that salts by API key and caches whole
        # blocks keyed by prefixkit's vLLM-exact block hash
    prefixkit serve --embedded --tenants tenants.toml        # in another terminal, then:
    python examples/vllm_tenants.py --base-url http://127.0.0.1:8000/v1 \\
        --key acme=KEY_OF_ACME --key globex=KEY_OF_GLOBEX

`--tokenizer` is the served model's folder (default: the embedded SmolLM2 model that
`prefixkit serve --embedded` prepares).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import httpx2
import openai
from prefixkit.sdk import HFTokenizer, VLLMClient, tenant_salt
from prefixkit.sdk.block_hash import block_hashes

sys.path.insert(0, str(Path(__file__).resolve().parent))

from support_app.assistant import first_turn, load_documents, load_system_prompt

DEFAULT_TOKENIZER = Path.home() / ".cache" / "prefixkit" / "models" / "SmolLM2-135M-Instruct"
BLOCK_SIZE = 32
QUESTION = "Which storage class is cheapest for backups we almost never read?"


class SimulatedTenantEngine:
    """A stand-in for gateway + vLLM: salt by API key, cache whole blocks, report usage."""

    def __init__(self, keys: dict[str, str], secret: str, block_size: int) -> None:
        self.tenant_of_key = {key: tenant for tenant, key in keys.items()}
        self.secret = secret
        self.block_size = block_size
        self.cached: set[bytes] = set()

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        key = request.headers.get("authorization", "").removeprefix("Bearer ")
        tenant = self.tenant_of_key.get(key)
        if tenant is None:
            return httpx2.Response(401, json={"error": {"message": "unknown API key"}})
        body = json.loads(request.content)
        ids: list[int] = body["prompt"]
        # The gateway's rule: whatever salt the client sent, the tenant's own salt wins.
        hashes = block_hashes(ids, self.block_size, cache_salt=tenant_salt(tenant, self.secret))
        # vLLM always recomputes the last token, so a prompt's last full block never hits.
        hit_blocks = 0
        for digest in hashes[: (len(ids) - 1) // self.block_size]:
            if digest not in self.cached:
                break
            hit_blocks += 1
        self.cached.update(hashes)
        usage = {
            "prompt_tokens": len(ids),
            "completion_tokens": 1,
            "total_tokens": len(ids) + 1,
            "prompt_tokens_details": {"cached_tokens": hit_blocks * self.block_size},
        }
        return httpx2.Response(
            200,
            json={
                "id": f"cmpl-{len(self.cached)}",
                "object": "text_completion",
                "created": 0,
                "model": body["model"],
                "choices": [{"index": 0, "text": " Archive.", "finish_reason": "stop"}],
                "usage": usage,
            },
        )


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
    parser.add_argument("--dry-run", action="store_true", help="simulated gateway + vLLM")
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
    engine: Any = None
    if args.dry_run:
        engine = SimulatedTenantEngine(keys, secret="dry-run-secret", block_size=args.block_size)
    prompt = first_turn(load_system_prompt(), load_documents(), QUESTION)

    def client_for(key: str) -> VLLMClient:
        http = httpx2.Client(transport=httpx2.MockTransport(engine)) if engine else None
        official = openai.OpenAI(
            base_url=args.base_url, api_key=key, http_client=http, max_retries=0
        )
        return VLLMClient(client=official, tokenizer=tokenizer, block_size=args.block_size)

    print(f"{'tenant':<8}{'request':>8}{'prompt tok':>12}{'cached tok':>12}")
    for tenant in keys:
        client = client_for(keys[tenant])
        for attempt in (1, 2):
            _, stats = client.complete(prompt, model=args.model, max_tokens=1)
            print(f"{tenant:<8}{attempt:>8}{stats.input_tokens:>12}{stats.cached_tokens:>12}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
