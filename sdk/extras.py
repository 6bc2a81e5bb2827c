"""Optional parts of prefixkit and the extra that installs each: `require_extra` gives one
clear error, naming the extra, when a part is used without it."""

from __future__ import annotations

import importlib.util

from .errors import MissingExtraError

__all__ = ["require_extra"]


def require_extra(extra: str, part: str, *modules: str) -> None:
    """Raise `MissingExtraError` unless every top-level module in `modules` is installed;
    `part` names what needs them (``"prefixkit lint"``), `extra` what installs them."""
    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    if missing:
        raise MissingExtraError(
            f"{part} needs {', '.join(missing)}, which this installation lacks: "
            f"pip install 'prefixkit[{extra}]'",
            extra=extra,
            missing=missing,
        )
