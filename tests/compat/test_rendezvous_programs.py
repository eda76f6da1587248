"""RendezvousRouter's program layouts against the real programs, key for
key: pymemcache 4.0.0's RendezvousHash and HashClient (the package), Caddy
2.6's header and uri_hash policies and Squid 5.7's CARP (the Debian 12
programs, started on 127.0.0.1 in front of backends that name themselves),
on several shapes (3 to 20 backends, weights for Squid, adds and removes).
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from _support.compat_programs import varied_keys
from _support.http_backends import Backend
from _support.rendezvous_programs import caddy, chosen_backend, get, squid
from chash import RendezvousRouter

SHAPES = [3, 7, 20]


@pytest.fixture
def farm() -> Iterator[list[Backend]]:
    made = [Backend() for _ in range(21)]
    yield made
    for backend in made:
        backend.stop()


# ------------------------------------------------------------------
# pymemcache


def test_pymemcache_rendezvous_hash_key_for_key() -> None:
    rendezvous = pytest.importorskip("pymemcache.client.rendezvous")
    keys = varied_keys(2000, seed=30) + [f"user:{i}" for i in range(2000)]
    nodes = [f"10.1.{i // 8}.{i % 8}:11211" for i in range(20)]
    for n in SHAPES:
        real = rendezvous.RendezvousHash()
        router = RendezvousRouter(layout="pymemcache")
        for node in nodes[:n]:
            real.add_node(node)
            router.add_service_node(node)
        assert router.get_target_nodes(keys) == [real.get_node(k) for k in keys]
        # Removes and an add, as a HashClient does when servers die and return.
        for gone in nodes[: n // 2 : 2]:
            real.remove_node(gone)
            router.remove_service_node(gone)
        real.add_node("memcache-extra:11211")
        router.add_service_node("memcache-extra:11211")
        router._check()
        assert router.get_target_nodes(keys) == [real.get_node(k) for k in keys]


def test_pymemcache_hash_client_server_choice() -> None:
    hash_client = pytest.importorskip("pymemcache.client.hash")
    servers = [("127.0.0.1", 11211 + i) for i in range(9)]
    client = hash_client.HashClient(servers, use_pooling=False, connect_timeout=0.1)
    router = RendezvousRouter(layout="pymemcache")
    router.add_service_nodes(f"{host}:{port}" for host, port in servers)
    keys = [k for k in varied_keys(1500, seed=31) if k.isascii()]
    assert len(keys) > 500
    for key in keys:
        chosen = client._get_client(key)
        assert f"{chosen.server[0]}:{chosen.server[1]}" == router.get_target_node(key)


# ------------------------------------------------------------------
# Caddy


def _check_caddy(dials: list[str], tmp_path: Path, keys: list[str]) -> None:
    router = RendezvousRouter(layout="caddy")
    router.add_service_nodes(dials)
    tmp_path.mkdir()
    with caddy(dials, tmp_path) as (header_port, uri_port):
        for i, key in enumerate(keys):
            value = key.encode()
            assert chosen_backend(get(header_port, "/", {"X-Key": value})) == \
                router.get_target_node(value), key
            target = f"/items/{i}/{key.encode().hex()}?v={i % 7}"
            assert chosen_backend(get(uri_port, target)) == router.get_target_node(target)


@pytest.mark.parametrize("n", SHAPES)
def test_caddy_header_and_uri_hash_key_for_key(farm: list[Backend], tmp_path: Path,
                                               n: int) -> None:
    keys = varied_keys(150, seed=32 + n)
    dials = [b.node for b in farm[:n]]
    _check_caddy(dials, tmp_path / "all", keys)
    # One upstream removed from the middle, one added at the end.
    changed = dials[: n // 2] + dials[n // 2 + 1:] + ([farm[n].node] if n < len(farm) else [])
    _check_caddy(changed, tmp_path / "changed", keys)


# ------------------------------------------------------------------
# Squid


def _check_squid(peers: list[tuple[str, Backend, int]], tmp_path: Path, urls: list[str]) -> None:
    router = RendezvousRouter(layout="squid")
    for name, _, weight in peers:
        router.add_service_node(name, weight)
    name_of = {backend.node: name for name, backend, _ in peers}
    tmp_path.mkdir()
    with squid([(name, b.port, w) for name, b, w in peers], tmp_path) as port:
        for url in urls:
            assert name_of[chosen_backend(get(port, url))] == router.get_target_node(url), url


@pytest.mark.parametrize("n", SHAPES)
def test_squid_carp_key_for_key(farm: list[Backend], tmp_path: Path, n: int) -> None:
    urls = [f"http://origin.test/objects/{i}/{key.encode().hex()}"
            for i, key in enumerate(varied_keys(120, seed=40 + n))]
    urls += [f"http://shop{i % 5}.test:8080/p?id={i}" for i in range(40)]
    weights = [1 + (k * 7) % 5 for k in range(n)]
    peers = [(f"peer{k}.test", farm[k], weights[k]) for k in range(n)]
    _check_squid(peers, tmp_path / "weighted", urls)
    # A peer removed, a heavy one added, the rest reordered by weight as
    # Squid does.
    changed = [p for k, p in enumerate(peers) if k != n // 2]
    if n < len(farm):
        changed.append((f"peer{n}.test", farm[n], 9))
    _check_squid(changed, tmp_path / "changed", urls)


def test_pymemcache_tie_goes_to_the_larger_name_as_in_pymemcache() -> None:
    rendezvous = pytest.importorskip("pymemcache.client.rendezvous")
    from chash._chash import _hash

    key, seen, pair = "tie-key", {}, None
    for i in range(1 << 20):  # a birthday search: a pair turns up within ~2**17 names
        node = f"10.9.{i >> 8 & 255}.{i & 255}:{11211 + (i >> 16)}"
        score = _hash("murmur3", f"{node}-{key}".encode())
        if score in seen:
            pair = (seen[score], node)
            break
        seen[score] = node
    assert pair is not None
    for order in (pair, pair[::-1]):
        real = rendezvous.RendezvousHash()
        router = RendezvousRouter(layout="pymemcache")
        for node in order:
            real.add_node(node)
            router.add_service_node(node)
        assert router.get_target_node(key) == real.get_node(key) == max(pair)
        assert router.get_preference_list(key, 2) == sorted(pair, reverse=True)
