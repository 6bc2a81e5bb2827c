"""Several router workers behind one port (`Topology(router_workers=N)`): every worker
answers on the port, they place requests as well as one worker does, a tenant's bound and
the replicas' load hold across them, a worker that dies is restarted while the others keep
serving (and a client retries the request it held), and one that cannot start fails the
deployment with its log."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from openai import OpenAI
from prefixkit.engine_adapter import (
    Deployment,
    DeploymentConfigError,
    Limits,
    RouterStartError,
    Tenants,
    Topology,
    deploy,
)
from prefixkit.engine_adapter.routing.router_state import RouterSettings, RouterState
from prefixkit.engine_adapter.serving.placements import PlacementLog
from prefixkit.engine_adapter.serving.workers import (
    WORKER_HEADER,
    RouterWorkers,
    WorkerTable,
    peers,
)
from prefixkit.testing.fake_vllm import FakeVLLM, free_port

TENANT_IDS = ("a", "b", "c", "d")
TENANTS = Tenants(
    {f"key-{t}": t for t in TENANT_IDS},
    "router-workers-test-secret-0123456789",
    {"key-ops": "ops"},
)


def _key(tenant: str) -> dict[str, str]:
    return {"authorization": f"Bearer key-{tenant}"}


@contextlib.contextmanager
def _deployed(
    workers: int,
    *,
    capacity_blocks: int = 2000,
    limits: Limits | None = None,
    report: list[str] | None = None,
) -> Iterator[tuple[Deployment, list[FakeVLLM]]]:
    """Two fresh fake replicas (KV events on) behind `workers` precise router workers."""
    fakes = [FakeVLLM(kv_events=True, capacity_blocks=capacity_blocks) for _ in range(2)]
    with contextlib.ExitStack() as stack:
        for fake in fakes:
            stack.enter_context(fake)
        topology = Topology(replicas=2, router="precise", port=free_port(), router_workers=workers)
        running = stack.enter_context(
            deploy(
                [fake.endpoint for fake in fakes],
                topology,
                tenants=TENANTS,
                limits=limits,
                report=(report.append if report is not None else lambda message: None),
            )
        )
        yield running, fakes


def _ask(url: str, tenant: str = "a", prompt: str = "hello") -> httpx.Response:
    """One completion on a connection of its own (so the kernel may give it any worker)."""
    return httpx.post(
        url + "/v1/completions",
        json={"model": "fake-model", "prompt": prompt, "max_tokens": 4},
        headers=_key(tenant),
        timeout=30,
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"replicas": 2, "router": "precise", "router_workers": 0}, "--router-workers 0: give"),
        ({"replicas": 2, "router": "smg", "router_workers": 2}, "--router precise"),
        ({"replicas": 1, "router": "precise", "router_workers": 2}, "--replicas 2 or more"),
    ],
)
def test_router_workers_that_do_not_fit_are_refused_naming_the_option(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(DeploymentConfigError, match=message) as caught:
        Topology(**options)
    assert "router_workers" in caught.value.parts


def test_two_workers_answer_on_one_port() -> None:
    with _deployed(2) as (running, _):
        assert running.workers is not None and running.state is None
        answers = [_ask(running.url, prompt=f"question {n}") for n in range(24)]
    assert [a.status_code for a in answers] == [200] * 24
    assert {a.headers[WORKER_HEADER] for a in answers} == {"0", "1"}


def _conversations(
    url: str, lanes: int, conversations: int, turns: int
) -> list[tuple[int, int, str | None]]:
    """Conversations of the four tenants (each its own system prompt), `lanes` at a time,
    turn after turn, each request on a new connection; (prompt tokens, cached tokens,
    worker) per answer."""

    def lane(first: int) -> list[tuple[int, int, str | None]]:
        usages = []
        histories = {
            c: [
                {
                    "role": "system",
                    "content": f"You answer for tenant {TENANT_IDS[c % 4]}. "
                    + f"Rule {TENANT_IDS[c % 4]}: be brief. " * 90,
                }
            ]
            for c in range(first, conversations, lanes)
        }
        for turn in range(turns):
            for c, messages in histories.items():
                tenant = TENANT_IDS[c % 4]
                messages.append(
                    {"role": "user", "content": f"conversation {c}, turn {turn}: " + "more? " * 30}
                )
                answer = httpx.post(
                    url + "/v1/chat/completions",
                    json={"model": "fake-model", "messages": messages, "max_tokens": 8},
                    headers=_key(tenant),
                    timeout=30,
                )
                assert answer.status_code == 200, answer.text
                body = answer.json()
                messages.append(
                    {"role": "assistant", "content": body["choices"][0]["message"]["content"]}
                )
                usage = body["usage"]
                cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
                usages.append((usage["prompt_tokens"], cached, answer.headers.get(WORKER_HEADER)))
        return usages

    with ThreadPoolExecutor(lanes) as pool:
        return [usage for usages in pool.map(lane, range(lanes)) for usage in usages]


def _following_events(url: str, workers: set[str | None]) -> None:
    """Return once each of `workers` holds a block a request just stored: each follows
    the replicas' KV events (the fake replicas have no replay socket, so a worker misses
    what they publish before its subscriptions are up)."""
    assert _ask(url, "d", "a first request to see KV events arrive " * 8).status_code == 200
    following: set[str | None] = set()
    deadline = time.monotonic() + 20
    while following != workers:
        assert time.monotonic() < deadline, f"only {following} follow the KV events"
        state = httpx.get(url + "/router/state", headers=_key("ops"), timeout=5)
        if sum(state.json()["held_blocks"]):
            following.add(state.headers.get(WORKER_HEADER))
        time.sleep(0.02)


@pytest.mark.slow
def test_two_workers_keep_one_workers_hit_rate_on_the_same_requests() -> None:
    """200 requests: 20 conversations of four tenants, ten turns each, four conversations
    at a time, to two replicas without room for all of them; through one worker, then
    through two. Slow without an engine: 400 requests through the gateway and router to
    fake replicas served by this test's process take 30-60 s on a 2-core machine."""
    rates = {}
    for workers in (1, 2):
        with _deployed(workers, capacity_blocks=300) as (running, _):
            _following_events(running.url, {"0", "1"} if workers == 2 else {None})
            usages = _conversations(running.url, lanes=4, conversations=20, turns=10)
        assert len(usages) == 200
        if workers == 2:
            assert {worker for _, _, worker in usages} == {"0", "1"}
        rates[workers] = sum(c for _, c, _ in usages) / sum(p for p, _, _ in usages)
    assert rates[1] > 0.5
    assert abs(rates[2] - rates[1]) <= 0.02 * rates[1], rates


def test_a_tenants_bound_on_requests_in_flight_holds_across_workers() -> None:
    with _deployed(2, limits=Limits(max_inflight_per_tenant=2)) as (running, fakes):
        for fake in fakes:
            fake.delay_headers_s = 3.0  # the two admitted outlast the burst

        async def burst() -> list[httpx.Response]:
            async with httpx.AsyncClient(timeout=30) as client:
                return await asyncio.gather(
                    *(
                        client.post(
                            running.url + "/v1/completions",
                            json={"model": "fake-model", "prompt": f"p{n}", "max_tokens": 2},
                            headers=_key("a"),
                        )
                        for n in range(16)
                    )
                )

        answers = asyncio.run(burst())
    assert {a.headers[WORKER_HEADER] for a in answers} == {"0", "1"}
    assert sorted(a.status_code for a in answers) == [200] * 2 + [429] * 14


def test_a_request_in_flight_on_one_worker_counts_in_anothers_decision(tmp_path: Path) -> None:
    table = WorkerTable.create(tmp_path / "load", workers=2, replicas=2, tenants=[])
    log = PlacementLog.create(tmp_path / "placements", workers=2)
    settings = RouterSettings(["http://127.0.0.1:1", "http://127.0.0.1:2"], [None, None])
    first, second = RouterState(settings), RouterState(settings)
    first.peers, second.peers = peers(table, log, 0), peers(table, log, 1)
    placed = first.route([11, 12, 13])
    assert second.load(placed.replica) == (1, 3.0)
    first.finished(placed)
    assert second.load(placed.replica) == (0, 0.0)
    table.close()
    log.close()


def test_a_dead_workers_load_is_cleared(tmp_path: Path) -> None:
    table = WorkerTable.create(tmp_path / "load", workers=2, replicas=2, tenants=["a"])
    log = PlacementLog.create(tmp_path / "placements", workers=2)
    settings = RouterSettings(["http://127.0.0.1:1", "http://127.0.0.1:2"], [None, None])
    state = RouterState(settings)
    state.peers = peers(table, log, 0)
    placed = state.route([11, 12])
    table.clear(0)
    assert peers(table, log, 1).inflight(placed.replica) == 0
    log.close()
    table.close()


def _until(condition: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_killed_worker_is_restarted_while_the_port_keeps_answering() -> None:
    reports: list[str] = []
    with _deployed(2, report=reports) as (running, _):
        workers: RouterWorkers | None = running.workers
        assert workers is not None
        killed = workers.pids[0]
        assert killed is not None
        os.kill(killed, signal.SIGKILL)
        _until(lambda: any("exited" in r for r in reports))
        during = [_ask(running.url, prompt=f"while down {n}") for n in range(10)]
        _until(lambda: workers.restarts[0] == 1 and "serving again" in " ".join(reports))
        after = [_ask(running.url, prompt=f"after {n}") for n in range(24)]
        assert workers.pids[0] not in (None, killed)
    assert [a.status_code for a in during + after] == [200] * 34
    assert any(f"router worker 0 (pid {killed}) exited with code -9" in r for r in reports)
    assert {a.headers[WORKER_HEADER] for a in after} == {"0", "1"}


def test_a_worker_that_cannot_start_fails_the_deployment_with_its_log(tmp_path: Path) -> None:
    (tmp_path / "decisions-1.jsonl").mkdir()  # worker 1 cannot open its decision log
    topology = Topology(
        replicas=2, router="precise", port=free_port(), router_workers=2, decision_log=True
    )
    with FakeVLLM(kv_events=True) as first, FakeVLLM(kv_events=True) as second:
        with (
            pytest.raises(RouterStartError, match="router worker 1 exited with code") as caught,
            deploy([first.endpoint, second.endpoint], topology, run_dir=tmp_path),
        ):
            pass
        assert "IsADirectoryError" in caught.value.log_tail
        assert "Application startup failed" in caught.value.log_tail
        with pytest.raises(httpx.ConnectError):  # worker 0 was stopped too
            httpx.get(f"http://127.0.0.1:{topology.port}/health")


def test_a_request_on_a_worker_that_dies_is_retried_by_the_openai_client_and_answered(
    tmp_path: Path,
) -> None:
    fakes = [FakeVLLM(kv_events=True) for _ in range(2)]
    topology = Topology(replicas=2, router="precise", port=free_port(), router_workers=2)
    with contextlib.ExitStack() as stack:
        for fake in fakes:
            stack.enter_context(fake)
            fake.delay_headers_s = 2.0
        running = stack.enter_context(
            deploy([f.endpoint for f in fakes], topology, tenants=TENANTS, run_dir=tmp_path)
        )
        assert running.workers is not None
        pids = running.workers.pids
        table = WorkerTable(tmp_path / "router-workers.load", 2, 2, TENANT_IDS)
        stack.callback(table.close)
        client = OpenAI(base_url=running.url + "/v1", api_key="key-a", max_retries=2)
        stack.callback(client.close)
        with ThreadPoolExecutor(1) as pool:
            answer = pool.submit(
                client.completions.create, model="fake-model", prompt="hello", max_tokens=2
            )
            _until(lambda: sum(table.inflight) == 1)
            busy = next(w for w in range(2) if table.inflight[2 * w] + table.inflight[2 * w + 1])
            killed = pids[busy]
            assert killed is not None
            os.kill(killed, signal.SIGKILL)
            completion = answer.result(timeout=30)
    assert completion.choices[0].text
    assert sum(len(fake.generations) for fake in fakes) == 2  # the first try, and the retry


def test_every_worker_keeps_the_request_head_deadline() -> None:
    with _deployed(2, limits=Limits(header_timeout_s=0.5)) as (running, _):
        port = int(running.url.rsplit(":", 1)[1])
        with contextlib.ExitStack() as stack:  # a dozen connections: both workers get some
            connections = [
                stack.enter_context(socket.create_connection(("127.0.0.1", port), timeout=5))
                for _ in range(12)
            ]
            for connection in connections:
                connection.sendall(b"GET /health HTTP/1.1\r\nhost: x\r\n")  # never finished
            answers = [connection.recv(200) for connection in connections]
    assert all(answer.startswith(b"HTTP/1.1 408 ") for answer in answers), answers
