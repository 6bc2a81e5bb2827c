"""One door per part: a package re-exports its public names from its modules, each imported
on first use (PEP 562), from one map of name -> module.

    _EXPORTS = {"Prompt": "prompt", "render_vllm": "render_vllm", ...}
    __all__ = list(_EXPORTS)
    __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

`from prefixkit.sdk import Prompt` then imports the modules `Prompt` needs, not the whole
part. Type checkers read the same names from the package's `if TYPE_CHECKING:` imports
(`from .prompt import Prompt as Prompt`); the test suite checks that those imports,
`_EXPORTS`, `__all__` and the API reference pages name the same things.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from types import ModuleType

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The module `__getattr__` and `__dir__` of `package`, which exports each name of
    `exports` from its module (relative to the package, or absolute if it starts with
    ``prefixkit.``)."""
    namespace = vars(sys.modules[package])

    def __getattr__(name: str) -> object:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        source = module if module.startswith("prefixkit.") else f"{package}.{module}"
        value = getattr(importlib.import_module(source), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *exports})

    sys.modules[package].__class__ = _Package
    return __getattr__, __dir__


class _Package(ModuleType):
    """A package with lazy exports: importing a submodule named like a public function
    (`render_anthropic`, `break_even`) does not bind the module over the function."""

    def __setattr__(self, name: str, value: object) -> None:
        if isinstance(value, ModuleType) and name in _exported(self):
            return
        super().__setattr__(name, value)


def _exported(package: ModuleType) -> set[str]:
    return set(vars(package).get("__all__", ()))
