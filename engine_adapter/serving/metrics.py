"""The gateway's own Prometheus counters, and where they are kept.

What the serving app exports beside the engines' metrics (`exposition` writes each family):

* per tenant (`tenant_usage.TenantUsage`): ``prefixkit_tenant_requests_total``,
  ``prefixkit_tenant_prompt_tokens_total``, ``prefixkit_tenant_cached_tokens_total``;
* the routing stage's decisions (`RouterCounters`): ``prefixkit_router_decisions_total``
  by ``outcome`` (`OUTCOMES`), and how a generation request's tokens were found:
  ``prefixkit_router_tokenized_here_total`` (in the router) and
  ``prefixkit_router_tokenize_fallbacks_total`` (a replica's ``/tokenize``);
* per replica, ``prefixkit_replica_up``: 1 when its ``/metrics`` answered the scrape this
  exposition was made of, else 0 (`replica_up`).

The counts live in `Counters`: in the process's memory, or, with several router workers
(each a process of its own), in `SharedCounters`: a file every worker maps, one row per
worker written only by its worker, a value being the sum of the rows. Whichever worker
answers ``GET /metrics`` shows the whole deployment's counts, and a restarted worker keeps
adding to its row, so no counter goes down.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from .shared_file import SharedFile

__all__ = [
    "COUNTERS_FILE",
    "OUTCOMES",
    "TENANT_COUNTS",
    "Counters",
    "RouterCounters",
    "SharedCounters",
    "counter_keys",
    "exposition",
    "label",
    "replica_up",
]

Key = tuple[str, ...]

COUNTERS_FILE = "router-workers.counters"  # in the run directory, beside the load table
# a tenant's counts, in `TenantUsage`'s order
TENANT_COUNTS = ("requests", "prompt_tokens", "cached_tokens")
# how the routing stage placed a generation request:
# prefix: on a replica holding the start of its prompt; load: no replica held any of it,
# placed by load; pinned: on the replica an operator named; replaced: placed again after
# its replica refused the connection; smg: handed to SMG, which decides itself
OUTCOMES = ("prefix", "load", "pinned", "replaced", "smg")
_TOKENIZED = ("here", "fallbacks")
_CELL = 8  # bytes: an int64


def counter_keys(tenants: Sequence[str]) -> list[Key]:
    """Every counter of a deployment with `tenants`, in the order `SharedCounters` lays
    them out."""
    return [
        *(("tenant", tenant, count) for tenant in tenants for count in TENANT_COUNTS),
        *(("decision", outcome) for outcome in OUTCOMES),
        *(("tokenized", where) for where in _TOKENIZED),
    ]


class Counters:
    """Counters by key, in this process's memory; a key starts at 0."""

    def __init__(self) -> None:
        self._values: dict[Key, int] = {}

    def add(self, key: Key, amount: int = 1) -> None:
        self._values[key] = self._values.get(key, 0) + amount

    def value(self, key: Key) -> int:
        return self._values.get(key, 0)

    async def refresh(self) -> None:
        """Bring `value` up to date (counts kept elsewhere: `ray.counters.ActorCounters`);
        this process's own are."""


class SharedCounters(Counters):
    """The counters of `workers` processes in the file at `path` (module docstring): this
    process is worker `worker` and adds to its own row only; `value` sums every row. A key
    not in `counter_keys(tenants)` is counted in this process only."""

    def __init__(self, path: Path, workers: int, worker: int, tenants: Sequence[str]) -> None:
        super().__init__()
        keys = counter_keys(tenants)
        self._columns = {key: column for column, key in enumerate(keys)}
        self._width = len(keys)
        self._rows = [w * self._width for w in range(workers)]
        self._own = worker * self._width
        size = max(workers * self._width, 1) * _CELL
        self._shared = SharedFile(path, size)
        self._cells = memoryview(self._shared.map).cast("q")

    @classmethod
    def create(cls, path: Path, workers: int, tenants: Sequence[str]) -> None:
        """A file of zeros at `path` for `workers` workers (an older one is replaced)."""
        path.unlink(missing_ok=True)
        cls(path, workers, 0, tenants).close()

    def add(self, key: Key, amount: int = 1) -> None:
        column = self._columns.get(key)
        if column is None:
            super().add(key, amount)
        else:
            self._cells[self._own + column] += amount  # this worker's cell: no other writer

    def value(self, key: Key) -> int:
        column = self._columns.get(key)
        if column is None:
            return super().value(key)
        return sum(self._cells[row + column] for row in self._rows)

    def close(self) -> None:
        self._cells.release()
        self._shared.close()


class RouterCounters:
    """The routing stage's decisions by outcome and its tokenizations (module docstring)."""

    def __init__(self, counters: Counters) -> None:
        self.counters = counters
        self._seen = dict.fromkeys(_TOKENIZED, 0)

    def decided(self, outcome: str) -> None:
        """One generation request placed with `outcome` (one of `OUTCOMES`)."""
        self.counters.add(("decision", outcome))

    def tokenized(self, here: int, fallbacks: int) -> None:
        """This process's router has tokenized `here` requests itself and asked a replica
        for `fallbacks` so far: the counters get what is new since the last call."""
        for where, total in zip(_TOKENIZED, (here, fallbacks), strict=True):
            if total > self._seen[where]:
                self.counters.add(("tokenized", where), total - self._seen[where])
            self._seen[where] = total

    def exposition(self) -> str:
        value = self.counters.value
        return (
            exposition(
                "prefixkit_router_decisions_total",
                "counter",
                "Generation requests the routing stage placed, by how it placed them",
                [({"outcome": outcome}, value(("decision", outcome))) for outcome in OUTCOMES],
            )
            + exposition(
                "prefixkit_router_tokenized_here_total",
                "counter",
                "Generation requests whose prompt tokens the router computed itself",
                [({}, value(("tokenized", "here")))],
            )
            + exposition(
                "prefixkit_router_tokenize_fallbacks_total",
                "counter",
                "Generation requests whose prompt tokens the router asked a replica's "
                "/tokenize for",
                [({}, value(("tokenized", "fallbacks")))],
            )
        )


def replica_up(answered: Sequence[bool]) -> str:
    """``prefixkit_replica_up``: per replica, whether its ``/metrics`` answered."""
    return exposition(
        "prefixkit_replica_up",
        "gauge",
        "1 when the replica answered the gateway's scrape of its /metrics, else 0",
        [({"replica": str(index)}, int(ok)) for index, ok in enumerate(answered)],
    )


def exposition(
    name: str, kind: str, help_text: str, samples: Iterable[tuple[dict[str, str], int]]
) -> str:
    """One metric family in Prometheus text: its HELP and TYPE lines, then its samples."""
    lines = [f"# HELP {name} {help_text}.", f"# TYPE {name} {kind}"]
    for labels, value in samples:
        pairs = ",".join(f'{key}="{label(text)}"' for key, text in labels.items())
        lines.append(f"{name}{{{pairs}}} {value}" if pairs else f"{name} {value}")
    return "\n".join(lines) + "\n"


def label(value: str) -> str:
    """`value` escaped as a Prometheus label value."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
