"""prefixkit.linter: static checks for content that breaks prompt caching.

The public API of the linter is this package: the names in its `__all__`. Every module
in it (`prefixkit.linter.lint_file`, `prefixkit.linter.analysis.taint`, ...) is internal and may
change without notice.

    >>> from prefixkit.linter import lint_source
    >>> source = '''
    ... import time
    ... def ask(client, question):
    ...     system = f"Answer briefly. Time: {time.time()}"
    ...     return client.messages.create(system=system, messages=[question])
    ... '''
    >>> [(finding.code, finding.location) for finding in lint_source(source, "app.py")]
    [('PFX001', 'app.py:4:39')]

`lint_source` lints one file's text; `lint_paths` lints files on disk (each with the
settings above it, or one `LintConfig`; with `fix`, `jobs` and the re-lint cache) and
gives a `FileOutcome` per file, whose `findings` are `Finding`s. `load_config` reads the
settings (`find_config` finds the file that applies to a folder) into a `LintConfig`,
raising `LintConfigError`; a notebook that cannot be read is a `NotebookError`.
`RULE_CODES` are the codes of every rule.

Each name is imported on first use, so `from prefixkit.linter import LintConfig` does
not import libcst or the rules. Importing the package raises `MissingExtraError` when
the `lint` extra is not installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prefixkit.sdk import require_extra
from prefixkit.sdk.exports import lazy_exports

require_extra("lint", "prefixkit.linter (prefixkit lint)", "libcst", "pathspec", "yaml")

if TYPE_CHECKING:
    from .config import LintConfig as LintConfig
    from .config import LintConfigError as LintConfigError
    from .config import find_config as find_config
    from .config import load_config as load_config
    from .finding import Edit as Edit
    from .finding import Finding as Finding
    from .finding import Fix as Fix
    from .finding import Position as Position
    from .lint_file import lint_source as lint_source
    from .lint_many import lint_paths as lint_paths
    from .notebook import NotebookError as NotebookError
    from .outcome import FileOutcome as FileOutcome
    from .rule_codes import RULE_CODES as RULE_CODES

_EXPORTS: dict[str, str] = {
    "lint_source": "lint_file",
    "lint_paths": "lint_many",
    "FileOutcome": "outcome",
    "Finding": "finding",
    "Position": "finding",
    "Edit": "finding",
    "Fix": "finding",
    "LintConfig": "config",
    "load_config": "config",
    "find_config": "config",
    "LintConfigError": "config",
    "NotebookError": "notebook",
    "RULE_CODES": "rule_codes",
}

__all__ = list(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
