"""Compiles the routing decision and the trace replay with Cython (what `prefixkit analyze`
and the precise router run).

The Python files stay the one source: each module below is compiled from
``engine_adapter/<package>/<name>.py`` with the static types of the ``.pxd`` beside
it (attribute layouts and typed locals; annotations in the .py are not used as C
types). The build writes ``compiled_from.json`` into each package it compiled: the
sha256 of every source compiled there. `prefixkit.engine_adapter.compiled`
refuses to import compiled modules whose sources changed since (rebuild with
``make`` or ``pip install -e .``). Without a working C compiler the install goes on
with no compiled module at all (the compiled modules import each other's types, so
it is all or none): the replay and the router's decision then run from the .py
sources, about 2x slower. Everything else is configured in pyproject.toml.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import CCompilerError, ExecError, PlatformError

SOURCE = Path(__file__).parent / "engine_adapter"
# package of prefixkit.engine_adapter -> its compiled modules
COMPILED = {
    "routing": ("policy", "reuse"),
    "replay": ("cache_sim", "replica_load", "policies", "replay"),
}
MANIFEST = "compiled_from.json"


def _digests(package: str) -> dict[str, str]:
    return {
        name: hashlib.sha256((SOURCE / package / f"{name}.py").read_bytes()).hexdigest()
        for name in COMPILED[package]
    }


class BuildWithManifest(build_ext):
    """build_ext, then record which sources the compiled modules were built from;
    if compiling fails, remove whatever it built and leave the .py sources in charge."""

    def run(self) -> None:
        manifests = {
            package: Path(self.get_ext_fullpath(f"prefixkit.engine_adapter.{package}.x")).parent
            / MANIFEST
            for package in COMPILED
        }
        try:
            super().run()
        except (CCompilerError, ExecError, PlatformError) as error:
            for extension in self.extensions:
                Path(self.get_ext_fullpath(extension.name)).unlink(missing_ok=True)
            for manifest in manifests.values():
                manifest.unlink(missing_ok=True)
            self.warn(
                f"prefixkit: compiling the routing decision and the trace replay failed "
                f"({error}); they will run from the Python sources, about 2x slower. Install "
                "gcc and the Python headers (python3-dev) and reinstall to compile them."
            )
            return
        for package, manifest in manifests.items():
            manifest.write_text(json.dumps(_digests(package), indent=1, sort_keys=True) + "\n")


STAGE = Path(__file__).parent / "build" / "cython"


def _staged_sources() -> list[Extension]:
    """Cython finds a module's .pxd (and the .pxd files it cimports) by the
    package path, so the sources are linked into ``build/cython/prefixkit/
    engine_adapter/<package>/`` and compiled from there (the C files stay there too)."""
    staged_root = STAGE / "prefixkit" / "engine_adapter"
    links = {staged_root / "__init__.py": SOURCE / "__init__.py"}
    extensions = []
    for package, modules in COMPILED.items():
        links[staged_root / package / "__init__.py"] = SOURCE / package / "__init__.py"
        for name in modules:
            for suffix in ("py", "pxd"):
                links[staged_root / package / f"{name}.{suffix}"] = (
                    SOURCE / package / f"{name}.{suffix}"
                )
            extensions.append(
                Extension(
                    f"prefixkit.engine_adapter.{package}.{name}",
                    [str(staged_root / package / f"{name}.py")],
                )
            )
    for link, source in links.items():
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.is_symlink():
            link.symlink_to(source)
    return extensions


setup(
    ext_modules=cythonize(
        _staged_sources(),
        compiler_directives={"language_level": 3, "annotation_typing": False},
        include_path=[str(STAGE)],
        quiet=True,
    ),
    cmdclass={"build_ext": BuildWithManifest},
)
