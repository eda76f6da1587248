"""The nginx, ketama and libmemcached layouts against the real programs.

Each test starts its own nginx, nutcracker (twemproxy) or memcached servers
(tests/_support/compat_programs.py), routes thousands of varied keys through the
program, observes where each key went (the backend nginx answered from,
the memcached that holds the key) and requires chash to agree on every
key.  Shapes: 3, 10 and 50 servers, unequal weights, host names, named
servers, port 11211, and two servers sharing a ring point, listed both
ways round.  The system's libmemcached (1.1 on Debian 12; pylibmc bundles
1.0.16) is asked through ctypes which server it picks for each key.
"""
from __future__ import annotations

import bisect
import contextlib
import ctypes
import ctypes.util
import random
import socket
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import pytest

from _support.ci import missing
from _support.collisions import loopback_hosts, shared_point, shared_points
from _support.compat_programs import (
    ask_nginx,
    memcacheds,
    nginx,
    nutcracker,
    owners_by_server,
    port_is_free,
    set_through,
    varied_keys,
)
from _support.ports import free_port, free_ports
from chash import ConsistentHashRouter
from chash.compat import libmemcached_id, nginx_upstream, twemproxy_id, twemproxy_pool


def agreement(expected: Sequence[str | None], got: Sequence[str]) -> None:
    wrong = [(i, e, g) for i, (e, g) in enumerate(zip(expected, got, strict=True)) if e != g]
    assert len(expected) == len(got)
    assert not wrong, f"{len(wrong)} of {len(got)} keys differ, e.g. {wrong[:3]}"


def keys_on_point(router: ConsistentHashRouter, point: int, want: int, seed: int) -> list[str]:
    """Keys whose successor is the ring point `point` (searched offline)."""
    ring = router.hash_ring
    found: list[str] = []
    for key in varied_keys(200_000, seed):
        pos = bisect.bisect_left(ring, router._calculate_hash(key)) % len(ring)
        if ring[pos] == point:
            found.append(key)
            if len(found) == want:
                break
    assert len(found) == want
    return found


# -- nginx ---------------------------------------------------------------------


def nginx_case(tmp_path: Path, servers: list[tuple[str, int, int]], keys: list[str]) -> None:
    """servers: (host, port, weight) as written on the upstream's lines."""
    lines = [f"{h}:{p} weight={w}" for h, p, w in servers]
    backends = sorted({("127.0.0.1" if h == "localhost" else h, p) for h, p, _ in servers})
    with nginx(lines, backends, tmp_path) as front:
        got = ask_nginx(front, keys)
    conf = "upstream u {\n hash $http_x_key consistent;\n" + "".join(
        f" server {line};\n" for line in lines) + "}\n"
    router = nginx_upstream(conf, "u")
    expected = router.get_target_nodes(keys)
    # nginx answers with the backend's listening address.
    agreement([e.replace("localhost", "127.0.0.1") if e else e for e in expected], got)


@pytest.mark.parametrize("count,weights", [(3, [1, 1, 1]), (10, [1, 2, 3, 1, 5, 1, 2, 1, 1, 4]),
                                           (50, [1 + i % 3 for i in range(50)])])
def test_nginx_agrees(tmp_path: Path, count: int, weights: list[int]) -> None:
    servers = [("127.0.0.1", port, w) for port, w in zip(free_ports(count), weights[:count], strict=True)]
    nginx_case(tmp_path, servers, varied_keys(3000, 100 + count))


def test_nginx_host_names_hash_as_written(tmp_path: Path) -> None:
    if {a[4][0] for a in socket.getaddrinfo("localhost", 80, proto=socket.IPPROTO_TCP)} != {"127.0.0.1"}:
        pytest.skip("localhost does not resolve to 127.0.0.1 alone here")
    a, b, c = free_ports(3)
    servers = [("localhost", a, 1), ("127.0.0.1", b, 2), ("localhost", c, 1)]
    nginx_case(tmp_path, servers, varied_keys(3000, 7))


def collision_on_port(layout: str, port: int, hosts: Iterable[str],
                      node_id: Callable[[str], str] = str) -> tuple[str, str, int]:
    """Two 127/8 hosts whose points collide, both free to listen on
    ``port``, and the point."""
    return shared_point(layout, hosts, node_id=node_id,
                        usable=lambda a, b: port_is_free(a, port) and port_is_free(b, port))


def nginx_collision(port: int) -> tuple[str, str, int]:
    """Two 127/8 hosts whose nginx points on `port` collide, and the point."""
    return collision_on_port("nginx", port, loopback_hosts(1, 200_000), lambda host: f"{host}:{port}")


def arc_before(ring: list[int], point: int) -> int:
    """How many hashes have ``point`` as their successor on ``ring``."""
    index = bisect.bisect_left(ring, point)
    return (point - ring[index - 1]) % 2**32 if index else point + 2**32 - ring[-1]


def nginx_collision_case() -> tuple[int, int, str, str, int]:
    """``(port, other, a, b, point)``: hosts ``a`` and ``b`` share ``point``
    on ``port``, beside a third server on ``other``.  The ports are the OS's
    pick, and the arc ending at the shared point could then be too narrow
    for a key search to land in; such a pick is taken again."""
    for _ in range(20):
        port, other = free_ports(2)
        a, b, point = nginx_collision(port)
        probe = ConsistentHashRouter(layout="nginx")
        probe.add_service_nodes([f"{a}:{port}", f"{b}:{port}", f"127.0.0.1:{other}"])
        # At least 1/4000 of the ring: ~50 of keys_on_point's 200,000 keys.
        if arc_before(probe.hash_ring, point) >= 2**32 // 4000:
            return port, other, a, b, point
    raise AssertionError("no pick of ports gave the shared point an arc keys can reach")


def test_nginx_shared_point_goes_to_the_server_listed_first(tmp_path: Path) -> None:
    port, other, a, b, point = nginx_collision_case()
    third = ("127.0.0.1", other, 1)
    for order in ([a, b], [b, a]):
        servers = [(h, port, 1) for h in order] + [third]
        probe = ConsistentHashRouter(layout="nginx")
        for h, p, _ in servers:
            probe.add_service_node(f"{h}:{p}")
        keys = keys_on_point(probe, point, 5, 11) + varied_keys(500, 12)
        assert probe.get_target_nodes(keys[:5]) == [f"{order[0]}:{port}"] * 5
        nginx_case(tmp_path, servers, keys)


# -- twemproxy -------------------------------------------------------------------


def twemproxy_case(tmp_path: Path, servers: Sequence, weights: list[int], names: list[str | None],
                   keys: list[str]) -> None:
    listen = free_port()
    lines = "".join(f"   - {s.host}:{s.port}:{w}" + (f" {n}" if n else "") + "\n"
                    for s, w, n in zip(servers, weights, names, strict=True))
    yaml = (f"pool:\n  listen: 127.0.0.1:{listen}\n  hash: md5\n  distribution: ketama\n"
            f"  auto_eject_hosts: false\n  servers:\n{lines}")
    with nutcracker(yaml, listen, tmp_path):
        set_through(listen, keys)
    ids = [twemproxy_id(s.host, s.port, n) for s, n in zip(servers, names, strict=True)]
    owner = owners_by_server(servers, ids, keys)
    router = twemproxy_pool(yaml, "pool")
    agreement(router.get_target_nodes(keys), [owner[k] for k in keys])


@pytest.mark.parametrize("count,weights", [(3, [1, 1, 1]), (10, [1, 2, 3, 1, 5, 1, 2, 1, 1, 4])])
def test_twemproxy_agrees(tmp_path: Path, count: int, weights: list[int]) -> None:
    names = [f"cache-{i}" if i % 3 == 1 else None for i in range(count)]
    with memcacheds(count) as servers:
        twemproxy_case(tmp_path, servers, weights, names, varied_keys(3000, 200 + count))


def ketama_name_collision() -> tuple[str, str, int]:
    return shared_point("ketama", (f"n{i}" for i in range(200_000)))


def test_twemproxy_shared_point_goes_to_the_name_sorted_first(tmp_path: Path) -> None:
    a, b, point = ketama_name_collision()
    first = min(a, b, key=lambda n: (len(n), n))
    with memcacheds(3) as servers:
        for names in ([a, b, "zz"], [b, a, "zz"]):
            router = twemproxy_pool(
                "p:\n  hash: md5\n  servers:\n" + "".join(
                    f"   - {s.host}:{s.port}:1 {n}\n" for s, n in zip(servers, names, strict=True)), "p")
            keys = keys_on_point(router, point, 5, 21) + varied_keys(500, 22)
            assert router.get_target_nodes(keys[:5]) == [first] * 5
            twemproxy_case(tmp_path, servers, [1, 1, 1], names, keys)
            for server in servers:
                server.flush()


# -- libmemcached through pylibmc ------------------------------------------------------


def pylibmc_case(servers: Sequence, weights: list[int], behaviors: dict[str, object],
                 layout: str, hash_name: str | None, keys: list[str]) -> None:
    pylibmc = pytest.importorskip("pylibmc", reason="pylibmc is in the test extra")
    client = pylibmc.Client([f"{s.host}:{s.port}:{w}" for s, w in zip(servers, weights, strict=True)],
                            behaviors=behaviors)
    for key in keys:  # one by one: set_multi aborts in the libmemcached pylibmc bundles
        assert client.set(key, "x")
    client.disconnect_all()
    ids = [libmemcached_id(s.host, s.port) for s in servers]
    owner = owners_by_server(servers, ids, keys)
    router = ConsistentHashRouter(layout=layout, hash=hash_name)
    for node, weight in zip(ids, weights, strict=True):
        router.add_service_node(node, weight)
    agreement(router.get_target_nodes(keys), [owner[k] for k in keys])


PYLIBMC_MODES = [
    pytest.param({"ketama": True}, "libmemcached", None, id="ketama"),
    pytest.param({"ketama": True, "hash": "md5"}, "libmemcached", "md5", id="ketama-md5"),
    pytest.param({"ketama_weighted": True}, "ketama", None, id="ketama_weighted"),
]


@pytest.mark.parametrize("behaviors,layout,hash_name", PYLIBMC_MODES)
@pytest.mark.parametrize("weights", [[1] * 3, [1] * 10, [1, 2, 3, 4, 5]],
                         ids=["3", "10", "5-weighted"])
def test_pylibmc_agrees(behaviors: dict[str, object], layout: str, hash_name: str | None,
                        weights: list[int]) -> None:
    with memcacheds(len(weights)) as servers:
        pylibmc_case(servers, weights, behaviors, layout, hash_name,
                     varied_keys(2000, 300 + len(weights) + sum(weights)))


#: Port 11211 is one port for every test process on the machine (suites run
#: at once in CI), so each process looks for free hosts in a /16 of 127/8 of
#: its own pick: two processes seldom meet on one host.
HOST_BLOCK = random.SystemRandom().randrange(1, 250) << 16


def free_11211_hosts(count: int, skip: int = 0) -> list[str]:
    hosts = []
    for host in loopback_hosts(HOST_BLOCK + 2 + skip, HOST_BLOCK + 5000):
        if port_is_free(host, 11211):
            hosts.append(host)
            if len(hosts) == count:
                return hosts
    raise AssertionError("no free 127/8 address for port 11211")


@pytest.mark.parametrize("behaviors,layout,hash_name", PYLIBMC_MODES)
def test_pylibmc_port_11211_leaves_the_port_out(behaviors: dict[str, object], layout: str,
                                                hash_name: str | None) -> None:
    with contextlib.ExitStack() as stack:
        for attempt in range(5):
            hosts = free_11211_hosts(4, skip=attempt * 8)
            try:
                servers = stack.enter_context(memcacheds(4, hosts=hosts, port=11211))
            except RuntimeError:  # a host taken between the check and the bind
                continue
            break
        else:
            raise AssertionError("memcached could not listen on port 11211 of 5 sets of free hosts")
        assert libmemcached_id(hosts[0], 11211) == hosts[0]
        pylibmc_case(servers, [1, 1, 1, 1], behaviors, layout, hash_name, varied_keys(2000, 400))


def test_fifty_servers_twemproxy_and_pylibmc(tmp_path: Path) -> None:
    weights = [1 + i % 4 for i in range(50)]
    with memcacheds(50) as servers:
        twemproxy_case(tmp_path, servers, weights, [None] * 50, varied_keys(3000, 500))
        for server in servers:  # empty them for the next client
            server.flush()
        pylibmc_case(servers, [1] * 50, {"ketama": True}, "libmemcached", None,
                     varied_keys(3000, 501))


def wide_11211_collision() -> tuple[str, str, int]:
    """Two 127/8 hosts whose libmemcached points on port 11211 collide, and
    the point.  The hosts come from a random block, and the arc ending at
    the shared point could then be too narrow for a key search to land in:
    such a pair is passed over."""
    for a, b, point in shared_points(
            "libmemcached", loopback_hosts(HOST_BLOCK + 2, HOST_BLOCK + 60_000),
            usable=lambda a, b: port_is_free(a, 11211) and port_is_free(b, 11211)):
        probe = ConsistentHashRouter(layout="libmemcached")
        probe.add_service_nodes([a, b])
        # At least 1/4000 of the ring: ~50 of keys_on_point's 200,000 keys.
        if arc_before(probe.hash_ring, point) >= 2**32 // 4000:
            return a, b, point
    raise AssertionError("no two hosts of the block share a point keys can reach")


def test_pylibmc_shared_point_goes_to_the_server_listed_first() -> None:
    # Ids with port 11211 are bare hosts: search 127/8 hosts whose
    # one_at_a_time points collide.
    a, b, point = wide_11211_collision()
    for order in ([a, b], [b, a]):
        with memcacheds(2, hosts=order, port=11211) as servers:
            probe = ConsistentHashRouter(layout="libmemcached")
            probe.add_service_nodes(order)
            keys = keys_on_point(probe, point, 5, 31) + varied_keys(300, 32)
            assert probe.get_target_nodes(keys[:5]) == [order[0]] * 5
            pylibmc_case(servers, [1, 1], {"ketama": True}, "libmemcached", None, keys)


# -- the system's libmemcached (1.1 on Debian 12) through ctypes ---------------------

# memcached_behavior_t positions (libmemcached-1.0/types/behavior.h).
BEHAVIOR_HASH, BEHAVIOR_KETAMA, BEHAVIOR_KETAMA_WEIGHTED = 2, 3, 16


def system_libmemcached() -> ctypes.CDLL:
    name = ctypes.util.find_library("memcached")
    if name is None:
        missing("libmemcached is not installed (Debian: apt-get install libmemcached-dev)")
    lib = ctypes.CDLL(name)
    lib.memcached_create.restype = ctypes.c_void_p
    lib.memcached_create.argtypes = [ctypes.c_void_p]
    lib.memcached_server_add_with_weight.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                                                     ctypes.c_uint16, ctypes.c_uint32]
    lib.memcached_behavior_set.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64]
    lib.memcached_generate_hash.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.memcached_generate_hash.restype = ctypes.c_uint32
    lib.memcached_free.argtypes = [ctypes.c_void_p]
    return lib


@pytest.mark.parametrize("mode,layout,hash_name", [
    ("ketama", "libmemcached", None), ("md5", "libmemcached", "md5"), ("weighted", "ketama", None)])
@pytest.mark.parametrize("count,weighted", [(3, False), (10, True), (50, False)])
def test_system_libmemcached_agrees(mode: str, layout: str, hash_name: str | None, count: int,
                                    weighted: bool) -> None:
    # memcached_generate_hash gives the index of the server libmemcached
    # picks for a key: no server needs to listen, so any host name and
    # port 11211 can be checked.
    lib = system_libmemcached()
    rng = random.Random(count * 7 + len(mode))
    servers = [(f"{rng.choice(['cache-a.example', '10.1.2.3', 'mc.local'])}{i}",
                rng.choice([11211, 11212, 20000 + i]), rng.randint(1, 5) if weighted else 1)
               for i in range(count)]
    memc = lib.memcached_create(None)
    assert memc
    try:
        if mode in ("ketama", "md5"):
            assert lib.memcached_behavior_set(memc, BEHAVIOR_KETAMA, 1) == 0
        if mode == "md5":
            assert lib.memcached_behavior_set(memc, BEHAVIOR_HASH, 1) == 0  # MEMCACHED_HASH_MD5
        if mode == "weighted":
            assert lib.memcached_behavior_set(memc, BEHAVIOR_KETAMA_WEIGHTED, 1) == 0
        for host, port, weight in servers:
            assert lib.memcached_server_add_with_weight(memc, host.encode(), port, weight) == 0
        ids = [libmemcached_id(host, port) for host, port, _ in servers]
        keys = varied_keys(4000, 600 + count)
        got = [ids[lib.memcached_generate_hash(memc, k.encode(), len(k.encode()))] for k in keys]
    finally:
        lib.memcached_free(memc)
    router = ConsistentHashRouter(layout=layout, hash=hash_name)
    for node, (_, _, weight) in zip(ids, servers, strict=True):
        router.add_service_node(node, weight)
    agreement(router.get_target_nodes(keys), got)
