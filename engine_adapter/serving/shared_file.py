"""A file the router workers and their parent map into memory: the counters, the load table
and the placements log (`metrics`, `workers`, `placements`) each lay out their cells in one.

`SharedFile(path, size)` opens the file (made at `size` bytes if it is new or of another
size; a file of that size keeps its bytes) and maps it whole (`map`); `locked` holds an
exclusive lock among the processes that opened it, released by the kernel if one dies
while holding it.
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
from collections.abc import Iterator
from pathlib import Path

__all__ = ["SharedFile"]


class SharedFile:
    """`size` bytes at `path`, mapped into this process (module docstring)."""

    def __init__(self, path: Path, size: int) -> None:
        self.path = path
        self._file = path.open("r+b") if path.exists() else path.open("w+b")
        try:
            if path.stat().st_size != size:
                self._file.truncate(size)
            self.map = mmap.mmap(self._file.fileno(), size)
        except BaseException:
            self._file.close()
            raise

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Exclusive among the processes that opened the file (released if one dies)."""
        fcntl.flock(self._file.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)

    def close(self) -> None:
        """Unmap and close (every view of `map` released first)."""
        self.map.close()
        self._file.close()
