"""KV tiers below the GPU's: `--kv-tier` texts -> EngineConfig.kv_tiers -> vLLM 0.32's
`--kv-transfer-config` (no engine needed; tests/engine/test_vllm_flags.py parses the same argv
with vLLM's own parser and resolves its connectors in vLLM's registries)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prefixkit.engine_adapter import EngineConfigError
from prefixkit.engine_adapter.engine.config import EngineConfig
from prefixkit.engine_adapter.engine.kv_tiers import (
    KVTier,
    kubernetes_quantity,
    parse_kv_tier,
    parse_kv_tiers,
)

MODEL = Path("/models/m")
GIB = 1 << 30

# The connectors whose keys carry the request's cache_salt, read from their code (vLLM 0.32,
# LMCache 0.5.6): OffloadingConnector keys a block by vLLM's block hash (offloading/scheduler.py
# make_offload_key(request.block_hashes[...])), whose first block hashes ("cache_salt", salt)
# (kv_cache_utils.generate_block_hash_extra_keys); LMCacheMPConnector sends request.cache_salt
# and LMCache keeps it in IPCCacheServerKey and ObjectKey (lmcache/v1/distributed/api.py
# ipc_key_to_object_keys). LMCacheConnectorV1 is not among them: its CacheEngineKey is the
# tokens' chunk hash, model, rank and dtype (lmcache/v1/token_database.py, lmcache/utils.py).
SALTED_CONNECTORS = {"OffloadingConnector", "LMCacheMPConnector"}


def gpu(*tiers: str, **fields: Any) -> EngineConfig:
    return EngineConfig(model=MODEL, device="gpu", block_size=16, kv_tiers=tiers, **fields)


def transfer_config(config: EngineConfig) -> dict[str, Any]:
    argv = config.argv()
    parsed: dict[str, Any] = json.loads(argv[argv.index("--kv-transfer-config") + 1])
    return parsed


def connectors(transfer: dict[str, Any]) -> list[dict[str, Any]]:
    """The connectors of a `--kv-transfer-config`, MultiConnector's children in order."""
    if transfer["kv_connector"] == "MultiConnector":
        children: list[dict[str, Any]] = transfer["kv_connector_extra_config"]["connectors"]
        return children
    return [transfer]


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("cpu:64GiB", 64 * GIB),
        ("cpu:1.5TiB", 3 * (1 << 39)),
        ("cpu:512MiB", 512 << 20),
        ("cpu:100GB", 100 * 10**9),
        ("cpu:2TB", 2 * 10**12),
    ],
)
def test_a_cpu_tier_size_is_read_with_its_unit(text: str, size: int) -> None:
    assert parse_kv_tier(text) == KVTier(kind="cpu", size_bytes=size)


def test_a_disk_tier_has_a_path_and_a_size() -> None:
    assert parse_kv_tier("disk:/mnt/nvme:500GiB") == KVTier(
        kind="disk", path="/mnt/nvme", size_bytes=500 * GIB
    )


def test_a_shared_tier_is_an_lmcache_server_address() -> None:
    assert parse_kv_tier("lmcache:tcp://lmcache.internal:5555").url == (
        "tcp://lmcache.internal:5555"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("cpu:64", "needs a number and a unit"),
        ("cpu:64GiBs", "needs a number and a unit"),
        ("cpu:-1GiB", "needs a number and a unit"),
        ("cpu:0GiB", "below 1 MiB"),
        ("ssd:/mnt:1GiB", "kind must be one of cpu, disk, lmcache, lmcache-disk"),
        ("cpu", "kind must be one of"),
        ("disk:/mnt/nvme", "give a path and a size"),
        ("disk:mnt/nvme:1GiB", "must be absolute"),
        ("disk:/mnt/../etc:1GiB", "must be absolute without '..'"),
        ("disk:/:1GiB", "not '/'"),
        ("lmcache:http://cache:5555", "tcp://HOST:PORT"),
        ("lmcache:tcp://cache", "tcp://HOST:PORT"),
        ("lmcache:tcp://cache:70000", "tcp://HOST:PORT"),
    ],
)
def test_a_bad_tier_is_refused_naming_what_is_wrong_and_the_form(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as caught:
        parse_kv_tier(text)
    assert repr(text) in str(caught.value)


def test_a_bad_tier_in_an_engine_config_is_an_engine_config_error_on_kv_tiers() -> None:
    with pytest.raises(EngineConfigError, match=r"e\.g\. 64GiB") as caught:
        gpu("cpu:64")
    assert caught.value.field == "kv_tiers"


def test_a_kind_given_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="'cpu' is given twice"):
        parse_kv_tiers(["cpu:1GiB", "cpu:2GiB"])


def test_tiers_are_kept_fastest_first_whatever_their_order() -> None:
    tiers = parse_kv_tiers(["lmcache:tcp://c:1", "disk:/d:1GiB", "cpu:1GiB"])
    assert [tier.kind for tier in tiers] == ["cpu", "disk", "lmcache"]


sizes = st.integers(min_value=1 << 20, max_value=1 << 44)
paths = st.lists(st.from_regex(r"[a-z0-9_]{1,8}", fullmatch=True), min_size=1, max_size=3)
tiers = st.one_of(
    st.builds(KVTier, kind=st.just("cpu"), size_bytes=sizes),
    st.builds(
        KVTier,
        kind=st.sampled_from(["disk", "lmcache-disk"]),
        size_bytes=sizes,
        path=paths.map(lambda parts: "/" + "/".join(parts)),
    ),
    st.builds(
        KVTier,
        kind=st.just("lmcache"),
        url=st.integers(1, 65535).map(lambda port: f"tcp://cache.internal:{port}"),
    ),
)


@given(tiers)
def test_a_tiers_spec_reads_back_as_the_same_tier(tier: KVTier) -> None:
    """`spec` is what the manifest and the messages show: it must mean the same tier (a size
    that is no whole MiB is shown in MiB with its fraction, read back to the byte)."""
    again = parse_kv_tier(tier.spec)
    assert again.kind == tier.kind and again.path == tier.path and again.url == tier.url
    assert abs((again.size_bytes or 0) - (tier.size_bytes or 0)) <= 1


def test_a_cpu_tier_is_vllms_native_offloading_of_exactly_that_many_bytes() -> None:
    assert transfer_config(gpu("cpu:64GiB")) == {
        "kv_connector": "OffloadingConnector",
        "kv_role": "kv_both",
        "kv_connector_extra_config": {"cpu_bytes_to_use": 64 * GIB},
    }


def test_a_disk_tier_is_the_cpu_tiers_file_system_tier() -> None:
    extra = transfer_config(gpu("cpu:64GiB", "disk:/mnt/nvme:500GiB"))["kv_connector_extra_config"]
    assert extra["spec_name"] == "TieringOffloadingSpec"
    assert extra["secondary_tiers"] == [
        {"type": "fs", "root_dir": "/mnt/nvme", "enable_kv_events": False, "locality": "LOCAL"}
    ]


def test_a_disk_tier_without_a_cpu_tier_is_refused_naming_the_fix() -> None:
    with pytest.raises(EngineConfigError, match=r"add a cpu tier, e\.g\. --kv-tier cpu:64GiB"):
        gpu("disk:/mnt/nvme:500GiB")


def test_a_shared_tier_joins_the_cpu_tier_behind_it_in_a_multi_connector() -> None:
    transfer = transfer_config(gpu("lmcache:tcp://cache.internal:5555", "cpu:8GiB"))
    assert transfer["kv_connector"] == "MultiConnector"
    native, shared = connectors(transfer)
    assert native["kv_connector"] == "OffloadingConnector"
    assert shared == {
        "kv_connector": "LMCacheMPConnector",
        "kv_role": "kv_both",
        "kv_connector_extra_config": {
            "lmcache.mp.host": "tcp://cache.internal",
            "lmcache.mp.port": 5555,
        },
    }


def test_tiers_are_gpu_only_with_the_reason() -> None:
    with pytest.raises(EngineConfigError, match=r"GPU-only .*CPU build fails") as caught:
        EngineConfig(model=MODEL, kv_tiers=("cpu:1GiB",))
    assert caught.value.field == "kv_tiers"


def test_the_raw_offloading_size_and_tiers_are_not_given_together() -> None:
    with pytest.raises(EngineConfigError, match="give the CPU tier in kv_tiers \\('cpu:8GiB'\\)"):
        gpu("cpu:1GiB", kv_offloading_size=8)


def test_no_transfer_config_without_tiers() -> None:
    assert "--kv-transfer-config" not in gpu().argv()
    assert gpu().kv_transfer_config(kv_events=True) == {}


def test_tiers_survive_derive() -> None:
    config = gpu("cpu:1GiB", "disk:/d:2GiB")
    assert config.derive(port=9000).kv_tiers == config.kv_tiers


def test_with_kv_events_the_native_tiers_publish_on_the_engines_publisher() -> None:
    config = gpu("cpu:64GiB", "disk:/mnt/nvme:500GiB", kv_events_endpoint="ipc:///tmp/r0.ipc")
    extra = transfer_config(config)["kv_connector_extra_config"]
    assert extra["self_describing_kv_events"] is True
    assert extra["secondary_tiers"][0]["enable_kv_events"] is True
    assert json.loads(config.argv()[config.argv().index("--kv-events-config") + 1])[
        "enable_kv_cache_events"
    ]


def test_the_engine_says_which_media_its_kv_events_carry() -> None:
    assert gpu().kv_event_media == ("GPU",)
    assert gpu("cpu:1GiB").kv_event_media == ("GPU", "CPU")
    assert gpu("cpu:1GiB", "disk:/d:1GiB").kv_event_media == ("GPU", "CPU", "STORAGE")
    assert gpu("cpu:1GiB", "lmcache:tcp://c:1").kv_event_media == ("GPU", "CPU")


def test_lmcaches_in_process_disk_is_refused_for_several_tenants_with_the_reason() -> None:
    with pytest.raises(EngineConfigError, match="does not keep tenants apart") as caught:
        gpu("lmcache-disk:/mnt/nvme:100GiB")
    message = str(caught.value)
    assert "cache_salt never reaches the key" in message
    assert "lmcache/v1/token_database.py" in message
    assert "--single-tenant" in message


def test_lmcaches_in_process_disk_runs_for_a_single_tenant_from_its_environment() -> None:
    config = gpu("lmcache-disk:/mnt/nvme:100GiB", single_tenant=True)
    assert connectors(transfer_config(config)) == [
        {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}
    ]
    env = config.env()
    assert env["LMCACHE_LOCAL_DISK"] == "file:///mnt/nvme/"
    assert env["LMCACHE_MAX_LOCAL_DISK_SIZE"] == "100"


salted_tier_sets = st.sets(
    st.sampled_from(["cpu:4GiB", "disk:/mnt/nvme:100GiB", "lmcache:tcp://cache:5555"]),
    min_size=1,
).filter(lambda chosen: "cpu:4GiB" in chosen or "disk:/mnt/nvme:100GiB" not in chosen)


@given(salted_tier_sets, st.booleans())
def test_every_tier_of_a_multi_tenant_configuration_keys_blocks_by_the_salt(
    chosen: set[str], events: bool
) -> None:
    """Whatever tiers a multi-tenant deployment is given, each connector the engine runs is
    one whose keys carry cache_salt (SALTED_CONNECTORS, from their code)."""
    endpoint = "ipc:///tmp/r0.ipc" if events else None
    config = gpu(*sorted(chosen), kv_events_endpoint=endpoint)
    used = [connector["kv_connector"] for connector in connectors(transfer_config(config))]
    assert used and set(used) <= SALTED_CONNECTORS


@given(salted_tier_sets)
def test_a_tier_whose_keys_drop_the_salt_is_refused_in_any_multi_tenant_set(
    chosen: set[str],
) -> None:
    with pytest.raises(EngineConfigError, match="does not keep tenants apart"):
        gpu(*sorted(chosen), "lmcache-disk:/mnt/other:10GiB")


@pytest.mark.parametrize(
    ("size", "quantity"),
    [(64 * GIB, "64Gi"), (1 << 40, "1Ti"), (1536 << 20, "1536Mi"), ((1 << 20) + 1, "2Mi")],
)
def test_a_size_becomes_a_kubernetes_quantity_rounded_up(size: int, quantity: str) -> None:
    assert kubernetes_quantity(size) == quantity
