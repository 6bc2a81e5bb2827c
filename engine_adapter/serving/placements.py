"""The router workers' placements, shared: every worker sees every request the others place.

Each router worker routes with its own `RouterState`. For the workers to decide as one
router would, each must know what the others placed: the blocks of their requests in
flight (coming to a replica before its engine reports them), the blocks they touched (the
replicas' LRU order), the work each replica was given (the work budget) and the prompts
they routed (the reuse model). `PlacementLog` carries that, in a file every worker maps
into memory (``run_dir/router-workers.placements``):

* the fleet's request counter (cell 0): every request gets a number no other worker used,
  in the order they were placed, taken under a file lock (`next_request`);
* per worker, a ring of 64-bit cells that only its worker writes, and a header: the
  ring's epoch (raised by the parent when the worker is restarted: odd while it resets the
  ring, even again once done, so that a reader never takes a half-reset ring) and how many
  cells were ever written. A record is ``[tag, replica, request, run, hashes...]`` for a placement
  (tag = blocks << 2 | ROUTED or PINNED) and ``[ENDED, replica, request]`` for its end.

`PlacementReader` follows the other workers' rings: `news` returns what each wrote since
the last call. A ring read after its worker wrote more than the ring holds since the last
call (the reader was idle too long), or whose epoch changed (its worker died and its
requests with it), ends every placement of that worker the reader knew; from then on the
engines' KV events tell what the replicas hold, as they do for a single worker.
"""

from __future__ import annotations

import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .shared_file import SharedFile

__all__ = [
    "PLACEMENTS_FILE",
    "PeerEnded",
    "PeerPlaced",
    "PlacementLog",
    "PlacementReader",
]

PLACEMENTS_FILE = "router-workers.placements"
RING_CELLS = 1 << 18  # per worker: 2 MiB, a few thousand requests' blocks
_HEADER = 2  # epoch, cells written
_ROUTED, _PINNED, _ENDED = 1, 2, 3
_PLACED_FIELDS = 4  # tag, replica, request, run
_CELL = 8


@dataclass(frozen=True)
class PeerPlaced:
    """Another worker placed request `request` (its blocks `hashes`, `run` of them cached
    there) on `replica`; `routed`: by the policy (False: pinned by an operator)."""

    replica: int
    hashes: tuple[int, ...]
    run: int
    request: int
    routed: bool


@dataclass(frozen=True)
class PeerEnded:
    """A placement of another worker ended (finished, failed, or its worker died)."""

    replica: int
    hashes: tuple[int, ...]


class PlacementLog:
    """The placements file (module docstring), opened by one worker or by the parent."""

    def __init__(self, path: Path, workers: int) -> None:
        self.path = path
        self.workers = workers
        size = (1 + workers * (_HEADER + RING_CELLS)) * _CELL
        self._shared = SharedFile(path, size)
        self.cells = memoryview(self._shared.map).cast("Q")

    @classmethod
    def create(cls, path: Path, workers: int) -> PlacementLog:
        """A new log of zeros at `path` (an older file there is replaced)."""
        path.unlink(missing_ok=True)
        return cls(path, workers)

    def header(self, worker: int) -> int:
        """The cell where `worker`'s epoch is; its count of cells written follows, then its ring."""
        return 1 + worker * (_HEADER + RING_CELLS)

    def next_request(self) -> int:
        """A request number no worker has used yet (1, 2, ... in the order asked)."""
        with self._shared.locked():
            number: int = self.cells[0] + 1
            self.cells[0] = number
        return number

    def restarted(self, worker: int) -> None:
        """`worker` died and is started again: its ring starts over in a new epoch (the
        others end the placements they knew of it)."""
        at = self.header(worker)
        self.cells[at] += 1  # odd: being reset
        self.cells[at + 1] = 0
        self.cells[at] += 1

    def write(self, worker: int, record: Sequence[int]) -> None:
        """Append `record` to `worker`'s ring (only that worker calls this)."""
        at = self.header(worker)
        written: int = self.cells[at + 1]
        start = at + _HEADER
        position = written % RING_CELLS
        first = min(len(record), RING_CELLS - position)
        values = array.array("Q", record)
        self.cells[start + position : start + position + first] = values[:first]
        if first < len(record):
            self.cells[start : start + len(record) - first] = values[first:]
        self.cells[at + 1] = written + len(record)

    def placed(
        self, worker: int, replica: int, hashes: Sequence[int], run: int, request: int, routed: bool
    ) -> None:
        """Worker `worker` placed a request. A prompt of more blocks than half a ring is
        shared by its first half-ring of blocks (what the others count as coming)."""
        kept = hashes[: RING_CELLS // 2 - _PLACED_FIELDS]
        tag = len(kept) << 2 | (_ROUTED if routed else _PINNED)
        self.write(worker, [tag, replica, request, min(run, len(kept)), *kept])

    def ended(self, worker: int, replica: int, request: int) -> None:
        self.write(worker, [_ENDED, replica, request])

    def close(self) -> None:
        self.cells.release()
        self._shared.close()


@dataclass
class _Ring:
    """What a reader knows of one other worker's ring."""

    epoch: int = 0
    read: int = 0  # cells consumed
    # its placements in flight: request -> (replica, hashes)
    placements: dict[int, tuple[int, tuple[int, ...]]] = field(default_factory=dict)


class PlacementReader:
    """Worker `worker`'s view of the other workers' rings in `log`."""

    def __init__(self, log: PlacementLog, worker: int) -> None:
        self.log = log
        self.rings = {w: _Ring() for w in range(log.workers) if w != worker}

    def news(self) -> list[PeerPlaced | PeerEnded]:
        """What the other workers placed and ended since the last call, in their order."""
        news: list[PeerPlaced | PeerEnded] = []
        for worker, ring in self.rings.items():
            news.extend(self._ring_news(worker, ring))
        return news

    def _ring_news(self, worker: int, ring: _Ring) -> list[PeerPlaced | PeerEnded]:
        cells = self.log.cells
        at = self.log.header(worker)
        epoch = cells[at]
        written = cells[at + 1]
        if epoch & 1 or cells[at] != epoch:
            return []  # its ring is being reset: read it next time
        if epoch != ring.epoch:
            lost = self._forget(ring)
            ring.epoch, ring.read = epoch, 0
            return lost + self._ring_news(worker, ring)
        if written == ring.read:
            return []
        if written - ring.read > RING_CELLS:
            lost = self._forget(ring)
            ring.read = written
            return lost
        start = at + _HEADER
        begin, end = ring.read % RING_CELLS, written % RING_CELLS
        if begin < end:
            copied = cells[start + begin : start + end].tolist()
        else:
            copied = cells[start + begin : start + RING_CELLS].tolist()
            copied += cells[start : start + end].tolist()
        if cells[at] != epoch or cells[at + 1] - ring.read > RING_CELLS:
            return self._ring_news(worker, ring)  # overwritten while copied: read again
        ring.read = written
        return self._parsed(copied, ring)

    def _parsed(self, cells: list[int], ring: _Ring) -> list[PeerPlaced | PeerEnded]:
        news: list[PeerPlaced | PeerEnded] = []
        index = 0
        while index < len(cells):
            tag, replica, request = cells[index], cells[index + 1], cells[index + 2]
            kind = tag & 3
            if kind == _ENDED:
                index += 3
                known = ring.placements.pop(request, None)
                if known is not None:
                    news.append(PeerEnded(*known))
                continue
            blocks = tag >> 2
            run = cells[index + 3]
            hashes = tuple(cells[index + _PLACED_FIELDS : index + _PLACED_FIELDS + blocks])
            index += _PLACED_FIELDS + blocks
            ring.placements[request] = (replica, hashes)
            news.append(PeerPlaced(replica, hashes, run, request, kind == _ROUTED))
        return news

    @staticmethod
    def _forget(ring: _Ring) -> list[PeerPlaced | PeerEnded]:
        lost: list[PeerPlaced | PeerEnded] = [
            PeerEnded(replica, hashes) for replica, hashes in ring.placements.values()
        ]
        ring.placements.clear()
        return lost
