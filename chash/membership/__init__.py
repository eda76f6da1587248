"""Shared membership: every gateway instance routes the same way.

With several gateway instances, each one must hold the same ring, or the
same user lands on different backends depending on which gateway took the
request.  A membership keeps the authoritative ring in a store, Redis
(``RedisMembership``, ``AsyncRedisMembership``) or etcd
(``EtcdMembership``, ``AsyncEtcdMembership``): node -> weight, nodes an
operator disabled, nodes the health checks took out, and the nodes' zones.  It keeps the local
router in step with it:

* every change is atomic in the store (a Lua script in Redis, a
  transaction comparing revisions in etcd) and bumps the ring's version,
  which is announced (pub/sub in Redis, a watch in etcd);
* each instance applies announcements at once and, because an
  announcement can be lost while a subscriber is disconnected, also
  compares versions every ``resync_interval`` seconds;
* health checkers on every instance vote through ``mark_down`` /
  ``mark_up`` (the ``chash.health.Membership`` protocol); a node is taken
  out when a quorum of the live reporters votes it down (by default a strict
  majority) and a vote lapses unless renewed within ``vote_ttl``;
* agreement is checked on content: each version carries the ring's
  ``router.fingerprint()``, compared at every check;
* when the store is unreachable, routing goes on with the last known ring
  (the router is local, lookups never touch the store), the outage is
  logged when it begins and ends, and the instance catches up when the
  store returns, restoring the ring from the last known one if the store
  lost it.  Only an instance that synced (or one told ``bootstrap=True``)
  creates a ring.

The package, from the bottom up:

* ``settings``: ``MembershipSettings``, the keywords every driver takes,
  validated once;
* ``state`` and ``core``: the ring as read (``MembershipState``), the
  records the stores reply with (``StoredRing``, ``Outcome``...), and one
  instance's bookkeeping (``MembershipCore``), without I/O;
* ``store``: the store contract: the operations the protocol asks a store
  for (``ReadRing``, ``Write``, ``Vote``...), and what a driver needs of a
  store (``Store``, ``AsyncStore``, their subscriptions);
* ``protocol``: every operation of a membership written once, as a
  generator that yields store operations and receives their records;
* ``loops``: the decisions of the drivers' worker and listener loops
  (when to check, subscribe, resubscribe, back off), without I/O;
* ``sync_driver`` and ``async_driver``: the thin loops that perform it all,
  with two threads or two asyncio tasks;
* ``redis/`` and ``etcd/``: the two stores (the Redis one runs its Lua
  scripts; the etcd one its transactions, watches and leases) and the
  memberships over them.

The Redis drivers need redis-py: ``pip install 'chash-router[redis]'``; the
etcd drivers httpx: ``pip install 'chash-router[etcd]'``.
See docs/membership.md for the design.
"""

from chash.membership.etcd.membership import AsyncEtcdMembership, EtcdMembership
from chash.membership.redis.membership import AsyncRedisMembership, RedisMembership
from chash.membership.state import (
    HealthVerdict,
    MembershipState,
    NotReplicatedError,
    RingMissingError,
)

__all__ = ["AsyncEtcdMembership", "AsyncRedisMembership", "EtcdMembership", "HealthVerdict",
           "MembershipState", "NotReplicatedError", "RedisMembership", "RingMissingError"]
