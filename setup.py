"""Compiles the trace replay's hot modules with Cython (what `prefixkit analyze` runs).

The Python files stay the one source: each module below is compiled from
``engine_adapter/<name>.py`` with the static types of ``engine_adapter/<name>.pxd``
(attribute layouts and typed locals; annotations in the .py are not used as C
types). The build writes ``compiled_from.json`` beside the compiled modules: the
sha256 of every source it compiled. `prefixkit.engine_adapter.compiled` refuses to
import compiled modules whose sources changed since (rebuild with ``make`` or
``pip install -e .``). Without a working C compiler the install goes on with no
compiled module at all (the compiled modules import each other's types, so it
is all or none): the replay then runs from the .py sources, about 2x slower.
Everything else is configured in pyproject.toml.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import CCompilerError, ExecError, PlatformError

COMPILED = ("cache_sim", "load_model", "reuse_model", "precise_policy", "sim_policies", "replay")
MANIFEST = "compiled_from.json"


def _digests() -> dict[str, str]:
    root = Path(__file__).parent / "engine_adapter"
    return {
        name: hashlib.sha256((root / f"{name}.py").read_bytes()).hexdigest() for name in COMPILED
    }


class BuildWithManifest(build_ext):
    """build_ext, then record which sources the compiled modules were built from;
    if compiling fails, remove whatever it built and leave the .py sources in charge."""

    def run(self) -> None:
        target = Path(self.get_ext_fullpath(self.extensions[0].name)).parent / MANIFEST
        try:
            super().run()
        except (CCompilerError, ExecError, PlatformError) as error:
            for extension in self.extensions:
                Path(self.get_ext_fullpath(extension.name)).unlink(missing_ok=True)
            target.unlink(missing_ok=True)
            self.warn(
                f"prefixkit: compiling the trace replay failed ({error}); it will run from "
                "the Python sources, about 2x slower. Install gcc and the Python headers "
                "(python3-dev) and reinstall to compile it."
            )
            return
        target.write_text(json.dumps(_digests(), indent=1, sort_keys=True) + "\n")


STAGE = Path(__file__).parent / "build" / "cython"


def _staged_sources() -> list[Extension]:
    """Cython finds a module's .pxd (and the .pxd files it cimports) by the
    package path, so the sources are linked into ``build/cython/prefixkit/
    engine_adapter/`` and compiled from there (the C files stay there too)."""
    source = Path(__file__).parent / "engine_adapter"
    staged = STAGE / "prefixkit" / "engine_adapter"
    staged.mkdir(parents=True, exist_ok=True)
    for name in ("__init__.py", *(f"{m}.{ext}" for m in COMPILED for ext in ("py", "pxd"))):
        link = staged / name
        if (source / name).exists() and not link.exists():
            link.symlink_to(source / name)
    return [
        Extension(f"prefixkit.engine_adapter.{name}", [str(staged / f"{name}.py")])
        for name in COMPILED
    ]


setup(
    ext_modules=cythonize(
        _staged_sources(),
        compiler_directives={"language_level": 3, "annotation_typing": False},
        include_path=[str(STAGE)],
        quiet=True,
    ),
    cmdclass={"build_ext": BuildWithManifest},
)
