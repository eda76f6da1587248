"""What the code above the ring asks of a router, in one vocabulary.

Four protocols, each the one before it and more; a caller types against
the least it needs, so that anything answering those calls may stand in
for a router (a view over one, a test's double):

* ``Ranking``: a key's preference list, its nodes in the order they are
  tried.  The gateway's proxy walks it; a router is one, and so is a view
  over one (``chash.zones.LocalFirst``, the gateway's ``LocalVerdicts``).
* ``Lookup``: a ranking with the owner of a key and the node list: the
  sticky clients (``chash.routing.sticky``).
* ``Router``: every read the layers above make of a router: membership
  tests, weights and the weight rule, layout and hash, batch lookups, the
  bounded lookup over the caller's loads (``get_bounded``), ownership and
  the fingerprint (metrics, migration, the gateway's status page).
* ``MutableRouter``: a router whose nodes and weights change: health
  verdicts (``chash.health.LocalMembership``), weights
  (``chash.weights``), the gateway.

``ConsistentHashRouter``, ``MaglevRouter``, ``JumpRouter``,
``RendezvousRouter`` and ``AnchorRouter`` are each a ``MutableRouter`` (so
all five); the check
at the end of this module makes ``mypy --strict chash`` prove it against
their stubs.  (A ``JumpRouter`` removes only its last bucket: it is a
``MutableRouter`` whose ``remove_service_node`` refuses the others with
ValueError, which is why the gateway does not take one.)  The protocols
are ``runtime_checkable``: ``isinstance(x, Lookup)`` checks that the
names are there, not their signatures.

A leaf: imports nothing of chash but the routers' stubs, for the check.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Protocol, runtime_checkable

__all__ = ["Key", "Lookup", "MutableRouter", "Ranking", "Router"]

#: A routing key: text (hashed as UTF-8) or bytes.
Key = str | bytes


@runtime_checkable
class Ranking(Protocol):
    """A preference list per key: what the gateway's proxy walks."""

    def get_preference_list(self, key: Key, n: int, /) -> list[str]:
        """Up to ``n`` distinct nodes for ``key``, its owner first, in the
        order a request tries them."""
        ...


@runtime_checkable
class Lookup(Ranking, Protocol):
    """A ranking with each key's owner and the nodes: what the sticky
    clients use."""

    @property
    def nodes(self) -> list[str]:
        """The nodes, in the order they were added."""
        ...

    def __len__(self) -> int:
        """How many nodes there are."""
        ...

    def get_target_node(self, request_key: Key, /) -> str | None:
        """The owner of ``request_key``; None when there is no node."""
        ...


@runtime_checkable
class Router(Lookup, Protocol):
    """Every read the layers above make of a router."""

    @property
    def weights(self) -> dict[str, float]:
        """``{node: weight}``."""
        ...

    @property
    def layout(self) -> str:
        """The layout's name (``"python"``, ``"ketama"``, ``"envoy"``...)."""
        ...

    @property
    def weight_rule(self) -> str:
        """The weights the router takes: ``"real"`` (any > 0), ``"whole"``
        (whole numbers >= 1), ``"at_least_one"`` (real numbers >= 1) or
        ``"none"`` (every node's is 1)."""
        ...

    @property
    def hash(self) -> str | Callable[[bytes], int]:
        """The hash function's name, or the function given."""
        ...

    def __contains__(self, node: object, /) -> bool:
        """Whether ``node`` is one of the nodes."""
        ...

    def get_target_nodes(self, keys: Iterable[Key], /) -> list[str | None]:
        """The owner of each key, in order."""
        ...

    def get_bounded(self, key: Key, loads: Mapping[str, float], /,
                    balance_factor: float = 1.25) -> str | None:
        """The first node of the key's preference list below its bound over
        ``loads`` (node -> load): bounded loads over the caller's counts."""
        ...

    def ownership(self) -> dict[str, float]:
        """``{node: share of the keys it owns}``."""
        ...

    def fingerprint(self) -> str:
        """A digest of the routing: equal for two routers routing every
        key alike, whatever order their nodes were added in."""
        ...


@runtime_checkable
class MutableRouter(Router, Protocol):
    """A router whose nodes and weights change."""

    def add_service_node(self, real_node_id: str, weight: float = 1.0) -> None:
        """Add the node, or give a node already there this weight."""
        ...

    def add_service_nodes(self, nodes: Iterable[str], weight: float = 1.0) -> None:
        """Add several nodes of one weight, all or none."""
        ...

    def remove_service_node(self, real_node_id: str, /) -> None:
        """Remove the node; KeyError if it is not there."""
        ...

    def discard_service_node(self, real_node_id: str, /) -> None:
        """Remove the node if it is there."""
        ...


if TYPE_CHECKING:
    from chash._chash import (
        AnchorRouter,
        ConsistentHashRouter,
        JumpRouter,
        MaglevRouter,
        RendezvousRouter,
    )

    def _every_router_is_mutable(ring: ConsistentHashRouter, maglev: MaglevRouter,
                                 jump: JumpRouter, rendezvous: RendezvousRouter,
                                 anchor: AnchorRouter,
                                 ) -> tuple[MutableRouter, ...]:
        """Never called: mypy checks that each class satisfies the protocol."""
        return ring, maglev, jump, rendezvous, anchor
