"""MkDocs hook: make the source folders importable as `prefixkit.*` for mkdocstrings.

The repository keeps each part in a top-level folder (`sdk/`, `linter/`, ...) that
pyproject.toml maps into the `prefixkit` namespace. mkdocstrings reads sources, not an
installed package, so this hook links the folders under `build/docs-src/prefixkit/`
(git-ignored) before any page is rendered; mkdocs.yml points the Python handler there.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from mkdocs.plugins import event_priority

PARTS = ("sdk", "linter", "engine_adapter", "cli", "testing")
STAGING = Path("build") / "docs-src" / "prefixkit"


# Before mkdocstrings' own on_config, which drops search paths that do not exist yet.
@event_priority(100)
def on_config(config: Any) -> Any:
    root = Path(config.config_file_path).resolve().parent
    staging = root / STAGING
    staging.mkdir(parents=True, exist_ok=True)
    for part in PARTS:
        link = staging / part
        target = os.path.relpath(root / part, staging)
        if link.is_symlink() and os.readlink(link) == target:
            continue
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(target, target_is_directory=True)
    return config
