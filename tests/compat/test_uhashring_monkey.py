"""monkey.patch_memcache() against real memcached servers: python-memcached's
Client, patched, stores every key on the server uhashring 2.5's ring of the
same servers names.

uhashring's patch keys its ring by each server's address alone, so the
servers here listen on three loopback addresses (127.0.0.1 to 127.0.0.3).
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import uhashring

from _support.ci import missing
from _support.compat_programs import memcacheds, owners_by_server
from chash.compat.uhashring import HashRing, monkey


@pytest.fixture
def memcache_module() -> Iterator[Any]:
    try:
        import memcache
    except ImportError:
        missing("python-memcached is needed (the test extra)")
    saved = {name: memcache.Client.__dict__[name] for name in ("__init__", "_get_server")}
    try:
        yield memcache
    finally:
        for name, method in saved.items():
            setattr(memcache.Client, name, method)
        for name in ("_old_init", "_old_get_server"):
            if name in memcache.Client.__dict__:
                delattr(memcache.Client, name)


def test_patched_client_stores_each_key_where_uhashring_places_it(memcache_module: Any) -> None:
    hosts = ["127.0.0.1", "127.0.0.2", "127.0.0.3"]
    with memcacheds(3, hosts=hosts) as servers:
        monkey.patch_memcache()
        client = memcache_module.Client([f"{s.host}:{s.port}" for s in servers])
        assert isinstance(client.uhashring, HashRing)
        keys = [f"user:{i}" for i in range(400)]
        for key in keys:
            assert client.set(key, "v")
        owner = owners_by_server(servers, hosts, keys)
        # python-memcached hands the ring its keys as bytes, which uhashring
        # hashes as their repr (b'user:0'): so does the reference here.
        reference = uhashring.HashRing(hosts)
        assert all(owner[key] == reference.get_node(key.encode()) for key in keys)
        assert len(set(owner.values())) == 3
        assert client.get(keys[0]) == "v"
        client.disconnect_all()
