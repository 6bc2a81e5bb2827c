"""The compiled routing decision and replay: which modules `setup.py` built with Cython,
and a guard against stale builds.

Installing prefixkit (``make`` runs ``pip install -e .``) compiles the hot modules of
`prefixkit.engine_adapter.routing` (policy, reuse) and `prefixkit.engine_adapter.replay`
(cache_sim, replica_load, policies, replay) from their own .py files, typed by the
.pxd beside each, and writes ``compiled_from.json`` into each of the two packages: the
sha256 of every source it compiled there. Python imports an extension module before a
.py of the same name, so a source edited after the build would leave its old compiled
module in charge. Importing either package therefore compares the digests
(`check_build`) and refuses to go on with a stale build, naming the modules and the
rebuild.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import json
import shutil
import sys
from pathlib import Path
from types import ModuleType

from .errors import StaleBuildError

__all__ = ["COMPILED_PACKAGES", "MANIFEST", "check_build", "is_compiled", "python_replay"]

MANIFEST = "compiled_from.json"
ROOT = Path(__file__).parent
COMPILED_PACKAGES = ("routing", "replay")


def _digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


def stale_modules(package: Path) -> list[str]:
    """Compiled modules in `package` whose .py no longer matches what was compiled
    (none when nothing was compiled there)."""
    try:
        recorded: dict[str, str] = json.loads((package / MANIFEST).read_text())
    except FileNotFoundError:
        return []
    return sorted(
        name for name, digest in recorded.items() if _digest(package / f"{name}.py") != digest
    )


def check_build(package: Path) -> None:
    """Raise `StaleBuildError` if any compiled module in the package folder `package`
    is stale."""
    stale = stale_modules(package)
    if stale:
        names = ", ".join(f"{name}.py" for name in stale)
        raise StaleBuildError(
            f"prefixkit.engine_adapter.{package.name}: {names} changed after it was compiled, "
            f"so the old compiled module would run instead. Rebuild with `make` (or `pip "
            f"install -e .`), or delete the compiled modules (*.so) and {MANIFEST} in "
            f"{package} to run the Python sources.",
            modules=tuple(f"prefixkit.engine_adapter.{package.name}.{name}" for name in stale),
            sources=tuple(package / f"{name}.py" for name in stale),
        )


def is_compiled(module_file: str | None) -> bool:
    """Whether a module was loaded from an extension module (its `__file__`)."""
    return module_file is not None and module_file.endswith(
        tuple(importlib.machinery.EXTENSION_SUFFIXES)
    )


def python_replay(workdir: Path, package: str = "replay_sources") -> ModuleType:
    """The replay module run from the .py sources alone, whatever is compiled: the
    engine adapter's routing and replay sources copied to `workdir`/`package` (with
    the modules they import) and imported from there, to check and time the compiled
    build against them."""
    target = workdir / package
    target.mkdir(parents=True)
    for source in ROOT.glob("*.py"):
        shutil.copy(source, target / source.name)
    for name in COMPILED_PACKAGES:
        (target / name).mkdir()
        for source in (ROOT / name).glob("*.py"):
            shutil.copy(source, target / name / source.name)
    sys.path.insert(0, str(workdir))
    try:
        return importlib.import_module(f"{package}.replay.replay")
    finally:
        sys.path.remove(str(workdir))
