"""The compiled replay: which modules `setup.py` built with Cython, and a guard against stale builds.

Installing prefixkit (``make`` runs ``pip install -e .``) compiles the trace
replay's hot modules (cache_sim, load_model, reuse_model, precise_policy,
sim_policies, replay) from their own .py files, typed by the .pxd beside
each, and writes ``compiled_from.json``: the sha256 of every source it
compiled. Python imports an extension module before a .py of the same name, so
a source edited after the build would leave its old compiled module in
charge. Importing `prefixkit.engine_adapter` therefore compares the digests
and refuses to go on with a stale build, naming the modules and the rebuild.
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

__all__ = [
    "MANIFEST",
    "StaleBuildError",
    "check_build",
    "is_compiled",
    "python_replay",
    "stale_modules",
]

MANIFEST = "compiled_from.json"
PACKAGE = Path(__file__).parent


class StaleBuildError(ImportError):
    """A compiled module was built from a source that has changed since."""


def _digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


def stale_modules(package: Path = PACKAGE) -> list[str]:
    """Compiled modules in `package` whose .py no longer matches what was compiled
    (none when nothing was compiled there)."""
    try:
        recorded: dict[str, str] = json.loads((package / MANIFEST).read_text())
    except FileNotFoundError:
        return []
    return sorted(
        name for name, digest in recorded.items() if _digest(package / f"{name}.py") != digest
    )


def check_build(package: Path = PACKAGE) -> None:
    """Raise `StaleBuildError` if any compiled module in `package` is stale."""
    stale = stale_modules(package)
    if stale:
        names = ", ".join(f"{name}.py" for name in stale)
        raise StaleBuildError(
            f"prefixkit.engine_adapter: {names} changed after it was compiled, so the old "
            f"compiled module would run instead. Rebuild with `make` (or `pip install -e .`), "
            f"or delete the compiled modules (*.so) and {MANIFEST} in {package} to run the "
            f"Python sources."
        )


def is_compiled(module_file: str | None) -> bool:
    """Whether a module was loaded from an extension module (its `__file__`)."""
    return module_file is not None and module_file.endswith(
        tuple(importlib.machinery.EXTENSION_SUFFIXES)
    )


def python_replay(workdir: Path, package: str = "replay_sources") -> ModuleType:
    """The replay module run from the .py sources alone, whatever is compiled: the
    engine adapter's .py files copied to `workdir`/`package` and imported from
    there (to check and time the compiled build against them)."""
    target = workdir / package
    target.mkdir(parents=True)
    for source in PACKAGE.glob("*.py"):
        shutil.copy(source, target / source.name)
    sys.path.insert(0, str(workdir))
    try:
        return importlib.import_module(f"{package}.replay")
    finally:
        sys.path.remove(str(workdir))
