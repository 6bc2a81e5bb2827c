"""One error tree: every public exception of every prefixkit module derives from
`PrefixkitError` (every warning from `PrefixkitWarning`), and the tree drawn in
`prefixkit.sdk.errors` names it."""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil
import typing
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from prefixkit.sdk import errors
from prefixkit.sdk.errors import PrefixkitError, PrefixkitWarning

PACKAGES = ("sdk", "linter", "engine_adapter", "cli", "testing")


@functools.cache
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
    tree = errors.__doc__ or ""
    missing = [
        name
        for name, kind in _public_exceptions().items()
        if issubclass(kind, Exception) and kind.__name__ not in tree
    ]
    assert missing == []


def _errors_with_data() -> dict[str, type[BaseException]]:
    """Every public error but the root: each describes something specific."""
    return {
        name: kind
        for name, kind in _public_exceptions().items()
        if issubclass(kind, PrefixkitError) and kind is not PrefixkitError
    }


def test_every_error_takes_the_data_it_describes_as_typed_keyword_arguments() -> None:
    untyped = []
    for name, kind in _errors_with_data().items():
        parameters = inspect.signature(kind.__init__).parameters.values()
        data = [p for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY]
        if not data or any(p.annotation is inspect.Parameter.empty for p in data):
            untyped.append(name)
    assert untyped == [], "give each a keyword-only, annotated parameter per piece of data"


# paths as hypothesis cannot build them on its own (Path() takes no required argument)
st.register_type_strategy(Path, st.builds(Path, st.text("ab/._", min_size=1)))


@functools.cache
def _data_of(name: str) -> st.SearchStrategy[dict[str, object]]:
    """Values of each keyword-only parameter's annotated type, for the error named `name`."""
    kind = _errors_with_data()[name]
    hints = typing.get_type_hints(kind.__init__)
    parameters = inspect.signature(kind.__init__).parameters.values()
    return st.fixed_dictionaries(
        {p.name: st.from_type(hints[p.name]) for p in parameters if p.kind is p.KEYWORD_ONLY}
    )


@settings(max_examples=25)
@given(st.data())
def test_every_error_keeps_its_data_as_attributes_of_the_same_names(data: st.DataObject) -> None:
    for name, kind in _errors_with_data().items():
        given = data.draw(_data_of(name), label=name)
        error = kind("what went wrong and how to fix it", **given)
        for parameter, value in given.items():
            kept = getattr(error, parameter)
            as_tuple = tuple(value) if isinstance(value, list | tuple | set | frozenset) else value
            assert kept is value or kept in (value, as_tuple), (name, parameter)
        assert "what went wrong and how to fix it" in str(error)
