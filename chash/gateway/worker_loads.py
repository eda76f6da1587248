"""Per-backend loads kept across the worker processes of one gateway
(``--workers N`` with ``--affinity prefix``).

Completions are routed on each backend's requests in flight and queued
prefill (``chash.gateway.llm``).  With ``--workers N`` every worker takes
its share of the connections, so each must route on what all N have in
flight, not on its own share.  ``WorkerLoads`` is a table in memory the
supervisor maps (anonymous, shared) before it forks the workers, so every
worker sees the same bytes; no server, no lock on the request path.

The table, in 8-byte cells:

- a header: the layout's mark, the worker count, the capacity (slots) and
  the slots taken so far;
- a slot map: for each slot taken, the 16-byte BLAKE2b digest of its
  node's name.  A worker finds a node's slot there once (under a lock
  made before the fork: only claiming a slot takes it) and remembers it;
  a node keeps its slot for the gateway's life, so a node removed by a
  reload or the membership and added back finds its old slot, and every
  worker, whatever order its ring learnt the nodes in, agrees on it;
- one row per worker, written by that worker alone: its completions
  routed (prefix, session, least-loaded), then each slot's pair of
  cells, requests in flight and tokens of queued prefill (whole tokens).

A worker writes its own cells as its counts change (one store each, no
lock: one writer per cell); a reader adds the N rows up, a slice of each
row read at once (a few microseconds at 16 backends and 2 workers).  An
aligned 8-byte cell is read and written whole on the machines Python runs
on, so a reader sees a cell's value before or after a change, never a
mix.  A worker attaching to its row zeroes it first: a worker process
started again in a row never adds its predecessor's counts.

A full table (``capacity`` nodes met over the gateway's life) leaves a
node met afterwards unshared: each worker routes on its own counts for
it, which is logged once (an error) and shown in the status
(``unshared``).

With ``--redis`` as well (``chash.gateway.shared_loads``), the gateway is
one replica: worker 0 publishes the table's sums (every worker's counts)
under the gateway's name, and every worker adds the other gateways'.
"""

from __future__ import annotations

import hashlib
import logging
import mmap
import multiprocessing
import operator
import os
import socket
import uuid
from collections.abc import Iterable
from typing import Any

__all__ = ["CAPACITY", "HOWS", "LOCK_TIMEOUT", "SharedCounts", "WorkerLoads", "WorkerRow"]

logger = logging.getLogger("chash.gateway")

#: Nodes a table holds by default (over the gateway's life).
CAPACITY = 1024
#: Seconds a worker waits for the slot map's lock before it gives up.
LOCK_TIMEOUT = 5.0
#: How completions are routed, in the order of a row's first cells.
HOWS = ("prefix", "session", "least-loaded")
_MARK = int.from_bytes(b"chashWL1", "little")
_HEADER = 8  # cells: mark, workers, capacity, used, then room
_USED = 3
_ROW_HEAD = 8  # cells of a row before its slots: the routed counts, then room
_DIGEST = 16


def _digest(node: str) -> bytes:
    return hashlib.blake2b(node.encode("utf-8", "surrogatepass"), digest_size=_DIGEST).digest()


class WorkerLoads:
    """The table of a gateway's ``workers`` processes; see the module
    docstring.  Made before the fork (its memory is inherited, shared);
    each worker then takes its row with ``row(index)``.  ValueError for
    fewer than 1 worker or slot.

    Shared by the processes: a row is written by its worker alone, read by
    all without a lock; the slot map is changed only under the lock."""

    def __init__(self, workers: int, capacity: int = CAPACITY) -> None:
        for what, value in (("workers", workers), ("capacity", capacity)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{what} must be an integer >= 1, not {value!r}")
        self.workers = workers
        self.capacity = capacity
        #: The gateway's name as a replica in Redis (every worker's).
        self.name = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._row_cells = _ROW_HEAD + 2 * capacity
        names = _HEADER * 8 + capacity * _DIGEST
        self._memory = mmap.mmap(-1, names + workers * self._row_cells * 8)
        whole = memoryview(self._memory)
        self._header = whole[:_HEADER * 8].cast("q")
        self._names = whole[_HEADER * 8:names]
        #: Every row's cells (8-byte integers), row after row.
        self.cells = whole[names:].cast("q")
        for index, value in enumerate((_MARK, workers, capacity, 0)):
            self._header[index] = value
        self._lock = multiprocessing.get_context("fork").Lock()

    @property
    def used(self) -> int:
        """Slots taken so far."""
        return int(self._header[_USED])

    def row(self, worker: int) -> WorkerRow:
        """Worker ``worker``'s row, zeroed (its counts start from none).
        ValueError for an index outside 0 .. workers-1."""
        if isinstance(worker, bool) or not isinstance(worker, int) \
                or not 0 <= worker < self.workers:
            raise ValueError(f"worker must be 0 .. {self.workers - 1}, not {worker!r}")
        start = worker * self._row_cells
        self.cells[start:start + self._row_cells] = _zeros(self._row_cells)
        return WorkerRow(self, worker)

    def slot(self, node: str) -> int:
        """``node``'s slot, taken if it has none; -1 when the table is full;
        TimeoutError when the lock stays held ``LOCK_TIMEOUT`` seconds (a
        worker killed while it took a slot)."""
        digest = _digest(node)
        if not self._lock.acquire(timeout=LOCK_TIMEOUT):
            raise TimeoutError(f"the slot map of the workers' loads stayed locked "
                               f"{LOCK_TIMEOUT:g} s")
        try:
            used = int(self._header[_USED])
            names = self._names[:used * _DIGEST].tobytes()
            at = names.find(digest)
            while at >= 0 and at % _DIGEST:
                at = names.find(digest, at + 1)
            if at >= 0:
                return at // _DIGEST
            if used == self.capacity:
                return -1
            self._names[used * _DIGEST:(used + 1) * _DIGEST] = digest
            self._header[_USED] = used + 1
            return used
        finally:
            self._lock.release()

    def sums(self, used: int) -> list[int]:
        """The first ``used`` slots' cells added over every row: in flight
        and queued tokens, alternately."""
        cells, step, width = self.cells, self._row_cells, 2 * used
        total = cells[_ROW_HEAD:_ROW_HEAD + width].tolist()
        for start in range(step + _ROW_HEAD, self.workers * step, step):
            total = list(map(operator.add, total, cells[start:start + width].tolist()))
        return total

    def rows(self, used: int) -> list[list[int]]:
        """Each row's routed counts and first ``used`` slots' cells."""
        step = self._row_cells
        return [self.cells[start:start + _ROW_HEAD + 2 * used].tolist()
                for start in range(0, self.workers * step, step)]

    def cell(self, worker: int, index: int) -> int:
        """The index of a row's cell in the cells (a slot's in-flight cell
        is ``_ROW_HEAD + 2 * slot``, its queued one the next)."""
        return worker * self._row_cells + index


def _zeros(cells: int) -> memoryview:
    return memoryview(bytes(8 * cells)).cast("q")


class SharedCounts(dict[str, int]):
    """Requests in flight by node (the proxy's counts), each change
    written through to this worker's row of the table as well.  One event
    loop's, as the proxy's counts are."""

    __slots__ = ("_row",)

    def __init__(self, row: WorkerRow) -> None:
        super().__init__()
        self._row = row

    def __setitem__(self, node: str, count: int) -> None:
        super().__setitem__(node, count)
        row = self._row
        cell = row.cell_of.get(node)
        if cell is None:
            cell = row.claim(node)
        if cell >= 0:
            row.table.cells[cell] = count


class WorkerRow:
    """One worker's part of a ``WorkerLoads``: its counts written to its
    row (``in_flight``, ``set_queued``, ``routed``), the sums of every row
    read (``totals``).  One event loop's (the worker's)."""

    def __init__(self, table: WorkerLoads, worker: int) -> None:
        self.table = table
        self.worker = worker
        #: Requests in flight by node, written through (give it to the proxy).
        self.in_flight = SharedCounts(self)
        #: ``{node: index of its in-flight cell in the table's cells}``, -1 for a
        #: node the full table has no slot for.
        self.cell_of: dict[str, int] = {}
        self._names: list[str | None] = []
        self._queued: dict[str, int] = {}
        self._routed = {how: table.cell(worker, i) for i, how in enumerate(HOWS)}
        #: Nodes without a slot (met once the table was full).
        self.unshared: list[str] = []

    def claim(self, node: str) -> int:
        """``node``'s in-flight cell in this row (its slot found or taken);
        -1, logged once, when the table is full (or its lock stays held)."""
        try:
            slot = self.table.slot(node)
        except TimeoutError as exc:
            slot, why = -1, str(exc)
        else:
            why = f"the table of loads shared by the workers is full ({self.table.capacity} nodes)"
        if slot < 0:
            cell = -1
            self.unshared.append(node)
            logger.error("%s: %r is routed on each worker's own counts", why, node)
        else:
            cell = self.table.cell(self.worker, _ROW_HEAD + 2 * slot)
            names = self._names
            names.extend([None] * (slot + 1 - len(names)))
            names[slot] = node
            # What this worker counted before the slot was known.
            self.table.cells[cell] = dict.get(self.in_flight, node, 0)
            self.table.cells[cell + 1] = self._queued.get(node, 0)
        self.cell_of[node] = cell
        return cell

    def set_queued(self, node: str, tokens: float) -> None:
        """This worker's queued prefill on ``node``, in tokens."""
        whole = self._queued[node] = round(tokens)
        cell = self.cell_of.get(node)
        if cell is None:
            cell = self.claim(node)
        if cell >= 0:
            self.table.cells[cell + 1] = whole

    def routed(self, how: str) -> None:
        """One more completion routed ``how`` (one of ``HOWS``) here."""
        index = self._routed[how]
        self.table.cells[index] += 1

    def know(self, nodes: Iterable[str]) -> None:
        """Find the slots of those of ``nodes`` this worker has not met."""
        known = self.cell_of
        for node in nodes:
            if node not in known:
                self.claim(node)

    def totals(self) -> tuple[dict[str, int], dict[str, int]]:
        """``(in flight, queued tokens)`` by node over every worker: the
        nodes this worker met (a node without a slot: its own counts)."""
        names = self._names
        sums = self.table.sums(len(names))
        loads: dict[str | None, int] = dict(zip(names, sums[0::2], strict=True))
        queued: dict[str | None, int] = dict(zip(names, sums[1::2], strict=True))
        loads.pop(None, None)  # slots of nodes this worker has not met
        queued.pop(None, None)
        for node in self.unshared:
            loads[node] = dict.get(self.in_flight, node, 0)
            queued[node] = self._queued.get(node, 0)
        return loads, queued  # type: ignore[return-value]  # None is out

    def status(self) -> dict[str, Any]:
        """What ``/-/status`` shows: the table's size and use, the nodes
        left unshared, and each worker's row (routed, in flight, queued)."""
        names = self._names
        workers = []
        for index, row in enumerate(self.table.rows(len(names))):
            cells = row[_ROW_HEAD:]
            workers.append({
                "worker": index,
                "routed": dict(zip(HOWS, row, strict=False)),
                "in_flight": {n: c for n, c in zip(names, cells[0::2], strict=True)
                              if n is not None and c},
                "queued_tokens": {n: c for n, c in zip(names, cells[1::2], strict=True)
                                  if n is not None and c}})
        return {"capacity": self.table.capacity, "used": self.table.used,
                "unshared": list(self.unshared), "rows": workers}

    def routed_totals(self) -> dict[str, int]:
        """Completions routed by how, over every worker."""
        rows = self.table.rows(0)
        return {how: sum(row[i] for row in rows) for i, how in enumerate(HOWS)}

