"""Where prefixkit keeps its engine, models and run state: `PREFIXKIT_HOME`.

`PREFIXKIT_HOME` (default `~/.cache/prefixkit`) holds:

    engine/                 the vLLM virtualenv (its own pins; never imported in-process)
    converter/              a small virtualenv that dequantises GGUF models
    models/<name>/          prepared models (safetensors + tokenizer + chat template)
    runs/<name>/            logs, KV-event sockets and state of `prefixkit serve`
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = [
    "converter_venv",
    "engine_python",
    "engine_venv",
    "models_dir",
    "prefixkit_home",
    "runs_dir",
]


def prefixkit_home(environ: Mapping[str, str] | None = None) -> Path:
    """`$PREFIXKIT_HOME` if set, else `~/.cache/prefixkit`."""
    env = os.environ if environ is None else environ
    override = env.get("PREFIXKIT_HOME")
    return Path(override).expanduser() if override else Path.home() / ".cache" / "prefixkit"


def engine_venv(environ: Mapping[str, str] | None = None) -> Path:
    """The virtualenv holding the embedded vLLM CPU engine."""
    return prefixkit_home(environ) / "engine"


def engine_python(environ: Mapping[str, str] | None = None) -> Path:
    """The interpreter that runs `python -m vllm.entrypoints.openai.api_server`."""
    return engine_venv(environ) / "bin" / "python"


def converter_venv(environ: Mapping[str, str] | None = None) -> Path:
    """The virtualenv that converts GGUF weights (reuses the engine's packages)."""
    return prefixkit_home(environ) / "converter"


def models_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Prepared local models, one directory each."""
    return prefixkit_home(environ) / "models"


def runs_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Per-run logs, KV-event sockets and the state file read by `prefixkit serve status`."""
    return prefixkit_home(environ) / "runs"
