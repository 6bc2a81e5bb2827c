"""The embedded default: the vLLM CPU engine serving SmolLM2-135M-Instruct on this machine.

    base = prepare_embedded(report=print)     # installs / prepares on first use, then instant
    configs = replica_configs(base, count=1, run_dir=run, first_port=18000)

`embedded_config` holds the CPU settings measured in VLLM.md: block size 32 (the CPU backend
needs a multiple of 32), float32 (bfloat16 is ~3x slower on AVX2), eager mode (starts in
~30 s instead of ~66 s, same TTFT), 1 GiB of KV cache, a 4,096-token context, and OpenMP
threads on every core this process may use with none reserved (~1.8x faster prefill on two
cores than vLLM's default of reserving one).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .config import EngineConfig
from .install import ensure_engine
from .setup_steps import Report
from .smollm2 import ensure_smollm2

__all__ = ["EMBEDDED_SERVED_NAME", "embedded_config", "prepare_embedded"]

EMBEDDED_SERVED_NAME = "smollm2-135m-instruct"


def embedded_config(model_dir: Path, python: Path, **overrides: Any) -> EngineConfig:
    """Engine settings for the embedded model (the CPU ones unless `overrides` give
    ``device="gpu"``); `overrides` replace any field."""
    defaults: dict[str, Any] = {
        "model": model_dir,
        "served_model_name": EMBEDDED_SERVED_NAME,
        "python": python,
        "device": "cpu",
        "block_size": 32,
        "dtype": "float32",
        "enforce_eager": True,
        "max_model_len": 4096,
    }
    if overrides.get("device", "cpu") == "cpu":
        cores = sorted(os.sched_getaffinity(0))
        defaults |= {
            "kv_cache_space_gib": 1,
            "cpu_omp_threads_bind": ",".join(str(core) for core in cores),
            "cpu_reserved_cores": 0,
        }
    return EngineConfig(**{**defaults, **overrides})


def prepare_embedded(report: Report = lambda message: None, **overrides: Any) -> EngineConfig:
    """Install the engine (unless `overrides` give another ``python``) and prepare the
    model if needed; returns the embedded config."""
    python = overrides.pop("python", None) or ensure_engine(report)
    model_dir = ensure_smollm2(report)
    return embedded_config(model_dir, python, **overrides)
