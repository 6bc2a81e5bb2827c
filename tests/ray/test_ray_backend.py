"""`prefixkit serve --backend ray` on a local two-node Ray cluster: prefix-cache hits on
one replica, tenant isolation through the gateway, and, when a replica dies, only the
requests it held fail."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from prefixkit.engine_adapter import RayDeployment
from prefixkit.sdk import tenant_salt

from ..engine_calls import cached_tokens
from .conftest import KEYS, SECRET, ray_call, replica_nodes

pytestmark = pytest.mark.ray

MODEL = "smollm2-135m-instruct"
BLOCK = 32


def ask(deployment: RayDeployment, tenant: str, prompt: str, **extra: Any) -> dict[str, Any]:
    response = httpx.post(
        f"{deployment.url}/v1/completions",
        headers={"Authorization": f"Bearer {KEYS[tenant]}"},
        json={"model": MODEL, "prompt": prompt, "max_tokens": 1, "temperature": 0, **extra},
        timeout=300,
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_replicas_run_on_two_ray_nodes(ray_deployment: RayDeployment) -> None:
    nodes = replica_nodes(ray_deployment)
    assert len(nodes) == 2
    assert len(set(nodes.values())) == 2


def test_a_request_without_a_known_key_is_refused(ray_deployment: RayDeployment) -> None:
    response = httpx.post(
        f"{ray_deployment.url}/v1/completions",
        headers={"Authorization": "Bearer not-a-key"},
        json={"model": MODEL, "prompt": "hello", "max_tokens": 1},
        timeout=60,
    )
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "invalid_api_key"


def test_repeats_of_a_prefix_are_served_from_cache(
    ray_deployment: RayDeployment, make_document: Callable[[int, str], str]
) -> None:
    prefix = make_document(600, "ray-repeats")
    first = ask(ray_deployment, "acme", prefix + "\nQuestion 0?")
    prefix_blocks = first["usage"]["prompt_tokens"] // BLOCK - 1
    # a repeat on the other replica would find none of the prefix: every repeat hits
    cached = [
        cached_tokens(ask(ray_deployment, "acme", prefix + f"\nQuestion {i}?")) for i in range(1, 5)
    ]
    assert all(c >= (prefix_blocks - 1) * BLOCK for c in cached), cached


def test_two_tenants_with_the_same_prompt_share_no_cached_block(
    ray_deployment: RayDeployment, make_document: Callable[[int, str], str]
) -> None:
    prompt = make_document(500, "ray-shared-prompt")
    ask(ray_deployment, "acme", prompt)
    assert cached_tokens(ask(ray_deployment, "acme", prompt)) > 0
    assert cached_tokens(ask(ray_deployment, "globex", prompt)) == 0


def test_a_forged_cache_salt_is_replaced(
    ray_deployment: RayDeployment, make_document: Callable[[int, str], str]
) -> None:
    prompt = make_document(500, "ray-forged-salt")
    ask(ray_deployment, "acme", prompt)
    assert cached_tokens(ask(ray_deployment, "acme", prompt)) > 0
    # globex sends acme's real salt: the gateway replaces it with globex's own
    forged = tenant_salt("acme", SECRET)
    assert cached_tokens(ask(ray_deployment, "globex", prompt, cache_salt=forged)) == 0


@dataclass(frozen=True)
class Outcome:
    """One request of a load client: when it was sent and answered (monotonic seconds),
    and its HTTP status (None: no HTTP answer, the connection broke)."""

    client: int
    sent: float
    answered: float
    status: int | None


def test_a_killed_replica_fails_only_the_requests_it_held(
    ray_deployment: RayDeployment, make_document: Callable[[int, str], str]
) -> None:
    """Nothing is sent again to another engine: a request the dying replica had accepted
    fails (5xx); one it never accepted is routed again by Ray Serve and succeeds."""
    clients = 3
    victim = sorted(replica_nodes(ray_deployment))[0]
    outcomes: list[Outcome] = []
    stop = threading.Event()

    def client(number: int) -> None:
        prompt = make_document(300, f"ray-load-{number}")
        turn = 0
        while not stop.is_set():
            turn += 1
            sent = time.monotonic()
            status: int | None
            try:
                status = httpx.post(
                    f"{ray_deployment.url}/v1/completions",
                    headers={"Authorization": f"Bearer {KEYS['acme']}"},
                    json={"model": MODEL, "prompt": f"{prompt}\nTurn {turn}.", "max_tokens": 8},
                    timeout=300,
                ).status_code
            except httpx.HTTPError:
                status = None
            outcomes.append(Outcome(number, sent, time.monotonic(), status))

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    while len(outcomes) < 2 * clients:
        time.sleep(0.1)
    kill_sent = time.monotonic()
    ray_call(
        ray_deployment,
        f"ray.kill(ray.get_actor({victim!r}, namespace='serve'), no_restart=True)\n",
    )
    # keep the load on until Ray has marked the replica dead (it leaves the alive actors),
    # then until it has replaced it
    marked_dead: float | None = None
    after: dict[str, str] = {}
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        after = replica_nodes(ray_deployment)
        if marked_dead is None and victim not in after:
            marked_dead = time.monotonic()
        if victim not in after and len(after) == 2:
            break
        time.sleep(1 if marked_dead is None else 5)
    # and until every client has been answered for a request sent after that (Ray may have
    # replaced the replica by the time the death is seen)
    while marked_dead is not None and time.monotonic() < deadline:
        if {o.client for o in outcomes if o.sent > marked_dead} == set(range(clients)):
            break
        time.sleep(1)
    stop.set()
    for thread in threads:
        thread.join(timeout=300)
    assert marked_dead is not None and victim not in after and len(after) == 2, after

    failed = [o for o in outcomes if o.status != 200]
    # the only failures: requests in flight at the kill, at most one per client, each a 5xx
    assert all(o.sent < marked_dead and o.answered > kill_sent for o in failed), failed
    assert all(o.status is not None and 500 <= o.status < 600 for o in failed), failed
    assert len({o.client for o in failed}) == len(failed) <= clients, failed
    # every request sent after Ray marked the replica dead was answered 200, and every client
    # kept being served
    sent_after = [o for o in outcomes if o.sent > marked_dead]
    assert all(o.status == 200 for o in sent_after), sent_after
    assert {o.client for o in sent_after} == set(range(clients)), sent_after
