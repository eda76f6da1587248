"""The ways of assigning keys to nodes ``simulate()`` measures: ``hash %
N``, the ring, jump, JumpBackHash, JumpBackAnchor, rendezvous, Maglev and
bounded loads, each over one ``Workload`` (the keys and their hashes); the
loops run in C.  Jump, jumpback, anchor, rendezvous and Maglev are the
library's own routers (``JumpRouter``, ``JumpRouter(layout="jumpback")``,
``AnchorRouter``, ``RendezvousRouter``, ``MaglevRouter``), so the tables
measure what a user of them gets."""
from __future__ import annotations

import math
import time
from array import array
from collections.abc import Sequence
from typing import TYPE_CHECKING

from chash import _chash
from chash._chash import (
    AnchorRouter,
    ConsistentHashRouter,
    JumpRouter,
    MaglevRouter,
    RendezvousRouter,
)
from chash.simulate.config import TIMING_REPEATS, SimulationConfig

if TYPE_CHECKING:
    from chash._chash import HashName, JumpLayoutName

__all__ = ["AnchorStrategy", "BoundedStrategy", "JumpBackStrategy", "JumpStrategy", "MaglevStrategy",
           "ModuloStrategy", "RendezvousStrategy", "RingStrategy", "Strategy", "Workload",
           "build_strategies"]

# The private C helper (a strategy function of chash._chash, typed by its
# stub): an array('Q') of 64-bit hashes.
_key_hashes = _chash._key_hashes


class Workload:
    """The keys, their 64-bit hashes, and how long hashing them took (best of three)."""

    def __init__(self, keys: list[str], hash_name: HashName) -> None:
        self.keys = keys
        self.hash_name = hash_name
        self.hash_seconds = math.inf
        for _ in range(TIMING_REPEATS):
            started = time.perf_counter()
            self.hashes = _key_hashes(keys, hash_name)
            self.hash_seconds = min(self.hash_seconds, time.perf_counter() - started)


class Strategy:
    """One way of assigning keys to nodes, measured by ``simulate()``.

    ``assign(nodes)`` returns, for every key of the workload, the index of
    its node in ``nodes``; ``route_seconds`` is how long the routing itself
    took in the last call (no setup, no bookkeeping).
    """

    id = ""
    """Short stable name, the key in JSON results."""
    label = ""
    """Readable name for tables and legends."""
    hashes_keys = False
    """True when ``route_seconds`` includes hashing the keys."""

    def __init__(self, workload: Workload) -> None:
        self.workload = workload
        self.route_seconds = 0.0

    def assign(self, nodes: Sequence[str]) -> array[int]:
        """Node index (into ``nodes``) of every key."""
        raise NotImplementedError

    def after_failure(self, nodes: Sequence[str], failed: int) -> list[str]:
        """The node list once ``nodes[failed]`` is gone (order kept)."""
        return [node for i, node in enumerate(nodes) if i != failed]

    def state_bytes(self, nodes: Sequence[str]) -> int:
        """Bytes of routing state the strategy keeps for ``nodes`` (besides the node list)."""
        return 0

    def routed_by_hash(self, router: MaglevRouter | AnchorRouter,
                       nodes: Sequence[str]) -> array[int]:
        """Node index of every key, ``router`` looking up the workload's
        64-bit hashes in one batch (timed as the routing)."""
        started = time.perf_counter()
        owners = router.get_target_nodes_by_hash(self.workload.hashes)
        self.route_seconds = time.perf_counter() - started
        return _chash._node_indices(owners, nodes)

    def ns_per_key(self) -> float:
        """Routing cost a key in the last ``assign``, key hashing included."""
        seconds = self.route_seconds + (0.0 if self.hashes_keys else self.workload.hash_seconds)
        return 1e9 * seconds / max(1, len(self.workload.keys))


class ModuloStrategy(Strategy):
    """``hash % N``: the node list indexed by the key hash modulo its length."""

    id = "modulo"
    label = "hash % N"

    def assign(self, nodes: Sequence[str]) -> array[int]:
        """Node index of every key."""
        started = time.perf_counter()
        result = _chash._modulo_assign(self.workload.hashes, len(nodes))
        self.route_seconds = time.perf_counter() - started
        return result


class JumpStrategy(Strategy):
    """Jump consistent hash: node i is bucket i; only the last bucket can go.

    Routed by ``chash.JumpRouter`` over the workload's 64-bit key hashes
    (``get_target_nodes_by_hash``). A failed node in the middle hands its
    bucket number to the last node (swap and shrink by one), the usual way
    to use jump with named nodes.
    """

    id = "jump"
    label = "jump"
    layout: JumpLayoutName = "jump"

    def assign(self, nodes: Sequence[str]) -> array[int]:
        """Node index of every key."""
        if not nodes:
            raise ValueError(f"{self.id} needs at least one node")
        router = JumpRouter(layout=self.layout)
        router.add_service_nodes(nodes)
        started = time.perf_counter()
        owners = router.get_target_nodes_by_hash(self.workload.hashes)
        self.route_seconds = time.perf_counter() - started
        index = {node: i for i, node in enumerate(nodes)}
        return array("I", [index[owner] for owner in owners if owner is not None])

    def after_failure(self, nodes: Sequence[str], failed: int) -> list[str]:
        """The last node takes over the failed node's bucket number."""
        rest = list(nodes[:-1])
        if failed < len(rest):
            rest[failed] = nodes[-1]
        return rest


class JumpBackStrategy(JumpStrategy):
    """JumpBackHash (hash4j's ``jumpBackHashSplitMix64``): jump's buckets
    and jump's way with a failed node, in expected O(1) integer steps.
    Routed by ``chash.JumpRouter(layout="jumpback")``."""

    id = "jumpback"
    label = "jumpback"
    layout = "jumpback"


class AnchorStrategy(Strategy):
    """JumpBackAnchor (hash4j's ``jumpBackAnchorHash``): any node can be
    removed where it is, and only its keys move.

    Routed by ``chash.AnchorRouter`` over the workload's 64-bit key hashes.
    Its mapping depends on the history of changes, so the router of a node
    set holds every node this strategy was ever given, added in the order
    first given, the absent ones then removed: growth adds the new node,
    a failure removes the failed one from the middle."""

    id = "anchor"
    label = "anchor"

    def __init__(self, workload: Workload) -> None:
        super().__init__(workload)
        self._seen: dict[str, None] = {}

    def router(self, nodes: Sequence[str]) -> AnchorRouter:
        """The router of ``nodes`` after the history above."""
        self._seen.update(dict.fromkeys(nodes))
        router = AnchorRouter()
        router.add_service_nodes(self._seen)
        present = set(nodes)
        for node in self._seen:
            if node not in present:
                router.remove_service_node(node)
        return router

    def assign(self, nodes: Sequence[str]) -> array[int]:
        """Node index of every key."""
        if not nodes:
            raise ValueError("anchor needs at least one node")
        return self.routed_by_hash(self.router(nodes), nodes)

    def state_bytes(self, nodes: Sequence[str]) -> int:
        """Bytes of its ``state()`` (hash4j's ``getState()``): 4, and 4 a
        removed node."""
        return len(self.router(nodes).state())


class RendezvousStrategy(Strategy):
    """Highest random weight: the node scoring highest for the key wins.

    Routed by ``chash.RendezvousRouter`` (``layout="hrw"``, all weights 1)
    through its batch lookup, which scores the keys' own XXH64 (the hrw
    layout's key hash, whatever the workload's)."""

    id = "rendezvous"
    label = "rendezvous"
    hashes_keys = True

    def assign(self, nodes: Sequence[str]) -> array[int]:
        """Node index of every key."""
        if not nodes:
            raise ValueError("rendezvous needs at least one node")
        router = RendezvousRouter()
        router.add_service_nodes(nodes)
        started = time.perf_counter()
        owners = router.get_target_nodes(self.workload.keys)
        self.route_seconds = time.perf_counter() - started
        return _chash._node_indices(owners, nodes)

    def state_bytes(self, nodes: Sequence[str]) -> int:
        """One 64-bit score seed and one weight a node."""
        return 16 * len(nodes)


class MaglevStrategy(Strategy):
    """Maglev: a prime-sized lookup table filled from per-node permutations.

    Routed by ``chash.MaglevRouter(size)`` (Envoy's permutations and fill,
    all weights 1) over the workload's 64-bit key hashes
    (``get_target_nodes_by_hash``: the entry is the hash modulo the size)."""

    id = "maglev"
    label = "maglev"

    def __init__(self, workload: Workload, size: int) -> None:
        super().__init__(workload)
        self.size = size

    def router(self, nodes: Sequence[str]) -> MaglevRouter:
        """A router holding ``nodes``."""
        router = MaglevRouter(self.size)
        router.add_service_nodes(nodes)
        return router

    def assign(self, nodes: Sequence[str]) -> array[int]:
        """Node index of every key."""
        if not nodes:
            raise ValueError("maglev needs at least one node")
        return self.routed_by_hash(self.router(nodes), nodes)

    def state_bytes(self, nodes: Sequence[str]) -> int:
        """Heap bytes of the router's table."""
        return self.router(nodes).memory_bytes


class RingStrategy(Strategy):
    """The consistent-hash ring (``ConsistentHashRouter``) with v virtual nodes."""

    hashes_keys = True

    def __init__(self, workload: Workload, vnodes: int) -> None:
        super().__init__(workload)
        self.vnodes = vnodes
        self.id = f"ring-{vnodes}"
        self.label = f"ring/{vnodes}"

    def router(self, nodes: Sequence[str]) -> ConsistentHashRouter:
        """A router holding ``nodes``."""
        router = ConsistentHashRouter(self.vnodes, hash=self.workload.hash_name)
        router.add_service_nodes(nodes)
        return router

    def assign(self, nodes: Sequence[str]) -> array[int]:
        """Node index of every key, through the router's batch lookup."""
        router = self.router(nodes)
        started = time.perf_counter()
        owners = router.get_target_nodes(self.workload.keys)
        self.route_seconds = time.perf_counter() - started
        result = _chash._node_indices(owners, nodes)
        return result

    def state_bytes(self, nodes: Sequence[str]) -> int:
        """Heap bytes of the ring engine."""
        return self.router(nodes).memory_bytes


class BoundedStrategy(RingStrategy):
    """Consistent hashing with bounded loads over the ring with v virtual nodes.

    Keys are placed in order; each goes to the first node clockwise from its
    ring position whose load is below ceil(c * (placed + 1) / N).  Points
    several nodes share count once, for the node that owns them on the ring.
    """

    hashes_keys = False

    def __init__(self, workload: Workload, vnodes: int, balance_factor: float) -> None:
        super().__init__(workload, vnodes)
        self.balance_factor = balance_factor
        self.id = f"bounded-{vnodes}"
        self.label = f"bounded/{vnodes}"

    def assign(self, nodes: Sequence[str]) -> array[int]:
        """Node index of every key, placed one by one under the load bound
        over the router's own ring (its node order is that of nodes)."""
        router = self.router(nodes)
        started = time.perf_counter()
        result = _chash._bounded_assign(router, self.workload.hashes, self.balance_factor)
        self.route_seconds = time.perf_counter() - started
        return result

    def state_bytes(self, nodes: Sequence[str]) -> int:
        """The ring plus one load counter a node."""
        return super().state_bytes(nodes) + 8 * len(nodes)


def build_strategies(config: SimulationConfig, workload: Workload) -> list[Strategy]:
    """The strategies of the remap and comparison tables, in column order."""
    strategies: list[Strategy] = [ModuloStrategy(workload)]
    strategies += [RingStrategy(workload, v) for v in config.ring_vnodes]
    strategies += [JumpStrategy(workload), JumpBackStrategy(workload), AnchorStrategy(workload),
                   RendezvousStrategy(workload),
                   MaglevStrategy(workload, config.maglev_size)]
    strategies += [BoundedStrategy(workload, v, config.balance_factor) for v in config.bounded_vnodes]
    return strategies
