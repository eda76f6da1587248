"""chash.compat: node ids as the references spell them, the readers of
nginx and twemproxy configuration, and ``chash route`` on those files.

Whether the rings route like the programs is tests/compat/test_compat_programs.py;
here: the parsing, the errors naming the line, and the layouts' own rules
(weights, ties, libketama counts) through the router.
"""
from __future__ import annotations

import pickle
import random
import re
from pathlib import Path

import pytest

from _support.collisions import shared_point
from chash import ConsistentHashRouter
from chash.cli import main
from chash.compat import (
    ConfigError,
    libmemcached_id,
    nginx_servers,
    nginx_upstream,
    twemproxy_id,
    twemproxy_pool,
    twemproxy_servers,
)

NGINX = """
# a comment
http {
    upstream other { server 10.9.9.9:1; }
    upstream app {
        hash $request_uri consistent;   # the ring
        server 10.0.0.1:8080 weight=2 max_fails=3;
        server "cache.local:80";
        server unix:/run/app.sock;
        keepalive 8;
    }
}
"""

TWEMPROXY = """\
alpha:                    # a pool
  listen: 127.0.0.1:22121
  hash: md5
  distribution: ketama
  auto_eject_hosts: false
  servers:
   - 127.0.0.1:11211:1
   - 127.0.0.1:11212:3 cache-b
   - '10.0.0.7:22122:1 z'
beta:
  servers:
   - 127.0.0.1:11211:1
"""


def test_ids_as_the_references_spell_them() -> None:
    assert twemproxy_id("10.0.0.1", 11211) == "10.0.0.1"
    assert twemproxy_id("10.0.0.1", 22122) == "10.0.0.1:22122"
    assert twemproxy_id("10.0.0.1", 22122, "cache-a") == "cache-a"
    assert libmemcached_id("cache.local") == "cache.local"
    assert libmemcached_id("cache.local", 11212) == "cache.local:11212"


def test_nginx_upstream() -> None:
    servers = nginx_servers(NGINX, "app")
    assert [(s.address, s.weight, s.line) for s in servers] == [
        ("10.0.0.1:8080", 2, 7), ("cache.local:80", 1, 8), ("unix:/run/app.sock", 1, 9)]
    router = nginx_upstream(NGINX, "app")
    assert router.layout == "nginx" and router.hash == "crc32"
    assert router.nodes == ["10.0.0.1:8080", "cache.local:80", "unix:/run/app.sock"]
    assert router.points == {"10.0.0.1:8080": 320, "cache.local:80": 160, "unix:/run/app.sock": 160}


@pytest.mark.parametrize("conf,message", [
    ("upstream app { server a:1; }", "no 'hash KEY consistent;'"),
    ("upstream app { hash $x; server a:1; }", "line 1: 'hash' without 'consistent'"),
    ("upstream app {\n hash $x consistent;\n server a:1 weight=1.5;\n}", "line 3: weight"),
    ("upstream app {\n hash $x consistent;\n server a:1 backup;\n}", "line 3: nginx does not hash"),
    ("upstream app {\n hash $x consistent;\n server a:1 down;\n}", "line 3: a 'down' server"),
    ("upstream app { hash $x consistent; }", "no server line"),
    ("upstream app { hash $x consistent; server a:1;", "not closed"),
    ("upstream app { hash \"$x consistent; }", "line 1: unterminated"),
    ("upstream web { hash $x consistent; server a:1; }", "no 'upstream app"),
])
def test_nginx_errors_name_the_line(conf: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        nginx_upstream(conf, "app")


def test_nginx_address_listed_twice_owns_the_longer_chain() -> None:
    router = nginx_upstream("upstream app { hash $x consistent; server a:1; server b:2; "
                            "server a:1 weight=3; }", "app")
    assert router.nodes == ["a:1", "b:2"] and router.points == {"a:1": 480, "b:2": 160}


def test_twemproxy_pool() -> None:
    servers = twemproxy_servers(TWEMPROXY, "alpha")
    # Sorted by ring name, shorter first, then bytewise, as twemproxy does.
    assert [s.node_id for s in servers] == ["z", "cache-b", "127.0.0.1"]
    assert [s.line for s in servers] == [9, 8, 7]
    router = twemproxy_pool(TWEMPROXY, "alpha")
    assert router.layout == "ketama" and router.nodes == ["z", "cache-b", "127.0.0.1"]
    assert router.weights == {"z": 1.0, "cache-b": 3.0, "127.0.0.1": 1.0}
    # libketama's counts: floorf(w / 5 * 160 / 4 * 3) * 4.
    assert router.points == {"z": 96, "cache-b": 288, "127.0.0.1": 96}


@pytest.mark.parametrize("yaml,pool,message", [
    (TWEMPROXY, "beta", "line 10: hash 'fnv1a_64'"),
    (TWEMPROXY, "gamma", "no pool 'gamma'"),
    ("p:\n  hash: md5\n  distribution: modula\n  servers:\n   - a:1:1\n", "p", "line 3: distribution"),
    ("p:\n  hash: md5\n  servers:\n   - a:1\n", "p", "line 4: expected 'host:port:weight"),
    ("p:\n  hash: md5\n  servers:\n   - a:1:0\n", "p", "line 4: the weight must be >= 1"),
    ("p:\n  hash: md5\n  servers:\n   - a:1:1 x\n   - b:2:1 x\n", "p", "line 5: a server named 'x'"),
    ("p:\n  hash: md5\n  servers:\n", "p", "line 1: pool 'p' has no servers"),
    ("p:\n  hash: md5\n   listen: x\n", "p", "line 3: unexpected indentation"),
    ("  - a:1:1\n", "p", "line 1: indented line outside a pool"),
    ("p:\n  - a:1:1\n", "p", "line 2: a list item outside 'servers:'"),
    ("p\n", "p", "line 1: expected 'POOL_NAME:'"),
])
def test_twemproxy_errors_name_the_line(yaml: str, pool: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        twemproxy_pool(yaml, pool)


def test_compat_weights_are_integers() -> None:
    for layout in ("nginx", "ketama", "libmemcached"):
        router = ConsistentHashRouter(layout=layout)
        with pytest.raises(ValueError, match=f"the {layout} layout takes integer weights.*1.5"):
            router.add_service_node("a", 1.5)
        with pytest.raises(ValueError, match="integer weights"):
            router.add_service_nodes(["a", "b"], 0.5)
        assert len(router) == 0
    router = ConsistentHashRouter(layout="nginx")
    router.add_service_node("a:1", 3)
    assert router.points == {"a:1": 480}


def test_ketama_counts_follow_every_weight() -> None:
    router = ConsistentHashRouter(layout="ketama")
    router.add_service_nodes(["a", "b", "c"])
    assert router.points == {"a": 160, "b": 160, "c": 160}
    before = router.hash_ring
    router.add_service_node("b", 2)  # every node's share changes
    assert router.points == {"a": 120, "b": 240, "c": 120}
    router._check()
    router.add_service_node("b", 1)
    assert router.hash_ring == before
    # 25 equal weights: 39.99999 groups in single precision, so 156 points.
    many = ConsistentHashRouter(layout="ketama")
    many.add_service_nodes([f"n{i}" for i in range(25)])
    assert set(many.points.values()) == {156}
    # A node whose share rounds to no point is refused, the router unchanged.
    skewed = ConsistentHashRouter(layout="ketama")
    skewed.add_service_node("big", 100)
    with pytest.raises(ValueError, match="node 'tiny' would own 0 points"):
        skewed.add_service_node("tiny", 1)
    assert skewed.nodes == ["big"] and skewed.points == {"big": 160}
    skewed._check()


@pytest.mark.parametrize(("layout", "hash_name"), [("ketama", None), ("libmemcached", "one_at_a_time"),
                                               ("libmemcached", "md5")])
def test_recounts_in_place_build_the_ring_of_one_step(layout: str, hash_name: str | None) -> None:
    # Adds, reweighs and removals recount every node but move only the
    # points between old and new counts: the ring must be the one built in
    # one step from the same nodes, weights and order (pickling rebuilds so).
    rnd = random.Random(7)
    router = ConsistentHashRouter(layout=layout, hash=hash_name)
    for step in range(150):
        node = f"10.0.{rnd.randrange(30)}.1:11211"
        roll = rnd.random()
        if roll < 0.5:
            router.add_service_node(node, rnd.choice([1, 1, 2, 3, 5]))
        elif roll < 0.65:
            router.add_service_nodes([f"h{rnd.randrange(40)}" for _ in range(rnd.randrange(1, 6))],
                                     rnd.choice([1, 2, 4]))
        else:
            router.discard_service_node(node)
        router._check()
        fresh = pickle.loads(pickle.dumps(router))
        assert (fresh.hash_ring, fresh.node_map, fresh.points) == (
            router.hash_ring, router.node_map, router.points), step


def test_libmemcached_weights_switch_to_weighted_ketama() -> None:
    router = ConsistentHashRouter(layout="libmemcached")
    router.add_service_nodes(["10.0.0.1", "10.0.0.2:11212"])
    assert router.points == {"10.0.0.1": 100, "10.0.0.2:11212": 100}
    plain = router.hash_ring
    router.add_service_node("10.0.0.1", 2)  # libmemcached turns to weighted ketama
    ketama = ConsistentHashRouter(layout="ketama")
    ketama.add_service_node("10.0.0.1", 2)
    ketama.add_service_node("10.0.0.2:11212", 1)
    assert router.hash_ring == ketama.hash_ring
    assert router.hash == "one_at_a_time"  # the key hash stays
    router.add_service_node("10.0.0.1", 1)
    assert router.hash_ring == plain


@pytest.mark.parametrize("layout", ["nginx", "ketama", "libmemcached"])
def test_order_is_configuration_in_compat_layouts(layout: str) -> None:
    a = ConsistentHashRouter(layout=layout)
    a.add_service_nodes(["x:1", "y:2"])
    b = ConsistentHashRouter(layout=layout)
    b.add_service_nodes(["y:2", "x:1"])
    assert a != b and a.hash_ring == b.hash_ring
    clone = pickle.loads(pickle.dumps(b))
    assert clone == b and clone.nodes == ["y:2", "x:1"]


def test_ties_go_to_the_node_added_first() -> None:
    # Two ids whose nginx points collide: searched here, offline.
    first, second, point = shared_point("nginx", (f"h{i}:80" for i in range(100_000)))
    for order in ([first, second], [second, first]):
        router = ConsistentHashRouter(layout="nginx")
        router.add_service_nodes(order)
        assert router.node_map[point] == order[0]
        router._check()
        one_by_one = ConsistentHashRouter(layout="nginx")
        for node in order:
            one_by_one.add_service_node(node)
        assert one_by_one.node_map[point] == order[0]
        one_by_one.remove_service_node(order[0])
        one_by_one.add_service_node(order[0])  # re-added: now it comes second
        assert one_by_one.node_map[point] == order[1]
    # python keeps the order-independent rule: the smallest id.
    for order in ([first, second], [second, first]):
        router = ConsistentHashRouter(hash="crc32")
        router.add_service_nodes(order)
        router._check()


def test_route_command_reads_the_configurations(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nginx_conf = tmp_path / "nginx.conf"
    nginx_conf.write_text(NGINX, encoding="utf-8")
    assert main(["route", "/users/7", "--nginx-conf", str(nginx_conf), "--upstream", "app"]) == 0
    owner = nginx_upstream(NGINX, "app").get_target_node("/users/7")
    assert f"owner       {owner}" in capsys.readouterr().out
    yml = tmp_path / "nutcracker.yml"
    yml.write_text(TWEMPROXY, encoding="utf-8")
    assert main(["route", "k1", "--twemproxy-conf", str(yml), "--pool", "alpha", "--json"]) == 0
    assert f'"owner": "{twemproxy_pool(TWEMPROXY, "alpha").get_target_node("k1")}"' in capsys.readouterr().out
    for argv, message in [
        (["--twemproxy-conf", str(yml), "--pool", "beta"], "line 10: hash 'fnv1a_64'"),
        (["--nginx-conf", str(nginx_conf)], "--upstream NAME is needed"),
        (["--nginx-conf", str(nginx_conf), "--upstream", "app", "--layout", "ketama"], "come from the configuration"),
        (["--nodes", "a", "--pool", "p"], "--pool with --twemproxy-conf"),
        (["--nginx-conf", str(tmp_path / "missing"), "--upstream", "app"], "cannot read"),
    ]:
        with pytest.raises(SystemExit) as exit_info:
            main(["route", "k", *argv])
        assert exit_info.value.code == 2
        assert message in capsys.readouterr().err
