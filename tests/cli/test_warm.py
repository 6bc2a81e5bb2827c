"""`prefixkit warm`: warms every replica `prefixkit serve` lists in its run directory, per
tenant, and reports it; an unknown prompt or tenant, a missing tenants config, a router
that cannot be pinned (exit 2) and an unreachable replica (exit 3) are named."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from prefixkit.cli.main import main
from prefixkit.sdk import write_lock
from prefixkit.testing.fake_vllm import FakeVLLM, free_port

SYSTEM = (
    "You answer questions about storage buckets, invoices and quotas. Quote the price list, "
    "show the arithmetic, and never invent a limit. "
) * 6


@pytest.fixture
def prompts(tmp_path: Path) -> Path:
    root = tmp_path / "prompts"
    root.mkdir()
    (root / "support@v4.md").write_text(SYSTEM)
    write_lock(root)
    return root


@pytest.fixture
def tenants(tmp_path: Path) -> Path:
    path = tmp_path / "tenants.toml"
    path.write_text(
        'secret = "cli-warm-secret-0123456789"\n[tenants]\nacme = "k-a"\nglobex = "k-g"\n'
        '[operators]\nops = "k-ops"\n'
    )
    return path


@pytest.fixture
def run_dir(tmp_path: Path) -> Iterator[Path]:
    """A run directory of `prefixkit serve` with two (fake) replicas."""
    folder = tmp_path / "run"
    folder.mkdir()
    with FakeVLLM() as first, FakeVLLM() as second:
        urls = [first.url, second.url]
        state = {"endpoint": urls[0], "router": None, "replicas": urls}
        (folder / "serve.json").write_text(json.dumps(state))
        yield folder


def warm(*arguments: str) -> int:
    return main(["warm", *arguments])


def test_every_replica_is_warmed_for_every_tenant(
    prompts: Path,
    tenants: Path,
    run_dir: Path,
    hf_tokenizer_dir: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = warm(
        "support@v4",
        *("--root", str(prompts), "--run-dir", str(run_dir), "--tenants", str(tenants)),
        *("--tokenizer", str(hf_tokenizer_dir), "--json"),
    )
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    assert report["warmed"] is True
    assert sorted((r["target"], r["tenant"]) for r in report["results"]) == [
        ("replica 0", "acme"),
        ("replica 0", "globex"),
        ("replica 1", "acme"),
        ("replica 1", "globex"),
    ]
    assert all(r["cached_after"] == r["prefix_tokens"] > 0 for r in report["results"])


def test_the_table_says_what_got_cached(
    prompts: Path,
    tenants: Path,
    run_dir: Path,
    hf_tokenizer_dir: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    warm(
        "support@v4",
        *("--root", str(prompts), "--run-dir", str(run_dir), "--tenants", str(tenants)),
        *("--tokenizer", str(hf_tokenizer_dir), "--tenant", "globex"),
    )
    out = capsys.readouterr().out
    assert "support@v4           replica 0    globex" in out
    assert out.rstrip().endswith(
        "2 of 2 warm requests left their whole prefix cached "
        "(prefix: tokens of whole blocks; before: already cached; after: found by a probe)"
    )


def test_an_unknown_prompt_version_lists_the_versions(
    prompts: Path, tenants: Path, run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = warm(
        "support@v5", "--root", str(prompts), "--run-dir", str(run_dir), "--tenants", str(tenants)
    )
    assert code == 2
    assert "prompt 'support' has no version 'v5'" in capsys.readouterr().err


def test_an_unknown_tenant_is_named(
    prompts: Path,
    tenants: Path,
    run_dir: Path,
    hf_tokenizer_dir: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = warm(
        "support@v4",
        *("--root", str(prompts), "--run-dir", str(run_dir), "--tenants", str(tenants)),
        *("--tokenizer", str(hf_tokenizer_dir), "--tenant", "initech"),
    )
    assert code == 2
    assert "unknown tenant initech: the tenants config has acme, globex" in capsys.readouterr().err


def test_no_tenants_config_says_how_to_give_one(
    prompts: Path,
    run_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("PREFIXKIT_TENANT_KEYS", raising=False)
    code = warm("support@v4", "--root", str(prompts), "--run-dir", str(run_dir))
    assert code == 2
    assert "no tenant API keys: give --tenants FILE" in capsys.readouterr().err


def test_an_unreachable_replica_exits_3_naming_it(
    prompts: Path,
    tenants: Path,
    tmp_path: Path,
    hf_tokenizer_dir: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    (tmp_path / "serve.json").write_text(json.dumps({"endpoint": url, "replicas": [url]}))
    code = warm(
        "support@v4",
        *("--root", str(prompts), "--run-dir", str(tmp_path), "--tenants", str(tenants)),
        *("--tokenizer", str(hf_tokenizer_dir), "--block-size", "32", "--model", "m"),
    )
    assert code == 3
    assert f"replica 0 at {url} is unreachable" in capsys.readouterr().err


def test_a_ray_router_that_cannot_be_pinned_asks_for_via_router(
    prompts: Path, tenants: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = "http://127.0.0.1:8000"
    (tmp_path / "ray-serve.json").write_text(json.dumps({"url": url, "replicas": ["a", "b"]}))
    llm = {
        "model_loading_config": {"model_id": "m", "model_source": "/models/m"},
        "engine_kwargs": {"block_size": 32},
    }
    spec = {"app_args": {"llm_config": llm, "router": "prefix-affinity"}}
    (tmp_path / "ray-spec.json").write_text(json.dumps(spec))
    code = warm(
        "support@v4", "--root", str(prompts), "--run-dir", str(tmp_path), "--tenants", str(tenants)
    )
    assert code == 2
    assert "routes with the prefix-affinity router, which cannot be told" in capsys.readouterr().err


def test_a_gateway_url_is_warmed_through_with_an_operators_key_naming_each_tenant(
    prompts: Path, tenants: Path, hf_tokenizer_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from prefixkit.engine_adapter import Tenants, Topology, deploy
    from prefixkit.sdk import tenant_salt

    with (
        FakeVLLM() as replica,
        deploy([replica.endpoint], Topology(port=free_port()), tenants=Tenants.load(tenants)) as d,
    ):
        code = warm(
            "support@v4",
            *("--root", str(prompts), "--url", d.url, "--tenants", str(tenants)),
            *("--tokenizer", str(hf_tokenizer_dir), "--json"),
        )
        salts = set(replica.cache_salts)
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    assert [(r["target"], r["tenant"]) for r in report["results"]] == [
        ("gateway", "acme"),
        ("gateway", "globex"),
    ]
    secret = "cli-warm-secret-0123456789"
    assert salts == {tenant_salt("acme", secret), tenant_salt("globex", secret)}


def test_a_gateway_url_without_an_operator_key_is_a_configuration_error(
    prompts: Path, tmp_path: Path, hf_tokenizer_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tenants = tmp_path / "tenant-keys-only.toml"
    tenants.write_text('secret = "cli-warm-secret-0123456789"\n[tenants]\nacme = "k-a"\n')
    code = warm(
        "support@v4",
        *("--root", str(prompts), "--url", "http://127.0.0.1:9", "--tenants", str(tenants)),
        *("--tokenizer", str(hf_tokenizer_dir), "--block-size", "32"),
    )
    assert code == 2
    assert "needs an operator's API key" in capsys.readouterr().err
