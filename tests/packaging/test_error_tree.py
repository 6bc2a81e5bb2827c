"""One error tree: every public exception of every prefixkit module derives from
`PrefixkitError` (every warning from `PrefixkitWarning`), and the tree drawn in
`prefixkit.sdk.errors` names it."""

from __future__ import annotations

import importlib
import pkgutil

import prefixkit.sdk.errors
from prefixkit.sdk.errors import PrefixkitError, PrefixkitWarning

PACKAGES = ("sdk", "linter", "engine_adapter", "cli", "testing")


def _public_exceptions() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for name in PACKAGES:
        package = importlib.import_module(f"prefixkit.{name}")
        modules = [package.__name__] + [
            info.name for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}.")
        ]
        for module_name in modules:
            module = importlib.import_module(module_name)
            for attribute in getattr(module, "__all__", ()):
                value = getattr(module, attribute)
                if isinstance(value, type) and issubclass(value, BaseException):
                    found[f"{value.__module__}.{value.__name__}"] = value
    return found


def test_every_public_exception_derives_from_the_root() -> None:
    exceptions = _public_exceptions()
    assert len(exceptions) >= 25
    strays = [
        name
        for name, kind in exceptions.items()
        if not issubclass(kind, PrefixkitWarning if issubclass(kind, Warning) else PrefixkitError)
    ]
    assert strays == []


def test_the_drawn_tree_names_every_error() -> None:
    tree = prefixkit.sdk.errors.__doc__ or ""
    missing = [
        name
        for name, kind in _public_exceptions().items()
        if issubclass(kind, Exception) and kind.__name__ not in tree
    ]
    assert missing == []
