"""Consistent hashing with bounded loads (Mirrokni, Thorup, Zadimoghaddam).

Plain consistent hashing ignores live load: a hot key range can pile
requests onto one node.  With a balance factor ``c`` no node may hold more
than ``ceil(c * (in_flight + 1) / n)`` requests at once; a key goes to the
first node of its preference list that is below that bound, so under light
load every key still goes to its ring owner, and under heavy load the
overflow spills to the next nodes clockwise, never anywhere random.
"""
from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

__all__ = ["BoundedLoadRouter"]


class _Ring(Protocol):
    def __len__(self) -> int: ...
    def get_target_node(self, request_key: str | bytes, /) -> str | None: ...
    def get_preference_list(self, key: str | bytes, n: int, /) -> list[str]: ...


class BoundedLoadRouter:
    """Routes keys through ``router`` while capping each node's in-flight load.

    Thread-safe.  Every ``acquire`` must be paired with one ``release`` of the
    node it returned (``route()`` does both).  Nodes removed from the
    underlying router keep their in-flight count until released, and are
    never chosen again.
    """

    def __init__(self, router: _Ring, balance_factor: float = 1.25) -> None:
        if isinstance(balance_factor, bool) or not isinstance(balance_factor, (int, float)):
            raise TypeError(f"balance_factor must be a number, not {type(balance_factor).__name__}")
        if not math.isfinite(balance_factor) or balance_factor < 1.0:
            raise ValueError(f"balance_factor must be a finite number >= 1, not {balance_factor!r}")
        self.router = router
        self.balance_factor = float(balance_factor)
        self._loads: dict[str, int] = {}
        self._total = 0
        self._lock = threading.Lock()

    def _bound(self, nodes: int) -> int:
        return math.ceil(self.balance_factor * (self._total + 1) / nodes)

    def bound(self) -> int:
        """The most in-flight requests any node may hold after the next acquire."""
        with self._lock:
            return self._bound(max(1, len(self.router)))

    def acquire(self, key: str | bytes) -> str:
        """The node to serve ``key`` now; its load goes up by one.

        Raises LookupError when the ring is empty.
        """
        with self._lock:
            count = len(self.router)
            owner = self.router.get_target_node(key)
            if owner is None or count == 0:
                raise LookupError("cannot route: the ring has no nodes")
            limit = self._bound(count)
            chosen = owner
            if self._loads.get(owner, 0) >= limit:
                # Some node is below the bound: the loads of the count nodes
                # sum to at most total < count * limit.
                for node in self.router.get_preference_list(key, count):
                    if self._loads.get(node, 0) < limit:
                        chosen = node
                        break
            self._loads[chosen] = self._loads.get(chosen, 0) + 1
            self._total += 1
            return chosen

    def release(self, node: str) -> None:
        """Ends one request on ``node``; ValueError if it holds none."""
        with self._lock:
            held = self._loads.get(node, 0)
            if held <= 0:
                raise ValueError(f"node {node!r} holds no acquired request")
            if held == 1:
                del self._loads[node]
            else:
                self._loads[node] = held - 1
            self._total -= 1

    @contextmanager
    def route(self, key: str | bytes) -> Iterator[str]:
        """``with bounded.route(key) as node:`` acquires and always releases."""
        node = self.acquire(key)
        try:
            yield node
        finally:
            self.release(node)

    @property
    def loads(self) -> dict[str, int]:
        """In-flight requests per node (nodes holding none are left out)."""
        with self._lock:
            return dict(self._loads)

    @property
    def in_flight(self) -> int:
        """In-flight requests over all nodes."""
        with self._lock:
            return self._total

    def __repr__(self) -> str:
        return (f"BoundedLoadRouter(balance_factor={self.balance_factor}, "
                f"in_flight={self.in_flight}, nodes={len(self.router)})")
