"""chash.compat.haproxy_backend: reading an HAProxy backend, and its errors.

What routes is proven against the real haproxy in test_haproxy_program.py;
here: the ids, weights and hashes read from configurations, inheritance
from defaults, and a ConfigError naming the line for everything chash
cannot route like HAProxy.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from chash.cli import main
from chash.compat import ConfigError, haproxy_backend, haproxy_backend_config, haproxy_servers

BASE = """\
global
    maxconn 100   # a comment
defaults
    mode http
backend app
    balance hdr(X-User)
    hash-type consistent
{servers}
frontend f
    bind :80
    default_backend app
"""


def conf(servers: str, balance: str = "hdr(X-User)", hash_type: str = "consistent") -> str:
    return BASE.format(servers=servers).replace("hdr(X-User)", balance).replace(
        "hash-type consistent", f"hash-type {hash_type}")


def test_servers_ids_weights_and_states() -> None:
    text = conf("    server a 10.0.0.1:80 weight 3 id 4 check hash-key id\n"
                "    server b 10.0.0.2:80\n"
                "    server 'c d' 10.0.0.3:80 disabled\n"
                "    server e 10.0.0.4:80 weight 0\n"
                "    server f 10.0.0.5:80 backup\n"
                "    server g 10.0.0.6:80 maxconn 10 weight 256\n")
    servers = haproxy_servers(text, "app")
    assert [(s.name, s.weight, s.puid, s.in_ring) for s in servers] == [
        ("a", 3, 4, True), ("b", 1, 2, True), ("c d", 1, 3, False), ("e", 0, 5, False),
        ("f", 1, 6, False), ("g", 256, 7, True)]
    assert [s.line for s in servers] == [8, 9, 10, 11, 12, 13]
    router = haproxy_backend(text, "app")
    assert router.ids == {"a": 4, "b": 2, "g": 7}
    assert router.points == {"a": 48, "b": 16, "g": 4096}
    assert router.hash == "sdbm_avalanche" and router.layout == "haproxy"


@pytest.mark.parametrize(("hash_type", "want"), [
    ("consistent", "sdbm_avalanche"), ("consistent sdbm", "sdbm"),
    ("consistent sdbm avalanche", "sdbm_avalanche"), ("consistent djb2", "djb2"),
    ("consistent wt6 avalanche", "wt6_avalanche"), ("consistent crc32", "crc32"),
])
def test_hash_types(hash_type: str, want: str) -> None:
    assert haproxy_backend(conf("    server a x\n", hash_type=hash_type), "app").hash == want


@pytest.mark.parametrize("balance", ["hdr(X-User)", "uri", "uri whole", "url_param user",
                                     "rdp-cookie(mstshash)", "hash req.cook(sid)"])
def test_keyed_balances(balance: str) -> None:
    assert haproxy_backend_config(conf("    server a x\n", balance=balance), "app").balance == balance


def test_defaults_are_inherited_and_listen_sections_read() -> None:
    text = """\
defaults base
    balance url_param id
    hash-type consistent djb2
    default-server weight 5
defaults
    mode http
listen web from base
    bind :80
    server a 1.2.3.4:80
    server b 1.2.3.4:81 weight 1
backend later
    server c x
"""
    router = haproxy_backend(text, "web")
    assert router.hash == "djb2" and router.weights == {"a": 5, "b": 1}
    with pytest.raises(ConfigError, match="line 11: backend later has no 'balance' line"):
        haproxy_backend(text, "later")


@pytest.mark.parametrize(("servers", "balance", "hash_type", "message"), [
    ("    server a x\n", "roundrobin", "consistent", "line 6: balance roundrobin does not hash a key"),
    ("    server a x\n", "source", "consistent", "line 6: balance source hashes the client address"),
    ("    server a x\n", "random", "consistent", "line 6: balance random does not hash a key"),
    ("    server a x\n", "hdr(X) use_domain_only", "consistent", "use_domain_only"),
    ("    server a x\n", "uri len 10", "consistent", "'len', 'depth' and 'path-only'"),
    ("    server a x\n", "url_param u check_post", "consistent", "check_post"),
    ("    server a x\n", "hdr()", "consistent", "balance hdr\\(\\) does not hash a key"),
    ("    server a x\n", "hdr(X)", "map-based", "line 7: hash-type map-based"),
    ("    server a x\n", "hdr(X)", "consistent md5", "line 7: hash-type consistent md5"),
    ("    server a x\n", "hdr(X)", "consistent sdbm fast", "only modifier"),
    ("    server a x\n", "hdr(X)", "consistent none", "'none' is not supported"),
    ("    server a x hash-key addr\n", "hdr(X)", "consistent", "line 8: hash-key addr"),
    ("    server a x weight 300\n", "hdr(X)", "consistent", "line 8: weight must be a whole number from 0 to 256"),
    ("    server a x id 0\n", "hdr(X)", "consistent", "line 8: id must be a whole number"),
    ("    server a x id 3\n    server b x id 3\n", "hdr(X)", "consistent", "line 9: id 3 is already used on line 8"),
    ("    server a x\n    server a y\n", "hdr(X)", "consistent", "line 9: a server named 'a' is already on line 8"),
    ("    server a x disabled\n", "hdr(X)", "consistent", "no server takes keys"),
    ("    server-template s 3 x\n", "hdr(X)", "consistent", "line 8: server-template"),
    ("    server\n", "hdr(X)", "consistent", "line 8: 'server' needs a name"),
    ("    server a 'x\n", "hdr(X)", "consistent", "line 8: unterminated quoted string"),
])
def test_errors_name_the_line(servers: str, balance: str, hash_type: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        haproxy_backend(conf(servers, balance=balance, hash_type=hash_type), "app")


def test_missing_pieces() -> None:
    with pytest.raises(ConfigError, match="no 'backend other' or 'listen other' section"):
        haproxy_backend(conf("    server a x\n"), "other")
    no_hash = "backend app\n    balance uri\n    server a x\n"
    with pytest.raises(ConfigError, match=r"line 1: .* no 'hash-type consistent' line: HAProxy's "
                                          r"default is map-based"):
        haproxy_backend(no_hash, "app")
    with pytest.raises(ConfigError, match="line 1: 'balance' outside any section"):
        haproxy_backend("balance uri\n", "app")
    with pytest.raises(ConfigError, match="no 'defaults nope' section"):
        haproxy_backend("backend app from nope\n    server a x\n", "app")


def test_route_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = conf("    server a 10.0.0.1:80 weight 2\n    server b 10.0.0.2:80 id 9\n"
                "    server c 10.0.0.3:80\n")
    path = tmp_path / "haproxy.cfg"
    path.write_text(text, encoding="utf-8")
    keys = [f"user-{i}" for i in range(20)]
    assert main(["route", *keys, "--haproxy-conf", str(path), "--backend", "app", "--json"]) == 0
    router = haproxy_backend(text, "app")
    answers = json.loads(capsys.readouterr().out)
    assert [a["owner"] for a in answers] == router.get_target_nodes(keys)
    assert [a["point"] for a in answers] == [router._calculate_hash(k) for k in keys]
    assert main(["route", "user-1", "--haproxy-conf", str(path), "--backend", "app"]) == 0
    out = capsys.readouterr().out
    assert f"owner       {router.get_target_node('user-1')}" in out and "haproxy layout" in out
    for argv, message in [
        (["--haproxy-conf", str(path)], "--backend NAME is needed with --haproxy-conf"),
        (["--haproxy-conf", str(path), "--backend", "nope"], "no 'backend nope'"),
        (["--haproxy-conf", str(path), "--backend", "app", "--hash", "md5"],
         "come from the configuration"),
        (["--nodes", "a", "--backend", "app"], "--backend with --haproxy-conf"),
        (["--haproxy-conf", str(tmp_path / "missing.cfg"), "--backend", "app"], "cannot read"),
    ]:
        with pytest.raises(SystemExit) as exit_info:
            main(["route", "k", *argv])
        assert exit_info.value.code == 2
        assert message in capsys.readouterr().err
