"""`prefixkit analyze --tiers`: the tiered replay from the command line, its output and its
refusals of input that cannot work."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prefixkit.cli.main import main

from tests.conftest import MOONCAKE_TRACE

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "tiers"


def small_trace(tmp_path: Path) -> Path:
    """Two prompts of 3 blocks alternating, 10 s apart (Mooncake format, 512-token blocks)."""
    path = tmp_path / "t.jsonl"
    path.write_text(
        "\n".join(
            json.dumps(
                {
                    "timestamp": index * 10_000,
                    "input_length": 1536,
                    "output_length": 1,
                    "hash_ids": [1, 2, 3] if index % 2 else [4, 5, 6],
                }
            )
            for index in range(6)
        )
    )
    return path


# 1,000 bytes per token: a 512-token block is 512,000 bytes; the GPU holds 3
def tier_args(trace: Path, *extra: str, gpu: str = "1536000B") -> list[str]:
    return [
        "analyze",
        str(trace),
        "--tiers",
        "--replicas",
        "1",
        "--kv-bytes-per-token",
        "1000",
        "--kv-tier",
        f"gpu:{gpu}",
        *extra,
    ]


def test_json_reports_each_tier_s_hits_against_the_gpu_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = tier_args(
        small_trace(tmp_path),
        "--kv-tier",
        "cpu:3072000B",
        "--policies",
        "round_robin",
        "--sweep",
        "cpu",
        "--sweep-sizes",
        "0B,3072000B",
        "--format",
        "json",
    )
    assert main(args) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["simulation"] is True
    assert report["inputs"]["kv_bytes_per_token"] == 1000
    gpu_only, with_cpu = report["results"]
    assert (gpu_only["run"], with_cpu["run"]) == ("GPU only", "load all")
    assert with_cpu["rule"] == "always_load"
    # the GPU holds one prompt (3 blocks), the CPU both: requests 3-6 hit in the CPU
    assert gpu_only["hit_rate"] == 0
    assert with_cpu["tiers"]["CPU"]["hit_rate"] == pytest.approx(4 / 6, abs=1e-4)
    assert with_cpu["tiers"]["CPU"]["capacity_blocks"] == 6
    assert with_cpu["prefill_tokens_saved"] == 4 * 1536
    assert with_cpu["ttft_p50_s"] < gpu_only["ttft_p50_s"]
    sweep = report["sweep"]
    assert [p["capacity_bytes"] for p in sweep["points"]] == [0, 3072000]
    assert sweep["stops_paying_bytes"] is None  # the last step still pays


def test_the_table_names_the_inputs_and_labels_the_simulation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = tier_args(small_trace(tmp_path), "--kv-tier", "cpu:3MB", "--policies", "precise")
    assert main(args) == 0
    out = capsys.readouterr().out
    assert out.startswith("Simulation: 6 requests, 1 replicas, h100 preset")
    assert "a hit saves of a block's prefill: GPU 1.00, CPU" in out
    assert "sweep of the CPU tier" in out


def test_the_model_config_gives_the_bytes_per_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [
        "analyze",
        str(small_trace(tmp_path)),
        "--tiers",
        "--model-config",
        str(CONFIGS / "llama-3.1-8b.json"),
        "--kv-tier",
        "gpu:1GiB",
        "--sweep",
        "none",
        "--format",
        "json",
    ]
    assert main(args) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["inputs"]["kv_bytes_per_token"] == 131072
    assert report["sweep"] is None


def test_a_plot_is_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plot = tmp_path / "tiers.png"
    args = tier_args(
        small_trace(tmp_path),
        "--kv-tier",
        "cpu:3MB",
        "--policies",
        "round_robin",
        "--plot",
        str(plot),
    )
    assert main(args) == 0
    assert plot.read_bytes().startswith(b"\x89PNG")


def test_the_bundled_trace_replays_with_every_tier(capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "analyze",
        str(MOONCAKE_TRACE),
        "--tiers",
        "--limit",
        "1500",
        "--replicas",
        "4",
        "--kv-bytes-per-token",
        "131072",
        "--kv-tier",
        "gpu:4GiB",
        "--kv-tier",
        "cpu:32GiB",
        "--kv-tier",
        "disk:256GiB",
        "--policies",
        "precise,precise_tiered",
        "--router-bandwidth-scale",
        "0.5,2",
        "--sweep",
        "none",
        "--format",
        "json",
    ]
    assert main(args) == 0
    results = json.loads(capsys.readouterr().out)["results"]
    runs = {(r["policy"], r["run"]): r for r in results}
    # precise_tiered over the GPU alone is precise: that run is not repeated
    assert set(runs) == {
        ("precise", "GPU only"),
        ("precise", "load all"),
        ("precise_tiered", "load all"),
        ("precise_tiered", "load all, bw x0.5"),
        ("precise_tiered", "load all, bw x2"),
    }
    assert runs["precise", "load all"]["hit_rate"] > runs["precise", "GPU only"]["hit_rate"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--gpu", "b200"], "--gpu b200: unknown GPU preset; choose from h100, a100-80gb"),
        (["--kv-tier", "cpu:64"], "--kv-tier cpu:64: size '64': give a number with its unit"),
        (["--kv-tier", "ram:64GiB"], "--kv-tier ram:64GiB: give TIER:SIZE with TIER one of gpu"),
        (["--kv-tier", "gpu:1GiB"], "the gpu tier is given twice"),
        (["--cpu-read", "fast"], "--cpu-read fast: bandwidth 'fast': give a link preset"),
        (["--disk-read", "5GB"], "--disk-read 5GB: bandwidth '5GB'"),
        (["--policies", "best"], "with --tiers choose from round_robin, "),
        (["--sweep", "ram"], "--sweep ram: give one of gpu, cpu, disk or none"),
        (["--sweep-sizes", "1,2"], "--sweep-sizes 1: size '1'"),
        (["--router-bandwidth-scale", "0.5,x"], "--router-bandwidth-scale 0.5,x: give positive"),
        (["--capacity", "10"], "--capacity and --kv-tier gpu:SIZE both give the GPU tier"),
        (["--min-gain", "2"], "--min-gain 2.0: give a share of prefill time between 0 and 1"),
    ],
)
def test_bad_tier_input_is_refused_naming_it_and_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    assert main(tier_args(small_trace(tmp_path), *extra)) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("gpu", "message"),
    [
        ("100GB", "the GPU tier (100 GB) is more than the h100's 80 GB of memory"),
        ("1kB", "holds no block of 512 tokens at 1000 bytes per token"),
    ],
)
def test_a_gpu_tier_that_cannot_be_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], gpu: str, message: str
) -> None:
    assert main(tier_args(small_trace(tmp_path), gpu=gpu)) == 2
    assert message in capsys.readouterr().err


def test_the_size_of_a_token_is_required(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["analyze", str(small_trace(tmp_path)), "--tiers", "--kv-tier", "gpu:1GiB"]
    assert main(args) == 2
    assert "give --model-config (the served model's config.json" in capsys.readouterr().err


def test_the_gpu_tier_is_required_without_capacity(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["analyze", str(small_trace(tmp_path)), "--tiers", "--kv-bytes-per-token", "1"]
    assert main(args) == 2
    assert "give --kv-tier gpu:SIZE" in capsys.readouterr().err


def test_a_model_whose_layout_is_unknown_is_refused_with_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [
        "analyze",
        str(small_trace(tmp_path)),
        "--tiers",
        "--model-config",
        str(CONFIGS / "llama-4-scout.json"),
        "--kv-tier",
        "gpu:1GiB",
    ]
    assert main(args) == 2
    assert "config field 'attention_chunk_size' is set" in capsys.readouterr().err


@pytest.mark.parametrize(
    "option", [["--kv-tier", "cpu:64GiB"], ["--gpu", "l4"], ["--min-gain", "0.01"]]
)
def test_tier_options_without_tiers_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: list[str]
) -> None:
    assert main(["analyze", str(small_trace(tmp_path)), *option]) == 2
    assert f"{option[0]} applies to the tiered replay: add --tiers" in capsys.readouterr().err


def test_the_gpu_tier_can_be_given_in_blocks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [
        "analyze",
        str(small_trace(tmp_path)),
        "--tiers",
        "--replicas",
        "1",
        "--kv-bytes-per-token",
        "1000",
        "--capacity",
        "3",
        "--sweep",
        "none",
        "--format",
        "json",
    ]
    assert main(args) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["inputs"]["tier_bytes"]["GPU"] == 3 * 512 * 1000


def test_a_link_rate_in_gigabits_is_an_eighth_of_the_same_in_gigabytes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = small_trace(tmp_path)
    args = tier_args(
        trace, "--kv-tier", "cpu:3072000B", "--kv-tier", "disk:6144000B", "--sweep", "none"
    )
    assert main([*args, "--disk-read", "100Gb/s", "--format", "json"]) == 0
    inputs = json.loads(capsys.readouterr().out)["inputs"]
    assert inputs["disk_read_bytes_per_s"] == 12.5e9


def test_a_tier_size_in_bits_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(tier_args(small_trace(tmp_path), "--kv-tier", "cpu:64Gb")) == 2
    assert "is in bits" in capsys.readouterr().err


def tenant_trace(tmp_path: Path) -> Path:
    """Six requests of one prompt (3 blocks) from two tenants, alternating (Mooncake)."""
    path = tmp_path / "tenants.jsonl"
    path.write_text(
        "\n".join(
            json.dumps(
                {
                    "timestamp": index * 10_000,
                    "input_length": 1536,
                    "output_length": 1,
                    "hash_ids": [1, 2, 3],
                    "tenant": f"t{index % 2}",
                }
            )
            for index in range(6)
        )
    )
    return path


def test_plain_analyze_keeps_tenants_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["analyze", str(tenant_trace(tmp_path)), "--replicas", "1", "--policies", "round_robin"]
    assert main([*args, "--format", "json"]) == 0
    (result,) = json.loads(capsys.readouterr().out)
    # each tenant computes the prompt once: 4 of 6 requests hit, not 5
    assert result["prefill_tokens_saved"] == 4 * 1536


@pytest.mark.parametrize("policy", ["round_robin", "consistent_hash", "smg_like", "precise"])
def test_the_gpu_only_run_of_a_salted_trace_is_plain_analyze(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], policy: str
) -> None:
    trace = str(tenant_trace(tmp_path))
    common = ["--replicas", "2", "--policies", policy, "--capacity", "2", "--format", "json"]
    assert main(["analyze", trace, *common]) == 0
    (plain,) = json.loads(capsys.readouterr().out)
    tiers = ["--tiers", "--kv-bytes-per-token", "1000", "--sweep", "none"]
    assert main(["analyze", trace, *common, *tiers]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["inputs"]["salted"] is True
    (gpu_only,) = report["results"]
    assert gpu_only["hit_rate"] == plain["hit_rate"]
    assert gpu_only["prefill_tokens_saved"] == plain["prefill_tokens_saved"]


def test_the_table_printed_to_80_columns_cuts_no_number(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")  # what rich uses when the output is not a terminal
    args = tier_args(
        small_trace(tmp_path),
        "--kv-tier",
        "cpu:3072000B",
        "--kv-tier",
        "disk:6144000B",
        "--sweep",
        "none",
        "--router-bandwidth-scale",
        "0.5",
    )
    assert main([*args, "--format", "json"]) == 0
    results = json.loads(capsys.readouterr().out)["results"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "…" not in out
    assert max(len(line) for line in out.splitlines()) <= 80
    lines = out.splitlines()
    for result in results:
        hits = (result["run"], *(f"{t['hit_rate']:.3f}" for t in result["tiers"].values()))
        times = (
            result["run"],
            f"{result['prefill_tokens_saved']:,}",
            f"{result['ttft_p50_s']:.2f}s",
            f"{result['ttft_p90_s']:.2f}s",
        )
        assert any(all(cell in line for cell in hits) for line in lines)
        assert any(all(cell in line for cell in times) for line in lines)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--kv-cache-dtype", "fp8"],
            "--kv-cache-dtype fp8 does not apply to --kv-bytes-per-token",
        ),
        (
            ["--model-config", str(CONFIGS / "llama-3.1-8b.json")],
            "--model-config and --kv-bytes-per-token both give the KV size of a token",
        ),
    ],
)
def test_options_that_contradict_the_given_kv_size_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    assert main(tier_args(small_trace(tmp_path), *extra)) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(("dtype", "refused"), [("fp8_inc", False), ("float32", True)])
def test_the_kv_cache_dtype_is_one_of_vllm_s_and_blamed_when_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], dtype: str, refused: bool
) -> None:
    args = [
        "analyze",
        str(small_trace(tmp_path)),
        "--tiers",
        "--replicas",
        "1",
        "--model-config",
        str(CONFIGS / "llama-3.1-8b.json"),
        "--kv-tier",
        "gpu:1GiB",
        "--sweep",
        "none",
        "--kv-cache-dtype",
        dtype,
        "--format",
        "json",
    ]
    assert main(args) == (2 if refused else 0)
    captured = capsys.readouterr()
    if refused:
        assert "error: --kv-cache-dtype float32: KV cache dtype" in captured.err
    else:
        # one byte per value: half the bf16 size of Llama-3.1-8B's 131,072 bytes
        assert json.loads(captured.out)["inputs"]["kv_bytes_per_token"] == 65536


def test_a_gpu_tier_given_in_blocks_that_cannot_fit_names_capacity(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["analyze", str(small_trace(tmp_path)), "--tiers", "--kv-bytes-per-token", "1e6"]
    assert main([*args, "--capacity", "1000"]) == 2
    err = capsys.readouterr().err
    assert "(--capacity 1000 blocks) or another --gpu" in err
    assert "--kv-tier" not in err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--sweep", "cpu"], "--sweep cpu: there is no cpu tier to sweep around"),
        (
            ["--kv-tier", "cpu:3MB", "--sweep-sizes", "3MB"],
            "a sweep compares two sizes or more, and only 2.86 MiB is left of --sweep-sizes 3MB",
        ),
        (
            ["--kv-tier", "cpu:3MB", "--sweep-sizes", "3MB,3MB"],
            "a sweep compares two sizes or more",
        ),
        (
            ["--kv-tier", "cpu:3MB", "--sweep-sizes", ","],
            "a sweep compares two sizes or more, and no size is left",
        ),
        (
            ["--sweep", "gpu", "--sweep-sizes", "100kB,1GiB"],
            "--sweep-sizes 100kB,1GiB: a gpu tier of 97.7 KiB holds no block of 512 tokens",
        ),
        (
            ["--sweep", "gpu", "--sweep-sizes", "16GiB,200GiB"],
            "a gpu tier of 200 GiB is more than the h100's 80 GB of memory",
        ),
        (
            ["--kv-tier", "cpu:3MB", "--kv-tier", "disk:1GB", "--sweep-sizes", "0B,3MB"],
            "a cpu tier of 0 B holds no block, and vLLM reads and writes the disk tier",
        ),
        (["--kv-tier", "disk:1GB"], "a disk tier needs a cpu tier"),
        (["--kv-tier", "cpu:0B", "--kv-tier", "disk:1GB"], "a disk tier needs a cpu tier"),
    ],
)
def test_a_sweep_that_cannot_conclude_or_cannot_run_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    assert main(tier_args(small_trace(tmp_path), *extra)) == 2
    assert message in capsys.readouterr().err


def test_the_default_cpu_sweep_with_a_disk_tier_starts_at_a_cpu_tier_vllm_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = tier_args(
        small_trace(tmp_path), "--kv-tier", "cpu:4MB", "--kv-tier", "disk:1GB", "--format", "json"
    )
    assert main(args) == 0
    sweep = json.loads(capsys.readouterr().out)["sweep"]
    assert sweep["tier"] == "CPU"
    assert [p["capacity_bytes"] for p in sweep["points"]] == [
        int(4e6 * f) for f in (0.125, 0.25, 0.5, 1, 2, 4) if 4e6 * f >= 512_000
    ]


def test_the_default_gpu_sweep_leaves_out_sizes_the_gpu_cannot_hold(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = tier_args(small_trace(tmp_path), "--format", "json", gpu="40GB")
    assert main(args) == 0
    sweep = json.loads(capsys.readouterr().out)["sweep"]
    assert sweep["tier"] == "GPU"
    assert [p["capacity_bytes"] for p in sweep["points"]] == [
        int(40e9 * f) for f in (0.125, 0.25, 0.5, 1, 2)
    ]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--kv-tier", "cpu:3MB", "--policies", "precise", "--router-bandwidth-scale", "2"],
            "--router-bandwidth-scale 2: it replays precise_tiered with a lower tier, and "
            "--policies has no precise_tiered: add it",
        ),
        (
            ["--router-bandwidth-scale", "2"],
            "there is no lower tier: give --kv-tier cpu:SIZE",
        ),
        (
            ["--kv-tier", "disk:/mnt/nvme:500GiB"],
            "--kv-tier disk:/mnt/nvme:500GiB: analyze simulates a tier's size only: give disk:SIZE",
        ),
    ],
)
def test_options_that_would_do_nothing_or_belong_to_serve_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    assert main(tier_args(small_trace(tmp_path), "--sweep", "none", *extra)) == 2
    assert message in capsys.readouterr().err
