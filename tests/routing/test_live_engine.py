"""Against two real vLLM CPU replicas: block hashes are bit-exact with the engine's KV
events, and precise routing beats round-robin on a multi-tenant workload (engine metrics)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import openai
import pytest
import zmq
from prefixkit.engine_adapter import Tenants, Topology, deploy
from prefixkit.engine_adapter.engine.metrics import (
    CacheMetrics,
    fetch_cache_metrics,
    fleet_interval,
)
from prefixkit.engine_adapter.routing.kv_events import Stored, decode_batch
from prefixkit.engine_adapter.routing.router_state import parse_server_timing
from prefixkit.sdk import event_block_hashes, tenant_salt

from tests.routing.conftest import routed

if TYPE_CHECKING:
    from tests.conftest import IdleGap
    from tests.routing.conftest import LiveReplicas

pytestmark = pytest.mark.engine

ROUTER_PORT = 18150


def _stored_hashes(socket: zmq.Socket[bytes], seconds: float) -> list[int]:
    hashes: list[int] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if socket.poll(200):
            _topic, _seq, payload = socket.recv_multipart()
            for event in decode_batch(payload):
                if isinstance(event, Stored):
                    hashes.extend(event.hashes)
    return hashes


@pytest.mark.parametrize("salt", [None, "tenant-a-salt"])
def test_block_hashes_equal_the_engines_kv_events(
    live_replicas: LiveReplicas, salt: str | None
) -> None:
    context = zmq.Context()
    socket = context.socket(zmq.SUB)
    socket.setsockopt(zmq.SUBSCRIBE, b"")
    socket.connect(live_replicas.kv_endpoints[0])
    try:
        time.sleep(0.5)  # let the subscription reach the publisher
        # token ids unique to this test case, so every block is new to the engine
        tokens = [
            100 + (i * 7 + (0 if salt is None else 3)) % 3000
            for i in range(5 * live_replicas.block_size + 5)
        ]
        body = {"model": live_replicas.model_name, "prompt": tokens, "max_tokens": 1}
        if salt is not None:
            body["cache_salt"] = salt
        response = httpx.post(f"{live_replicas.urls[0]}/v1/completions", json=body, timeout=60)
        response.raise_for_status()
        published = _stored_hashes(socket, 2.0)
    finally:
        socket.close(linger=0)
        context.term()
    ours = event_block_hashes(
        tokens, live_replicas.block_size, algo="sha256_cbor", cache_salt=salt, seed="vllm-none-hash"
    )
    assert len(ours) == 5
    assert published == ours


def _tenant_messages(tenant: int, turn: int) -> list[dict[str, str]]:
    # ~10 blocks of tenant-specific system prompt, then a short question
    system = f"You are assistant number {tenant} for company {tenant * 37}. " + " ".join(
        f"Policy {tenant}-{k}: answer politely about product line {tenant}{k}." for k in range(25)
    )
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": f"Question {turn}: what is product {turn}?"},
    ]


def _workload(policy: str) -> list[tuple[int, list[dict[str, str]], str]]:
    # 4 tenants, each request repeated twice back to back: round-robin puts every
    # tenant on both replicas (twice the footprint); distinct salts per policy run
    requests = []
    for turn in range(4):
        for tenant in range(4):
            salt = tenant_salt(f"{policy}:{tenant}", "routing-test-secret")
            for repeat in range(2):
                requests.append((tenant, _tenant_messages(tenant, turn * 2 + repeat), salt))
    return requests


def _hit_rate(replicas: LiveReplicas, before: list[CacheMetrics]) -> float:
    after = [fetch_cache_metrics(url) for url in replicas.urls]
    return fleet_interval(before, after).hit_rate


def _round_robin_run(replicas: LiveReplicas) -> float:
    before = [fetch_cache_metrics(url) for url in replicas.urls]
    with httpx.Client(timeout=120) as client:
        for number, (_tenant, messages, salt) in enumerate(_workload("round_robin")):
            url = replicas.urls[number % len(replicas.urls)]
            body = {
                "model": replicas.model_name,
                "messages": messages,
                "max_tokens": 1,
                "cache_salt": salt,
            }
            client.post(f"{url}/v1/chat/completions", json=body).raise_for_status()
    return _hit_rate(replicas, before)


def _precise_run(replicas: LiveReplicas, tmp_path: Path) -> tuple[float, list[int]]:
    with routed(replicas, tmp_path, ROUTER_PORT) as url:
        before = [fetch_cache_metrics(u) for u in replicas.urls]
        with httpx.Client(base_url=url, timeout=120) as client:
            for _tenant, messages, salt in _workload("precise"):
                body = {
                    "model": replicas.model_name,
                    "messages": messages,
                    "max_tokens": 1,
                    "cache_salt": salt,
                }
                client.post("/v1/chat/completions", json=body).raise_for_status()
                time.sleep(0.3)  # let the engine's KV events reach the index
            counts = client.get("/router/state").json()["routed"]
        return _hit_rate(replicas, before), counts


def test_precise_routing_beats_round_robin_on_engine_metrics(
    live_replicas: LiveReplicas, tmp_path: Path
) -> None:
    round_robin = _round_robin_run(live_replicas)
    precise, routed = _precise_run(live_replicas, tmp_path)
    print(f"engine hit rate: round_robin {round_robin:.3f}, precise {precise:.3f}, routed {routed}")
    assert precise > round_robin
    assert min(routed) > 0  # both replicas used: affinity did not pile everything on one


def test_precise_router_reports_its_time_before_forwarding(
    live_replicas: LiveReplicas, tmp_path: Path
) -> None:
    with routed(live_replicas, tmp_path, ROUTER_PORT) as url:
        body = {
            "model": live_replicas.model_name,
            "messages": _tenant_messages(9, 0),
            "max_tokens": 1,
        }
        started = time.perf_counter()
        response = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=120)
        elapsed_ms = (time.perf_counter() - started) * 1e3
    response.raise_for_status()
    timings = parse_server_timing(response.headers["server-timing"])
    assert set(timings) == {"tokenize", "route"}
    assert timings["tokenize"] > 0 and timings["route"] > 0
    assert timings["tokenize"] + timings["route"] < elapsed_ms


def test_the_precise_router_keeps_an_idle_client_connection_past_five_seconds(
    live_replicas: LiveReplicas, tmp_path: Path, statuses_across_idle_gap: IdleGap
) -> None:
    with routed(live_replicas, tmp_path, ROUTER_PORT) as url:
        assert statuses_across_idle_gap(url, "/health", 6.0) == (200, 200)


def test_the_precise_router_logs_each_decision_it_forwards(
    live_replicas: LiveReplicas, tmp_path: Path
) -> None:
    chosen = []
    with routed(live_replicas, tmp_path, ROUTER_PORT, decision_log=True) as url:
        for tenant in (10, 11):
            body = {
                "model": live_replicas.model_name,
                "messages": _tenant_messages(tenant, 0),
                "max_tokens": 1,
            }
            response = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=120)
            response.raise_for_status()
            chosen.append(int(response.headers["x-prefixkit-replica"]))
    records = [json.loads(line) for line in (tmp_path / "decisions.jsonl").read_text().splitlines()]
    assert [record["replica"] for record in records] == chosen
    assert all(len(record["candidates"]) == len(live_replicas.urls) for record in records)


def test_smg_is_launched_with_its_tree_sized_to_the_replicas_kv(
    live_replicas: LiveReplicas, tmp_path: Path
) -> None:
    reports: list[str] = []
    with routed(
        live_replicas,
        tmp_path,
        ROUTER_PORT,
        reports.append,
        router="smg",
        router_port=ROUTER_PORT + 1,
        smg_chars_per_token=5.5,
    ) as url:
        body = {
            "model": live_replicas.model_name,
            "messages": _tenant_messages(12, 0),
            "max_tokens": 1,
        }
        httpx.post(f"{url}/v1/chat/completions", json=body, timeout=120).raise_for_status()
    tokens = max(
        (m.num_blocks or 0) * (m.block_size or 0)
        for m in (fetch_cache_metrics(u) for u in live_replicas.urls)
    )
    assert tokens > 0
    assert f"(max tree size {round(tokens * 5.5):,} characters)" in " ".join(reports)


@pytest.mark.parametrize("router", ["precise", "smg"])
def test_responses_stream_through_the_gateway_and_stay_within_their_tenant(
    live_replicas: LiveReplicas, tmp_path: Path, router: str
) -> None:
    secret = "responses-test-secret-0123456789"
    tenants = Tenants({"key-acme": "acme", "key-globex": "globex"}, secret)
    topology = Topology(replicas=2, router=router, port=ROUTER_PORT, router_port=ROUTER_PORT + 1)  # type: ignore[arg-type]
    instructions = _tenant_messages(20 + len(router), 0)[0]["content"]

    def ask(client: openai.OpenAI) -> tuple[list[str], int]:
        stream = client.responses.create(
            model=live_replicas.model_name,
            instructions=instructions,
            input="Which product line is first?",
            max_output_tokens=4,
            stream=True,
        )
        kinds: list[str] = [event.type for event in stream]
        return kinds, kinds.count("response.output_text.delta")

    with deploy(live_replicas.endpoints, topology, tenants=tenants, run_dir=tmp_path) as running:
        acme = openai.OpenAI(base_url=f"{running.url}/v1", api_key="key-acme", max_retries=0)
        globex = openai.OpenAI(base_url=f"{running.url}/v1", api_key="key-globex", max_retries=0)
        kinds, deltas = ask(acme)
        assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
        assert deltas >= 1
        usage = [
            acme.responses.create(
                model=live_replicas.model_name,
                instructions=instructions,
                input="Which product line is first?",
                max_output_tokens=1,
            ).usage
            for _ in range(2)
        ]
        other = globex.responses.create(
            model=live_replicas.model_name,
            instructions=instructions,
            input="Which product line is first?",
            max_output_tokens=1,
        ).usage
    assert usage[1] is not None and usage[1].input_tokens_details.cached_tokens > 0
    assert other is not None and other.input_tokens_details.cached_tokens == 0
