"""Shared membership in Redis: every gateway instance routes the same way.

With several gateway instances, each one must hold the same ring, or the
same user lands on different backends depending on which gateway took the
request.  ``RedisMembership`` keeps the authoritative ring in Redis (node ->
weight, nodes an operator disabled, nodes the health checks took out) and
keeps the local router in step with it:

* every change runs as one Lua script, so it is atomic, and bumps the
  ring's version, announced on a pub/sub channel;
* each instance applies announcements at once and, because pub/sub drops
  messages while a subscriber is disconnected, also compares versions every
  ``resync_interval`` seconds;
* health checkers on every instance vote through ``mark_down`` /
  ``mark_up`` (the ``chash.health.Membership`` protocol); a node is taken
  out when a quorum of the live reporters votes it down (by default a strict
  majority) and a vote lapses unless renewed within ``vote_ttl``;
* agreement is checked on content: each version carries the ring's
  ``router.fingerprint()``, compared at every check;
* when Redis is unreachable, routing goes on with the last known ring (the
  router is local, lookups never touch Redis), the outage is logged when it
  begins and ends, and the instance catches up when Redis returns,
  restoring the ring from the last known one if Redis lost it.  Only an
  instance that synced (or one told ``bootstrap=True``) creates a ring.

The package, from the bottom up:

* ``settings``: ``MembershipSettings``, the keywords every driver takes,
  validated once;
* ``state`` and ``core``: the ring as read (``MembershipState``) and one
  instance's bookkeeping (``MembershipCore``), without I/O;
* ``protocol``: every operation written once, as a generator that yields
  the calls it needs performed and receives their replies;
* ``loops``: the decisions of the drivers' worker and listener loops
  (when to check, subscribe, resubscribe, back off), without I/O;
* ``store``: what a driver needs of a store; ``redis/`` is the Redis one
  (its Lua scripts, its pub/sub) and ``RedisMembership`` /
  ``AsyncRedisMembership``;
* ``sync_driver`` and ``async_driver``: the thin loops that perform it all,
  with two threads or two asyncio tasks.

``EtcdMembership`` / ``AsyncEtcdMembership`` (``etcd/``) keep the ring in
etcd instead, over the same protocol and drivers: each change is a
transaction comparing revisions, announcements are watch events, health
votes are held by leases.

The Redis drivers need redis-py: ``pip install 'chash-router[redis]'``; the
etcd drivers httpx: ``pip install 'chash-router[etcd]'``.
See docs/membership.md for the design.
"""

from chash.membership.etcd.membership import AsyncEtcdMembership, EtcdMembership
from chash.membership.redis.membership import AsyncRedisMembership, RedisMembership
from chash.membership.state import HealthVerdict, MembershipState, RingMissingError

__all__ = ["AsyncEtcdMembership", "AsyncRedisMembership", "EtcdMembership", "HealthVerdict",
           "MembershipState", "RedisMembership", "RingMissingError"]
