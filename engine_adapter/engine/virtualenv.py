"""A virtualenv of pinned packages that prefixkit installs for an engine (the embedded
engine's, `install`; the Ray engine's, `prefixkit.engine_adapter.ray.install`): the first and
the CUDA-cleaning steps their recipes share, the verification that runs in the virtualenv's
own interpreter, its marker, and the install-then-verify run.

Both recipes start with a virtualenv, a current pip and CPU torch, installed before vLLM so
that the resolver keeps the CPU build; both remove the CUDA builds of torch's companions that
the resolver pulls in (against CPU torch they break transformers' model classes).
"""

from __future__ import annotations

import functools
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import EngineInstallError
from .setup_steps import Report, SetupStep, log_tail, run_setup_steps

__all__ = [
    "REMOVED_PACKAGES",
    "TORCH_VERSION",
    "install_and_verify",
    "pip_install",
    "read_marker",
    "removing_cuda_extras",
    "site_packages",
    "torch_steps",
    "verify_venv",
]

TORCH_VERSION = "2.13.0"
REMOVED_PACKAGES = ("torchvision", "torchaudio", "torchcodec", "triton")


def pip_install(python: str) -> tuple[str, ...]:
    """``python -m pip install`` without a progress bar (the output goes to a log)."""
    return (python, "-m", "pip", "install", "--progress-bar", "off")


def torch_steps(venv: Path, base_python: str | Path, name: str) -> list[SetupStep]:
    """Create the virtualenv `venv` (``the {name} virtualenv``), upgrade pip, install CPU
    torch: the first steps of every engine recipe (pure)."""
    pip = pip_install(str(venv / "bin" / "python"))
    return [
        SetupStep(f"creating the {name} virtualenv", (str(base_python), "-m", "venv", str(venv))),
        SetupStep("upgrading pip", (*pip, "-U", "pip")),
        SetupStep(f"installing torch=={TORCH_VERSION} (CPU)", (*pip, f"torch=={TORCH_VERSION}")),
    ]


def removing_cuda_extras(venv: Path) -> SetupStep:
    """Uninstall `REMOVED_PACKAGES` (CUDA builds that break CPU torch) from `venv`."""
    python = str(venv / "bin" / "python")
    return SetupStep(
        "removing CUDA-only extras that break CPU torch",
        (python, "-m", "pip", "uninstall", "-y", *REMOVED_PACKAGES),
    )


def verify_venv(
    venv: Path, script: str, *, name: str, install: str, reinstall: str
) -> dict[str, str]:
    """Run `script` in `venv`'s interpreter; it prints a JSON object of versions as its last
    line, which is returned. Raises `EngineInstallError` (step ``"verifying"``) when the
    interpreter is missing (`install`: what installs it) or the script fails (`reinstall`:
    the command that installs it again)."""
    python = venv / "bin" / "python"
    if not python.exists():
        raise EngineInstallError(
            f"no {name} interpreter at {python}: run {install}", venv=venv, step="verifying"
        )
    result = subprocess.run(
        [str(python), "-c", script], capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    if result.returncode != 0:
        detail = "\n".join(result.stderr.strip().splitlines()[-6:])
        raise EngineInstallError(
            f"the {name} at {venv} failed verification:\n{detail}\n"
            f"delete {venv} and run `{reinstall}` to reinstall it",
            venv=venv,
            step="verifying",
            output_tail=detail,
        )
    versions: dict[str, str] = json.loads(result.stdout.strip().splitlines()[-1])
    return versions


def install_and_verify(
    venv: Path,
    steps: list[SetupStep],
    log: Path,
    report: Report,
    verify: Callable[[Path], dict[str, str]],
    name: str,
) -> dict[str, str]:
    """Run `steps` (output to `log`), then `verify` the virtualenv; returns its versions.
    Raises `EngineInstallError` naming the failed step, or the failed verification with
    the install log's last lines."""
    report(f"installing the {name} into {venv} (log: {log})")
    run_setup_steps(steps, log, report, functools.partial(EngineInstallError, venv=venv))
    report(f"verifying the {name}")
    try:
        return verify(venv)
    except EngineInstallError as error:
        raise EngineInstallError(
            f"{error}\nlast lines of {log}:\n{log_tail(log)}",
            venv=venv,
            step=error.step,
            output_tail=error.output_tail,
        ) from None


def read_marker(marker: Path) -> dict[str, Any] | None:
    """The JSON object a verified install left in its marker file (None: none, or unreadable)."""
    try:
        recorded = json.loads(marker.read_text())
    except (OSError, ValueError):
        return None
    return recorded if isinstance(recorded, dict) else None


def site_packages(python: Path) -> Path:
    """The site-packages folder of the interpreter `python`; raises
    `subprocess.CalledProcessError` (with its stderr) when it cannot say."""
    return Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
            stdin=subprocess.DEVNULL,
        ).stdout.strip()
    )
