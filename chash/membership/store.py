"""The store contract: what the protocol asks of the store that holds a
shared ring, and what a driver needs of it.

The protocol (``chash.membership.protocol``) asks for operations, each a
frozen dataclass with typed arguments, naming the record it replies with
(the records live beside the state that reads them, in
``chash.membership.state``):

==============  ===============================================  ==============================
operation       does                                             replies
==============  ===============================================  ==============================
``ReadRing``    reads the whole ring                             ``StoredRing`` or ``NoRing``
``ReadConfig``  reads the shared settings it was made with       their text, or ``NoRing``
``ReadHead``    reads its position and digest                    ``RingHead`` or ``NoRing``
``Stamp``       records the digest of a version, if none is      whether it stamped
``Reepoch``     starts a new epoch where the ring was seen       ``Outcome`` or ``NoRing``
``Seed``        creates the ring if absent (or restores it)      ``Outcome`` or ``NoRing``
``Write``       an operator's change (and the new version's      ``Outcome``, ``NoRing``,
                digest, if it was computed at the position the   ``NoSuchNode``, ``Refused``
                change is made at)                               or ``OtherConfig``
``Vote``        one reporter's health verdicts                   ``Outcome`` or ``NoRing``
``Sweep``       expires votes (withdrawing one reporter's)       ``Outcome`` or ``NoRing``
``History``     reads the last changes, oldest first             a tuple of ``Change``, or
                                                                 ``NoRing``
==============  ===============================================  ==============================

A store performs each one atomically: it checks the whole ring before it
writes (a damaged one is reported, ``NoRing``, never written to), skips
unreadable entries and names them in the reply, and bumps the version and
announces every change of what the ring holds, and only those (a vote
that tips nothing bumps nothing).  With each change (and each seed and
new epoch) it keeps a ``Change`` in the ring's history, in the same
atomic step, and keeps the last ``HISTORY_LENGTH`` of them.  How is
the store's own: the Redis store runs a Lua script per operation
(``chash.membership.redis``), the etcd store a transaction
(``chash.membership.etcd``).  A store also delivers the ring's
announcements (``subscribe``), and names the exceptions of its client that
mean it is unreachable (``outage_errors``) or that it refuses this
instance (``auth_errors``).

``Store`` is the blocking face, for the threaded driver; ``AsyncStore`` the
asyncio one.  Neither knows the protocol: the drivers pair a store with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from chash.membership.state import (
    Change,
    HealthVerdict,
    NoRing,
    NoSuchNode,
    OtherConfig,
    Outcome,
    Refused,
    RingHead,
    StoredRing,
)

__all__ = ["HISTORY_LENGTH", "Announcement", "AsyncStore", "AsyncSubscription", "History",
           "NoPubSub", "Notice", "Operation", "ReadConfig", "ReadHead", "ReadRing", "Reepoch",
           "Seed", "Stamp", "Store",
           "Subscription", "SubscriptionLost", "Sweep", "Vote", "Write", "WriteStamp"]

R = TypeVar("R", covariant=True)
T = TypeVar("T")

#: How many changes a ring's history keeps (the newest).
HISTORY_LENGTH = 100


class Operation(Generic[R]):
    """An operation on the ring that replies with an ``R``; the subclasses
    below are every one there is."""

    __slots__ = ()


@dataclass(frozen=True)
class ReadRing(Operation[StoredRing | NoRing]):
    """Read the whole ring at once."""


@dataclass(frozen=True)
class ReadConfig(Operation[str | NoRing]):
    """Read the shared settings the ring was made with (``StoredRing.config``),
    for a tool that makes its router to match them (``chash ring``)."""


@dataclass(frozen=True)
class ReadHead(Operation[RingHead | NoRing]):
    """Read the ring's position and digest, for the periodic check."""


@dataclass(frozen=True)
class Stamp(Operation[bool]):
    """Record ``digest`` for the ring at (``epoch``, ``version``), only if
    the ring is still there and has no digest yet.  Changes no content,
    so announces nothing; replies whether it stamped."""

    epoch: str
    version: int
    digest: str


@dataclass(frozen=True)
class Reepoch(Operation[Outcome | NoRing]):
    """Move the ring to ``epoch`` at ``version``, only if it is still at
    (``seen_epoch``, ``seen_version``), and announce it (the store went
    back, or holds another ring at the version applied)."""

    seen_epoch: str
    seen_version: int
    epoch: str
    version: int


@dataclass(frozen=True)
class Seed(Operation[Outcome | NoRing]):
    """Create the ring if it does not exist, and only then; with
    ``restore``, also replace a damaged one.  The nodes get the add
    sequences 1, 2, ... in their order here; the verdicts are carried over
    (dated now, and kept ``vote_ttl`` without votes).  Replies changed if
    it seeded, unchanged if a sound ring existed, ``NoRing`` for a damaged
    one without ``restore``."""

    epoch: str
    version: int
    config: str
    restore: bool
    nodes: Mapping[str, str] = field(default_factory=dict)
    """node -> weight as stored (``repr(float)``), in add order."""
    disabled: Mapping[str, str] = field(default_factory=dict)
    """node -> reason."""
    down: Mapping[str, HealthVerdict] = field(default_factory=dict)
    zones: Mapping[str, str] = field(default_factory=dict)
    """node -> zone, for the nodes that have one."""


@dataclass(frozen=True)
class WriteStamp:
    """What a ``Write`` stamps on the version it makes: ``digest``, which
    the writer computed with the ring at (``epoch``, ``version``)."""

    epoch: str
    version: int
    digest: str


@dataclass(frozen=True)
class Write(Operation[Outcome | NoRing | NoSuchNode | Refused | OtherConfig]):
    """An operator's change of ``node``: ``action`` is ``add`` (or reweigh:
    ``value`` is the weight as stored), ``remove``, ``disable`` (``value``
    is the reason) or ``enable``.  Refused if the ring was made with
    another ``config``, and for a removal or a disable taking out more than
    half of the nodes in service unless ``force``.  ``zone`` is for
    ``add``: the node's zone (an empty one clears it); None keeps the zone
    a node has, and gives a new node none.  A new zone alone is a change
    (its own history entry, ``zone``).

    ``stamp``, if given, is the digest of the version the change makes
    (an anchor router's record, ``chash.membership.anchor``), computed at
    the ring's position before it: the store records it with the change,
    in the same atomic step, only if the ring was at exactly that position
    and the change bumped the version; otherwise it writes as without
    one."""

    action: str
    node: str
    config: str
    value: str = ""
    force: bool = False
    zone: str | None = None
    stamp: WriteStamp | None = None


@dataclass(frozen=True)
class Vote(Operation[Outcome | NoRing]):
    """``reporter``'s verdicts, node -> (down, reason); a vote counts for
    ``ttl_ms`` unless renewed, and a node is down when ``quorum`` of the
    live reporters vote it down.  Votes on nodes the ring does not hold
    are ignored."""

    reporter: str
    ttl_ms: int
    quorum: str
    votes: Mapping[str, tuple[bool, str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Sweep(Operation[Outcome | NoRing]):
    """Expire votes older than ``ttl_ms`` and decide every node again,
    after withdrawing every vote of ``withdraw`` (a reporter) if given."""

    ttl_ms: int
    quorum: str
    withdraw: str | None = None


@dataclass(frozen=True)
class History(Operation[tuple[Change, ...] | NoRing]):
    """Read the ring's last changes (at most ``HISTORY_LENGTH``), oldest
    first.  Changes written by instances of a version that kept no
    history are missing from it; the versions tell where."""


@dataclass(frozen=True)
class Announcement:
    """A change was announced: ``data`` is its ``epoch:version``."""

    data: object


@dataclass(frozen=True)
class SubscriptionLost:
    """The store dropped the subscription (a cluster slot moved away, the
    server closed it): subscribe anew."""


#: What a subscription receives in one wait: an announcement, the loss of
#: the subscription, or nothing of note (a timeout, a confirmation).
Notice = Announcement | SubscriptionLost | None


class NoPubSub(Exception):
    """This client offers no subscription of the kind needed; the message
    says why.  The periodic check then carries every change."""


class Subscription(Protocol):
    """A blocking subscription to a ring's announcements."""

    def receive(self, timeout: float) -> Notice:
        """Wait up to ``timeout`` seconds for the next notice."""

    def close(self) -> None:
        """Drop the subscription; never raises."""


class AsyncSubscription(Protocol):
    """An asyncio subscription to a ring's announcements."""

    async def receive(self, timeout: float) -> Notice:
        """Wait up to ``timeout`` seconds for the next notice."""

    async def close(self) -> None:
        """Drop the subscription; never raises."""


class Store(Protocol):
    """A blocking store of shared rings."""

    #: What log texts and errors call the store ("Redis", "etcd").
    name: str
    outage_errors: tuple[type[BaseException], ...]
    auth_errors: tuple[type[BaseException], ...]

    def run(self, operation: Operation[T]) -> T:
        """Perform ``operation`` on the ring; its reply, or the client's error."""

    def subscribe(self, sharded: bool) -> Subscription:
        """Subscribe to the ring's announcements (with sharded pub/sub if
        ``sharded``); NoPubSub if the client cannot, or the client's error."""


class AsyncStore(Protocol):
    """An asyncio store of shared rings."""

    name: str
    outage_errors: tuple[type[BaseException], ...]
    auth_errors: tuple[type[BaseException], ...]

    async def run(self, operation: Operation[T]) -> T:
        """Perform ``operation`` on the ring; its reply, or the client's error."""

    async def subscribe(self, sharded: bool) -> AsyncSubscription:
        """As ``Store.subscribe``."""
