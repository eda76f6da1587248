"""The varnish and nghttpx layouts against the real programs, key for key:
Varnish 7.1's directors.shard() and nghttpx 1.52's affinity=cookie and
affinity=ip (the Debian 12 programs, started on 127.0.0.1 with their own
configuration, ports and directories), on several shapes: 2 to 20
backends, weights and replicas for Varnish, a backend removed, backends
marked sick for the director's healthy walk, IPv4 backends and backends
with nghttpx's dns flag.

Varnish tells its pick from vcl_synth (the backend's name in a header), so
thousands of keys cost one request each; a few hundred more go through to
the backends, which name themselves, to show a pick is where a request
goes.  nghttpx is asked through its backends only.
"""
from __future__ import annotations

import http.client
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from _support.compat_programs import varied_keys
from _support.http_backends import Backend
from _support.rendezvous_programs import chosen_backend
from _support.ring_programs import ShardBackend, ShardDirector, nghttpx, varnish
from chash import ConsistentHashRouter
from chash.compat import nghttpx_id, varnish_key


@pytest.fixture
def farm() -> Iterator[list[Backend]]:
    made = [Backend() for _ in range(20)]
    yield made
    for backend in made:
        backend.stop()


def shard_router(director: ShardDirector) -> ConsistentHashRouter:
    """The router of a director: its backends added in order, its removed
    ones taken out."""
    router = ConsistentHashRouter(director.replicas, layout="varnish")
    for b in director.backends:
        router.add_service_node(b.name, b.weight)
    for name in director.removed:
        router.remove_service_node(name)
    router._check()
    return router


def edge_hashes(router: ConsistentHashRouter, rng: random.Random, n: int) -> list[int]:
    """Ring positions a lookup can get wrong: the ends, every point and one
    either side of a sample of them, and random ones."""
    ring = router.hash_ring
    out = [0, 1, 2**32 - 1, ring[0], ring[-1], ring[-1] + 1 if ring[-1] < 2**32 - 1 else 0]
    for value in rng.sample(ring, min(len(ring), n // 3)):
        out += [value, max(0, value - 1), min(2**32 - 1, value + 1)]
    return out + [rng.randrange(2**32) for _ in range(n)]


# ------------------------------------------------------------------
# Varnish


def shapes(farm: list[Backend]) -> list[ShardDirector]:
    def be(i: int, weight: float = 1.0) -> ShardBackend:
        return ShardBackend(f"be{i}", farm[i].port, weight)

    return [
        ShardDirector(tuple(be(i) for i in range(3))),
        ShardDirector(tuple(be(i, (1.0, 2.0, 1.5, 3.25)[i % 4]) for i in range(7))),
        ShardDirector(tuple(be(i, 1.0 + (i % 5) / 2) for i in range(20)), replicas=13),
        # Two points in all: every key to the second (the bisection's first probe).
        ShardDirector((be(0), be(1)), replicas=1),
        # Removed after adding: the director's backend array closes the hole.
        ShardDirector(tuple(be(i) for i in range(9)), removed=("be2", "be5")),
    ]


def test_varnish_shard_director_key_for_key(farm: list[Backend], tmp_path: Path) -> None:
    directors = shapes(farm)
    rng = random.Random(71)
    keys = varied_keys(1500, seed=71) + [f"/article/{i}" for i in range(500)]
    with varnish(directors, tmp_path) as v:
        for number, director in enumerate(directors):
            router = shard_router(director)
            picks = [v.pick(number, key=k, healthy="IGNORE") for k in keys]
            assert picks == router.get_target_nodes(keys), number
            hashes = edge_hashes(router, rng, 300)
            picks = [v.pick(number, hash=h, healthy="IGNORE") for h in hashes]
            assert picks == router.get_target_nodes_by_hash(hashes), number
        # The director's key() is varnish_key, and the router's key hash.
        for k in keys[:200]:
            assert v.key_hash(k) == varnish_key(k) == ConsistentHashRouter(
                layout="varnish")._calculate_hash(k)


def test_varnish_walk_is_the_preference_list(farm: list[Backend], tmp_path: Path) -> None:
    """alt and healthy: IGNORE's alt=k is node k of the preference list;
    with backends sick, CHOSEN's is the first healthy one from node k on,
    ALL's healthy node k (counting from 0)."""
    directors = shapes(farm)[:3]
    keys = [f"session-{i}" for i in range(150)]
    # One backend is one VCL backend whatever its directors: sick in all.
    down = {"be1", "be4", "be11", "be12"}
    with varnish(directors, tmp_path) as v:
        for number, director in enumerate(directors):
            router = shard_router(director)
            n = len(router)
            walks = {k: router.get_preference_list(k, n) for k in keys}
            for alt in (0, 1, 2):
                assert [v.pick(number, key=k, alt=alt, healthy="IGNORE") for k in keys] == [
                    walks[k][alt] for k in keys]
        for name in sorted(down):
            v.set_health(name, "sick")
        for number, director in enumerate(directors):
            router = shard_router(director)
            n = len(router)
            for k in keys:
                walk = router.get_preference_list(k, n)
                healthy = [node for node in walk if node not in down]
                for alt in (0, 1, 2):
                    # Where a healthy backend is left to find (else the
                    # director falls back to one it passed: not modelled).
                    chosen = [node for node in walk[alt:] if node not in down]
                    if chosen:
                        assert v.pick(number, key=k, alt=alt) == chosen[0], (number, k, alt)
                    if alt < len(healthy):
                        assert v.pick(number, key=k, alt=alt, healthy="ALL") == healthy[alt]
                assert v.pick(number, key=k, healthy="IGNORE") == walk[0]


def test_varnish_passes_to_the_picked_backend(farm: list[Backend], tmp_path: Path) -> None:
    director = shapes(farm)[1]
    router = shard_router(director)
    by_port = {f"127.0.0.1:{b.port}": b.name for b in director.backends}
    keys = [f"user:{i}" for i in range(200)]
    with varnish([director], tmp_path) as v:
        answered = [by_port[chosen_backend(v.fetch(0, k))] for k in keys]
    assert answered == router.get_target_nodes(keys)
    assert len(set(answered)) == len(director.backends)


# ------------------------------------------------------------------
# nghttpx


def ask(port: int, headers: dict[str, str], source: str = "127.0.0.1") -> str:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20, source_address=(source, 0))
    try:
        conn.request("GET", "/", headers=headers)
        response = conn.getresponse()
        body = response.read()
        if response.status != 200:
            raise AssertionError(f"nghttpx answered {response.status}: {body[:200]!r}")
        return chosen_backend(body)
    finally:
        conn.close()


@pytest.mark.parametrize("n,dns", [(3, False), (7, False), (20, False), (5, True)],
                         ids=["3", "7", "20", "dns"])
def test_nghttpx_cookie_affinity(farm: list[Backend], tmp_path: Path, n: int, dns: bool) -> None:
    """affinity=cookie: a cookie's 8 hex digits are a ring position."""
    rng = random.Random(n)
    backends = farm[:n]
    router = ConsistentHashRouter(layout="nghttpx")
    router.add_service_nodes(nghttpx_id("127.0.0.1", b.port, dns=dns) for b in backends)
    router._check()
    # 0 is no cookie to nghttpx (it then draws one at random).
    hashes = [h for h in edge_hashes(router, rng, 250) if h != 0]
    spec = [f"127.0.0.1,{b.port}" + (";dns" if dns else "") for b in backends]
    with nghttpx(spec, tmp_path, "cookie") as port:
        answered = [ask(port, {"Cookie": f"lb={h:08x}"}) for h in hashes]
    want = [node.removesuffix(";dns") for node in router.get_target_nodes_by_hash(hashes)]
    assert answered == want


def test_nghttpx_ip_affinity(farm: list[Backend], tmp_path: Path) -> None:
    """affinity=ip: the client's address, from 127/8 sources."""
    backends = farm[:7]
    router = ConsistentHashRouter(layout="nghttpx")
    router.add_service_nodes(b.node for b in backends)
    sources = [f"127.{i % 7}.{i // 7}.{(i * 37) % 250 + 2}" for i in range(120)]
    with nghttpx([f"127.0.0.1,{b.port}" for b in backends], tmp_path, "ip") as port:
        answered = [ask(port, {}, source) for source in sources]
    assert answered == router.get_target_nodes(sources)
    assert len(set(answered)) > 3
