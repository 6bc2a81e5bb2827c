"""Glob patterns over POSIX paths relative to the project root (`**`, `*`, `?`, `{a,b}`):
the prompt globs and `per-file-ignores` patterns of the settings."""

from __future__ import annotations

import functools
import re

__all__ = ["glob_matches"]


def _expand_braces(pattern: str) -> list[str]:
    match = re.search(r"\{([^{}]*)\}", pattern)
    if match is None:
        return [pattern]
    head, tail = pattern[: match.start()], pattern[match.end() :]
    return [
        expanded
        for choice in match.group(1).split(",")
        for expanded in _expand_braces(head + choice + tail)
    ]


@functools.lru_cache(maxsize=256)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    alternatives = []
    for expanded in _expand_braces(pattern):
        out = []
        index = 0
        while index < len(expanded):
            if expanded.startswith("**/", index):
                out.append("(?:.*/)?")
                index += 3
            elif expanded.startswith("**", index):
                out.append(".*")
                index += 2
            elif expanded[index] == "*":
                out.append("[^/]*")
                index += 1
            elif expanded[index] == "?":
                out.append("[^/]")
                index += 1
            else:
                out.append(re.escape(expanded[index]))
                index += 1
        alternatives.append("".join(out))
    return re.compile("(?:" + "|".join(alternatives) + ")")


def glob_matches(pattern: str, relative_path: str) -> bool:
    """Whether a POSIX relative path matches a glob (`**`, `*`, `?`, `{a,b}`).

    A pattern without a `/` also matches the file name alone (`*.md`).
    """
    regex = _glob_regex(pattern)
    if regex.fullmatch(relative_path):
        return True
    return "/" not in pattern and regex.fullmatch(relative_path.rsplit("/", 1)[-1]) is not None
