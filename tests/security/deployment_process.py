"""A fake replica or a gateway in a process of its own, for tests that measure a server the
test's own interpreter (its GIL) must not slow down.

    python deployment_process.py replica PORT   # a fake vLLM replica on PORT
    python deployment_process.py gateway URL    # the gateway, with the security suite's
                                                # tenants, in front of the replica at URL

Each prints its URL once it serves, and serves until its standard input closes.
"""

from __future__ import annotations

import sys

from prefixkit.engine_adapter import ReplicaEndpoint, Tenants, Topology, deploy
from prefixkit.testing.fake_vllm import FakeVLLM, free_port

SECRET = "hostile-tenant-secret-0123456789"
TENANTS = Tenants({"key-acme": "acme", "key-globex": "globex"}, SECRET, {"key-ops": "ops"})


def main(argv: list[str]) -> None:
    if argv[1:2] == ["replica"] and len(argv) == 3:
        with FakeVLLM(port=int(argv[2])) as replica:
            print(replica.url, flush=True)
            sys.stdin.read()
    elif argv[1:2] == ["gateway"] and len(argv) == 3:
        endpoints = [ReplicaEndpoint(argv[2])]
        with deploy(endpoints, Topology(port=free_port()), tenants=TENANTS) as running:
            print(running.url, flush=True)
            sys.stdin.read()
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
