"""layout="haproxy" and chash.compat.haproxy_backend against the real HAProxy.

One haproxy 2.6 process (tests/_support/compat_programs.py) runs every
shape at once: a backend and a front port per shape, and 40 listeners,
one per server, each answering its server's name.  The keys go through
the front as an ``X-Key`` header (``balance hdr(X-Key)``), as the URI
(``balance uri``) or as a URL parameter (``balance url_param``); the
server that answered is where HAProxy sent the key.  The same
configuration text is read by ``haproxy_backend``, and the router must
agree on every key of every shape.  Shapes: equal and unequal weights
(up to 256), explicit ids mixed with numbered ones, disabled, weight-0 and
backup servers, each hash function with and without the avalanche, 40
servers, settings inherited from ``defaults``.  A further front answers
HAProxy's own sdbm, djb2, wt6 and crc32 converters (with and without
full_hash) for the key hashes.
"""
from __future__ import annotations

import random
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from _support.compat_programs import ask_http, haproxy, varied_keys
from _support.hashes import value
from _support.ports import free_ports
from chash.compat import haproxy_backend

SERVERS = 40
KEYS = 1500


@dataclass(frozen=True)
class Shape:
    """A backend: its balance and hash-type lines and its servers, each
    ``(server number, extra words of its server line)``."""

    name: str
    balance: str | None
    hash_type: str | None
    servers: tuple[tuple[int, str], ...]
    keys_as: str = "header"  # header, uri or param


def _weights(rng: random.Random, count: int, high: int) -> tuple[tuple[int, str], ...]:
    return tuple((k, f"weight {rng.randint(1, high)}") for k in range(1, count + 1))


def _shapes() -> list[Shape]:
    rng = random.Random(21)
    shapes = [
        Shape("plain", "hdr(X-Key)", "consistent", tuple((k, "") for k in range(1, 6))),
        Shape("weights", "hdr(X-Key)", "consistent",
              tuple(zip(range(1, 9), ("weight 1", "weight 2", "weight 3", "weight 5", "weight 10",
                                      "weight 50", "weight 100", "weight 256"), strict=True))),
        Shape("ids", "hdr(X-Key)", "consistent sdbm avalanche", (
            (1, "id 7"), (2, ""), (3, "id 2 weight 3"), (4, ""), (5, "id 100 weight 2"),
            (6, "disabled"), (7, "weight 0"), (8, ""), (9, "backup"), (10, "id 1"), (11, ""))),
        Shape("forty", "hdr(X-Key)", "consistent", tuple(
            (k, f"weight {rng.randint(1, 20)}" + (f" id {1000 + k}" if k % 7 == 0 else ""))
            for k in range(1, SERVERS + 1))),
        Shape("uri", "uri", "consistent wt6", _weights(rng, 7, 4), keys_as="uri"),
        Shape("param", "url_param user", "consistent djb2 avalanche", _weights(rng, 6, 4),
              keys_as="param"),
        Shape("inherited", None, None, (*((k, "") for k in range(1, 6)), (6, "weight 3"))),
    ]
    for function in ("sdbm", "djb2", "wt6", "crc32"):
        for modifier in ("", " avalanche"):
            if function == "sdbm" and modifier:
                continue  # the "ids" shape
            shapes.append(Shape(f"{function}{modifier.strip()}", "hdr(X-Key)",
                                f"consistent {function}{modifier}", _weights(rng, 6, 4)))
    return shapes


SHAPES = _shapes()


@dataclass(frozen=True)
class Running:
    cfg: str
    fronts: dict[str, int]
    hashes_front: int


def _config(listeners: list[int], fronts: dict[str, int], hashes_front: int) -> str:
    out = ["global", "    maxconn 4000", "    nbthread 1",
           "defaults", "    mode http", "    timeout connect 5s", "    timeout client 30s",
           "    timeout server 30s", ""]
    for k, port in enumerate(listeners, start=1):
        out += [f"frontend listener{k}", f"    bind 127.0.0.1:{port}",
                f"    http-request return status 200 content-type text/plain string s{k}", ""]
    out += ["frontend hashes", f"    bind 127.0.0.1:{hashes_front}",
            "    http-request return status 200 content-type text/plain lf-string \""
            + " ".join(f"%[req.hdr(X-Key),{f}({a})]" for f in ("sdbm", "djb2", "wt6", "crc32")
                       for a in (0, 1)) + "\"", ""]
    inherited = [s for s in SHAPES if s.balance is None]
    for shape in [s for s in SHAPES if s.balance is not None] + inherited:
        if shape.balance is None:  # a defaults section of its own, before its backend
            out += ["defaults inherit", "    mode http", "    timeout connect 5s",
                    "    timeout client 30s", "    timeout server 30s",
                    "    balance hdr(X-Key)", "    hash-type consistent crc32 avalanche",
                    "    default-server weight 2", ""]
        out += [f"backend {shape.name}"]
        if shape.balance is not None:
            out += [f"    balance {shape.balance}", f"    hash-type {shape.hash_type}"]
        out += [f"    server s{k} 127.0.0.1:{listeners[k - 1]} {extra}".rstrip()
                for k, extra in shape.servers]
        out += [f"frontend front_{shape.name}", f"    bind 127.0.0.1:{fronts[shape.name]}",
                f"    default_backend {shape.name}", ""]
    return "\n".join(out) + "\n"


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    ports = free_ports(SERVERS + len(SHAPES) + 1)
    listeners, rest = ports[:SERVERS], ports[SERVERS:]
    fronts = {shape.name: port for shape, port in zip(SHAPES, rest, strict=False)}
    cfg = _config(listeners, fronts, rest[-1])
    with haproxy(cfg, ports, tmp_path_factory.mktemp("haproxy")):
        yield Running(cfg, fronts, rest[-1])


def _keys(seed: int) -> list[str]:
    # hdr() hashes a header's first value: no commas in the keys.
    return [k for k in varied_keys(KEYS + 200, seed) if "," not in k][:KEYS]


@pytest.mark.parametrize("shape", SHAPES, ids=[s.name for s in SHAPES])
def test_every_key_agrees(running: Running, shape: Shape) -> None:
    keys = _keys(len(shape.name) * 31 + sum(map(ord, shape.name)))
    if shape.keys_as == "uri":
        routed = ["/" + urllib.parse.quote(k, safe="") for k in keys]
        requests: list[tuple[str, str | None]] = [(path, None) for path in routed]
    elif shape.keys_as == "param":
        routed = [urllib.parse.quote(k, safe="") for k in keys]
        requests = [(f"/p?a=1&user={v}&b=2", None) for v in routed]
    else:
        routed = keys
        requests = [("/", k) for k in keys]
    got = ask_http(running.fronts[shape.name], requests, "haproxy")
    router = haproxy_backend(running.cfg, shape.name)
    want = router.get_target_nodes(routed)
    wrong = [(k, g, w) for k, g, w in zip(routed, got, want, strict=True) if g != w]
    assert not wrong, f"{len(wrong)} of {len(keys)} keys differ, e.g. {wrong[:3]}"
    # Every server with points was used: the shape is not degenerate.
    assert set(got) == set(router.nodes) or len(router.nodes) > 20


def test_shapes_have_the_ids_haproxy_gives(running: Running) -> None:
    ids = haproxy_backend(running.cfg, "ids").ids
    # Explicit 7, 2, 100, 1; the counter from 1: s1 (own id) -> 2; s2 takes
    # 3 (2 is s3's) -> 4; s3 -> 5; s4 takes 5 -> 6; s5 -> 7; s6 (disabled)
    # takes 8 -> 9; s7 (weight 0) 9; s8 10; s9 (backup) 11; s10 -> 13; s11 13.
    # Servers out of the ring keep their ids and move the counter.
    assert ids == {"s1": 7, "s2": 3, "s3": 2, "s4": 5, "s5": 100, "s8": 10, "s10": 1, "s11": 13}
    inherited = haproxy_backend(running.cfg, "inherited")
    assert inherited.hash == "crc32_avalanche"  # and default-server's weight:
    assert inherited.weights == {"s1": 2, "s2": 2, "s3": 2, "s4": 2, "s5": 2, "s6": 3}


def test_key_hashes_are_haproxys(running: Running) -> None:
    keys = _keys(5)
    got = ask_http(running.hashes_front, [("/", k) for k in keys], "haproxy")
    names = [f"{f}{'_avalanche' if a else ''}" for f in ("sdbm", "djb2", "wt6", "crc32") for a in (0, 1)]
    for key, line in zip(keys, got, strict=True):
        assert [int(v) for v in line.split()] == [value(n, key.encode()) for n in names], key
