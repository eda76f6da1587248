"""chash.pymemcache against three real memcached, pylibmc (libmemcached's
ketama) and a real nutcracker memcached pool: every key written by one is
a hit for the other, on the server both agree on."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from _support.compat_programs import Memcached, memcacheds, nutcracker, owners_by_server, require, varied_keys
from _support.ports import free_port
from chash import ConsistentHashRouter
from chash.compat import libmemcached_id

pytest.importorskip("pymemcache", reason="pymemcache is in the test extra")
pylibmc = pytest.importorskip("pylibmc", reason="pylibmc is in the test extra")

from pymemcache.client.hash import HashClient as PlainHashClient  # noqa: E402

from chash.pymemcache import HashClient, hasher  # noqa: E402

#: pylibmc behaviours and the chash layout of the same ring.
MODES = [
    pytest.param({"ketama": True}, "libmemcached", [1, 1, 1], id="ketama"),
    pytest.param({"ketama_weighted": True}, "ketama", [1, 2, 3], id="ketama_weighted"),
    pytest.param({"ketama": True}, "libmemcached", [3, 1, 2], id="ketama-weights"),
]


def server_keys(servers: list[Memcached]) -> list[str]:
    return [f"{s.host}:{s.port}" for s in servers]


def weights_of(servers: list[Memcached], weights: list[int]) -> dict[str, float]:
    return dict(zip(server_keys(servers), weights, strict=True))


def client_of(servers: list[Memcached], layout: str, weights: list[int], **kwargs: object) -> HashClient:
    return HashClient(server_keys(servers), layout=layout, weights=weights_of(servers, weights),
                      allow_unicode_keys=True, connect_timeout=5, timeout=5, **kwargs)


@pytest.mark.parametrize(("behaviors", "layout", "weights"), MODES)
def test_pylibmc_writes_chash_reads(behaviors: dict[str, object], layout: str, weights: list[int]) -> None:
    keys = varied_keys(1500, 10 + sum(weights))
    with memcacheds(3) as servers:
        writer = pylibmc.Client([f"{s.host}:{s.port}:{w}" for s, w in zip(servers, weights, strict=True)],
                                behaviors=behaviors)
        for key in keys:  # one by one: set_multi aborts in the libmemcached pylibmc bundles
            assert writer.set(key, f"v-{key}".encode())
        writer.disconnect_all()
        reader = client_of(servers, layout, weights)
        got = reader.get_many(keys)
        missed = [k for k in keys if got.get(k) != f"v-{k}".encode()]
        assert not missed, f"{len(missed)} of {len(keys)} keys missed, e.g. {missed[:3]}"
        owner = owners_by_server(servers, [libmemcached_id(s.host, s.port) for s in servers], keys)
        assert [owner[k] for k in keys] == reader.ring.router.get_target_nodes(keys)
        assert len(set(owner.values())) == 3
        reader.close()


@pytest.mark.parametrize(("behaviors", "layout", "weights"), MODES)
def test_chash_writes_pylibmc_reads(behaviors: dict[str, object], layout: str, weights: list[int]) -> None:
    keys = varied_keys(1500, 20 + sum(weights))
    with memcacheds(3) as servers:
        writer = client_of(servers, layout, weights)
        assert writer.set_many({k: f"v-{k}".encode() for k in keys}, noreply=False) == []
        writer.close()
        reader = pylibmc.Client([f"{s.host}:{s.port}:{w}" for s, w in zip(servers, weights, strict=True)],
                                behaviors=behaviors)
        missed = [k for k in keys if reader.get(k) != f"v-{k}".encode()]
        reader.disconnect_all()
        assert not missed, f"{len(missed)} of {len(keys)} keys missed, e.g. {missed[:3]}"


def test_pymemcache_own_hash_client_with_the_hasher() -> None:
    keys = varied_keys(1000, 31)
    with memcacheds(3) as servers:
        writer = pylibmc.Client([f"{s.host}:{s.port}:{w}" for s, w in zip(servers, [1, 2, 1], strict=True)],
                                behaviors={"ketama_weighted": True})
        for key in keys:
            assert writer.set(key, b"x")
        writer.disconnect_all()
        reader = PlainHashClient(server_keys(servers), allow_unicode_keys=True,
                                 hasher=hasher("ketama", weights=weights_of(servers, [1, 2, 1])))
        got = reader.get_many(keys)
        assert sorted(got) == sorted(keys)
        # pymemcache's default (rendezvous) places many keys elsewhere: a miss
        plain = PlainHashClient(server_keys(servers), allow_unicode_keys=True)
        assert len(plain.get_many(keys)) < len(keys)
        reader.close()
        plain.close()


def test_twemproxy_memcached_pool_both_ways(tmp_path: Path) -> None:
    require("nutcracker")
    keys = varied_keys(1500, 41)
    weights = [2, 1, 3]
    with memcacheds(3) as servers:
        listen = free_port()
        lines = "".join(f"   - {s.host}:{s.port}:{w}\n" for s, w in zip(servers, weights, strict=True))
        yaml = (f"pool:\n  listen: 127.0.0.1:{listen}\n  hash: md5\n  distribution: ketama\n"
                f"  auto_eject_hosts: false\n  servers:\n{lines}")
        from pymemcache.client.base import Client

        with nutcracker(yaml, listen, tmp_path):
            proxy = Client(("127.0.0.1", listen), allow_unicode_keys=True, timeout=10)
            half = len(keys) // 2
            for key in keys[:half]:
                proxy.set(key, f"p-{key}".encode(), noreply=False)
            ours = client_of(servers, "ketama", weights)
            assert ours.set_many({k: f"c-{k}".encode() for k in keys[half:]}, noreply=False) == []
            got = ours.get_many(keys[:half])
            assert [k for k in keys[:half] if got.get(k) != f"p-{k}".encode()] == []
            through = {}
            for start in range(half, len(keys), 100):
                through.update(proxy.get_many(keys[start:start + 100]))
            assert [k for k in keys[half:] if through.get(k) != f"c-{k}".encode()] == []
            proxy.close()
            ours.close()


def test_weights_and_options_are_checked() -> None:
    with pytest.raises(ValueError, match="not in the list"):
        HashClient(["127.0.0.1:1"], weights={"127.0.0.1:2": 1})
    with pytest.raises(ValueError, match="must be a number > 0"):
        HashClient(["127.0.0.1:1"], weights={"127.0.0.1:1": 0})
    with pytest.raises(TypeError, match="places keys itself"):
        HashClient(["127.0.0.1:1"], hasher=hasher())
    with pytest.raises(ValueError):
        hasher("no-such-layout")
    ring = hasher()()
    ring.add_node("127.0.0.1:11211")
    assert ring.router.nodes == ["127.0.0.1"] and ring.nodes == ["127.0.0.1:11211"]
    with pytest.raises(ValueError, match="No such node"):
        ring.remove_node("127.0.0.1:11212")


def test_a_dead_server_leaves_the_ring_and_comes_back() -> None:
    binary = require("memcached")
    keys = varied_keys(600, 51)
    with memcacheds(3) as servers:
        client = client_of(servers, "libmemcached", [1, 1, 1], retry_attempts=0, dead_timeout=0.3,
                           ignore_exc=False)
        full = client.ring.router.get_target_nodes(keys)
        dead = servers[1]
        dead_name = libmemcached_id(dead.host, dead.port)
        dead.stop()
        # Every key on the dead server: the first one marks it dead.
        victim = next(k for k, n in zip(keys, full, strict=True) if n == dead_name)
        with pytest.raises(OSError):
            client.set(victim, b"x", noreply=False)
        assert dead_name not in client.ring.router.nodes
        without = ConsistentHashRouter(layout="libmemcached")
        for s in servers:
            if s is not dead:
                without.add_service_node(libmemcached_id(s.host, s.port))
        assert client.ring.router.get_target_nodes(keys) == without.get_target_nodes(keys)
        assert {a for a, b in zip(full, without.get_target_nodes(keys), strict=True) if a != b} == {dead_name}
        assert client.set_many({k: b"y" for k in keys}, noreply=False) == []
        assert len(client.get_many(keys)) == len(keys)
        # Back after dead_timeout: the same ring as before, only its keys move back.
        servers[1] = Memcached(binary, port=dead.port)
        deadline = time.monotonic() + 30
        while dead_name not in client.ring.router.nodes:
            assert time.monotonic() < deadline, "the server did not come back to the ring"
            time.sleep(0.1)
            client.get(keys[0])
        assert client.ring.router.get_target_nodes(keys) == full
        client.close()
