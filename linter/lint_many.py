"""Lint many files: results still valid in the re-lint cache first, the rest in
this process or a process pool, in input order.

This module imports no rule and no parser: a run whose every file is a cache
hit never imports libcst or the rules (`prefixkit.linter.lint_file` is imported
only for the files to lint), so an unchanged re-lint costs little more than the
interpreter's start-up.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from .config import ConfigResolver, LintConfig
from .discovery import Target, file_kind
from .outcome import FileOutcome
from .rule_codes import RULE_CODES

if TYPE_CHECKING:
    from .result_cache import ResultCache

__all__ = ["lint_paths", "lint_targets"]


def lint_targets(
    targets: Sequence[Target],
    fix: bool = False,
    jobs: int = 1,
    cache: Callable[[LintConfig], ResultCache | None] | None = None,
    unsafe_fixes: bool = False,
) -> list[FileOutcome]:
    """Lint files, `jobs` processes at a time (1: in this process), in input order.

    `cache` gives the result cache for a config (None: no cache); files whose
    cached result still holds are not linted again (`--fix` always lints).
    """
    outcomes: list[FileOutcome | None] = [None] * len(targets)
    caches: dict[int, ResultCache | None] = {}

    def cache_of(config: LintConfig) -> ResultCache | None:
        if cache is None:
            return None
        if id(config) not in caches:
            caches[id(config)] = cache(config)
        return caches[id(config)]

    missing: list[int] = []
    for position, target in enumerate(targets):
        store = None if fix else cache_of(target.config)
        hit = store.lookup(target) if store is not None else None
        if hit is not None:
            outcomes[position] = hit
        else:
            missing.append(position)
    fresh = _lint_many([targets[p] for p in missing], fix, jobs, unsafe_fixes) if missing else []
    for position, outcome in zip(missing, fresh, strict=True):
        outcomes[position] = outcome
        store = cache_of(targets[position].config)
        if store is not None:
            store.store(targets[position], outcome)
    for store in caches.values():
        if store is not None:
            store.save()
    return [outcome for outcome in outcomes if outcome is not None]


def _lint_many(
    targets: list[Target], fix: bool, jobs: int, unsafe_fixes: bool
) -> list[FileOutcome]:
    from .lint_file import lint_batch

    if jobs <= 1 or len(targets) < 2:
        return lint_batch(targets, fix, unsafe_fixes)
    jobs = min(jobs, len(targets))
    chunk = max(1, len(targets) // (jobs * 4))
    batches = [targets[i : i + chunk] for i in range(0, len(targets), chunk)]
    outcomes: list[FileOutcome] = []
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        flags = [fix] * len(batches), [unsafe_fixes] * len(batches)
        for batch in pool.map(lint_batch, batches, *flags):
            outcomes += batch
    return outcomes


def lint_paths(
    paths: Iterable[Path],
    config: LintConfig | None = None,
    fix: bool = False,
    jobs: int = 1,
    cache: Callable[[LintConfig], ResultCache | None] | None = None,
    unsafe_fixes: bool = False,
) -> list[FileOutcome]:
    """Lint files, `jobs` processes at a time (1: in this process), one outcome per file
    in input order.

    Each file is linted with `config`, or without one with the settings that apply to
    it (the nearest config file above it, as `prefixkit lint` finds them). With `fix`
    the safe fixes are written to the files (with `unsafe_fixes` the unsafe ones too).
    `cache` gives the re-lint cache for a config (None: every file is linted).
    """
    resolver = ConfigResolver(frozenset(RULE_CODES))
    targets = []
    for path in paths:
        settings = config or resolver.for_path(path)
        targets.append(Target(path, settings, file_kind(path, settings, named=True) or "other"))
    return lint_targets(targets, fix, jobs, cache, unsafe_fixes)
