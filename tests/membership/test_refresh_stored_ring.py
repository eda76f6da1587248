"""refresh() ends with the router equal to the ring Redis holds, also where
Redis went back (a restored backup, a failover) and then moved on to the
version an idle instance applied, with other content.  (The etcd twin is
in test_etcd_membership.py.)"""
from __future__ import annotations

from typing import Any

import pytest

from chash import ConsistentHashRouter
from chash.membership import RedisMembership
from chash.membership.redis.store import ring_keys
from chash.membership.settings import MembershipSettings

pytest.importorskip("redis", reason="redis-py not installed: pip install 'chash-router[redis]'")


def test_refresh_follows_redis_back_and_on_to_the_same_version(client: Any) -> None:
    router = ConsistentHashRouter()
    router.add_service_node("n1", 1.0)
    writer = RedisMembership(router, client, "t", bootstrap=True)
    writer.refresh()
    idle = RedisMembership(ConsistentHashRouter(), client, "t")
    idle.refresh()
    keys = ring_keys(MembershipSettings(name="t"))
    backup = {key: client.dump(key) for key in keys}
    writer.add_node("n2")
    idle.refresh()
    assert idle.router.weights == {"n1": 1.0, "n2": 1.0}
    client.delete(*keys)
    for key, dumped in backup.items():
        if dumped is not None:
            client.restore(key, 0, dumped)
    other = RedisMembership(ConsistentHashRouter(), client, "t")
    other.refresh()
    other.add_node("other")
    assert other.version == idle.version
    idle.refresh()
    assert idle.router.weights == {"n1": 1.0, "other": 1.0}
    assert idle.router.fingerprint() == other.router.fingerprint()
