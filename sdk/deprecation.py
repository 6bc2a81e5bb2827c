"""Renamed public names: the old name keeps working, with a warning, until the next minor
version removes it.

A module that renamed a public name gives its old name through its module `__getattr__`:

    __getattr__ = renamed_names(__name__, {"DriftGuard": "StaticPrefixGuard"})

Reading `module.DriftGuard` (or `from module import DriftGuard`) then warns with
`PrefixkitDeprecationWarning`, naming the new name and the version that removes the old
one, and returns the new object. Every alias is recorded in `RENAMED`, which the test
suite checks against CHANGELOG.md.

A package with lazy exports (`exports.py`) passes its export `__getattr__` as `fallback`,
so one function serves both and the warning still points at the caller's line:

    _exported, __dir__ = lazy_exports(__name__, _EXPORTS)
    __getattr__ = renamed_names(__name__, {"DriftGuard": "StaticPrefixGuard"}, fallback=_exported)
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .errors import PrefixkitDeprecationWarning

__all__ = ["REMOVED_IN", "RENAMED", "Renamed", "renamed_names"]

REMOVED_IN = "0.2.0"
"""The version that removes every alias listed in `RENAMED`."""


@dataclass(frozen=True)
class Renamed:
    """One renamed public name: `module.old` is now `new_module.new`."""

    module: str
    old: str
    new_module: str
    new: str

    @property
    def old_path(self) -> str:
        return f"{self.module}.{self.old}"

    @property
    def new_path(self) -> str:
        return f"{self.new_module}.{self.new}"


RENAMED: dict[str, Renamed] = {}
"""Every alias given by `renamed_names`, by its old dotted path (filled as modules load)."""


def renamed_names(
    module: str,
    renames: Mapping[str, str],
    *,
    new_module: str | None = None,
    fallback: Callable[[str], object] | None = None,
) -> Callable[[str], object]:
    """A module `__getattr__` that gives each old name in `renames` (old -> new) as the new
    object, found in `new_module` (default: `module` itself), with a warning; any other
    name goes to `fallback` (the module's own `__getattr__`, e.g. its lazy exports)."""
    target = new_module or module
    for old, new in renames.items():
        entry = Renamed(module, old, target, new)
        RENAMED[entry.old_path] = entry

    def __getattr__(name: str) -> object:
        new = renames.get(name)
        if new is None:
            if fallback is not None:
                return fallback(name)
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        warnings.warn(
            f"{module}.{name} is renamed {target}.{new}; the old name is removed in "
            f"prefixkit {REMOVED_IN}",
            PrefixkitDeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(target), new)

    return __getattr__
