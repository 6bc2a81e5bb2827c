"""One door per part: a package re-exports its public names from its modules, each imported
on first use (PEP 562), from one map of name -> module.

    _EXPORTS = {"Prompt": "prompt", "render_vllm": "vllm_request", ...}
    __all__ = list(_EXPORTS)
    __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

`from prefixkit.sdk import Prompt` then imports the modules `Prompt` needs, not the whole
part. No module of a part is named like one of its exports (a submodule, once imported,
would be bound over the name). Type checkers read the same names from the package's `if TYPE_CHECKING:` imports
(`from .prompt import Prompt as Prompt`); the test suite checks that those imports,
`_EXPORTS`, `__all__` and the API reference pages name the same things.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping

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

    return __getattr__, __dir__
