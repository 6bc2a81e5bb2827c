"""One prefixkit deployment on a local Ray cluster of two nodes, shared by the Ray tests.

Two Ray nodes on this machine (the head and a second node), each offering one
``replica_slot``; two vLLM CPU replicas of the embedded SmolLM2, one per node; the tenant
gateway as the Serve ingress; prefixkit's precise policy as the request router. The Ray
engine is installed on first use (about 4 minutes), the deployment takes 1-3 minutes to
start.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from prefixkit.engine_adapter import (
    RayDeployment,
    RaySettings,
    Tenants,
    prepare_embedded,
    serve_on_ray,
)

RAY_HTTP_PORT = 18300
SECRET = "ray-tests-secret-0123456789abcdef"
KEYS = {"acme": "key-acme-ray", "globex": "key-globex-ray"}
OPERATOR_KEY = "key-ops-ray"


def _report(message: str) -> None:
    if " s)" not in message:  # step lines only, not the elapsed-time updates
        print(f"[ray] {message}", file=sys.stderr, flush=True)


# Killing a replica leaves a replacement starting for a minute or two; the tests that
# need every replica serving (warm-up pins each one) run before it.
LAST = "test_a_killed_replica_fails_only_the_requests_it_held"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.name == LAST)


@pytest.fixture(scope="session")
def tenants_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ray-tenants") / "tenants.toml"
    lines = [f'secret = "{SECRET}"', "[tenants]", *(f'{t} = "{k}"' for t, k in KEYS.items())]
    lines += ["[operators]", f'ops = "{OPERATOR_KEY}"']
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="session")
def tenants(tenants_file: Path) -> Tenants:
    return Tenants.load(tenants_file, environ={})


@pytest.fixture(scope="session")
def ray_deployment(
    tmp_path_factory: pytest.TempPathFactory, tenants_file: Path
) -> Iterator[RayDeployment]:
    base = prepare_embedded(_report, max_model_len=2048)
    settings = RaySettings(
        router="prefixkit",
        replicas=2,
        tenants_file=str(tenants_file),
        http_port=RAY_HTTP_PORT,
    )
    run_dir = tmp_path_factory.mktemp("ray-run")
    with serve_on_ray(base, settings, run_dir, nodes=2, report=_report) as deployment:
        yield deployment


def ray_call(deployment: RayDeployment, script: str) -> str:
    """Run `script` in the Ray engine's interpreter, connected to the cluster as `ray`;
    returns its standard output."""
    program = (
        "import ray, json\n"
        f"ray.init(address={deployment.address!r}, logging_level='ERROR')\n" + script
    )
    result = subprocess.run(
        [str(deployment.ray_python), "-c", program],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def replica_nodes(deployment: RayDeployment) -> dict[str, str]:
    """Alive vLLM replica actor name -> the Ray node id it runs on."""
    import json

    out = ray_call(
        deployment,
        "from ray._private import state\n"
        "print(json.dumps({a['Name']: a['Address']['NodeID'] for a in state.actors().values()"
        " if a['State'] == 'ALIVE' and a['Name'].startswith('SERVE_REPLICA::')"
        " and 'Server' in a['Name']}))\n",
    )
    nodes: dict[str, str] = json.loads(out.strip().splitlines()[-1])
    return nodes
