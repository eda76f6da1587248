"""What a driver needs of the store that holds a shared ring.

The protocol (``chash.membership.protocol``) speaks in ``Call``s; a store
performs each one atomically and replies in the shape the protocol parses
(the Redis store runs the Lua script of the call's name, and
``chash.membership.redis.scripts`` documents every reply).  A store also
delivers the ring's announcements (``subscribe``), and names the
exceptions of its client that mean it is unreachable (``outage_errors``)
or that it refuses this instance (``auth_errors``).

``Store`` is the blocking face, for the threaded driver; ``AsyncStore`` the
asyncio one.  Neither knows the protocol: the drivers pair a store with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from chash.membership.protocol import Call

__all__ = ["Announcement", "AsyncStore", "AsyncSubscription", "NoPubSub", "Notice", "Store",
           "Subscription", "SubscriptionLost"]


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

    def run(self, call: Call) -> Any:
        """Perform ``call`` on the ring; its reply, or the client's error."""

    def subscribe(self, channel: str, sharded: bool) -> Subscription:
        """Subscribe to ``channel`` (with sharded pub/sub if ``sharded``);
        NoPubSub if the client cannot, or the client's error."""


class AsyncStore(Protocol):
    """An asyncio store of shared rings."""

    name: str
    outage_errors: tuple[type[BaseException], ...]
    auth_errors: tuple[type[BaseException], ...]

    async def run(self, call: Call) -> Any:
        """Perform ``call`` on the ring; its reply, or the client's error."""

    async def subscribe(self, channel: str, sharded: bool) -> AsyncSubscription:
        """As ``Store.subscribe``."""
