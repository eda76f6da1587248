"""``chash ring``: every subcommand against a real redis-server and a real
etcd, started by the tests; the versions it prints are those the store
holds, the ``--json`` shapes, and the exits: 0 committed, 1 not committed,
2 bad input with nothing changed.
"""
from __future__ import annotations

import itertools
import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from _support.etcd_server import EtcdCluster, running_cluster
from _support.redis_server import RedisServer, running_server
from chash import ConsistentHashRouter
from chash.cli import main
from chash.cli.ring import drain_steps

pytest.importorskip("redis", reason="redis-py not installed: pip install 'chash-router[redis]'")
pytest.importorskip("httpx", reason="httpx not installed: pip install 'chash-router[etcd]'")

_names = itertools.count()


class Store:
    """One store kind under test: its ``--redis``/``--etcd`` arguments, and
    memberships of a ring in it, as a gateway would hold them."""

    def __init__(self, kind: str, server: RedisServer | EtcdCluster) -> None:
        self.kind = kind
        self.server = server
        self.ring = f"cli{next(_names)}"
        self.made: list[Any] = []

    def args(self, ring: str | None = None) -> list[str]:
        option = "--redis" if self.kind == "redis" else "--etcd"
        return [option, self.server.url, "--ring", ring or self.ring]

    def membership(self, *nodes: str, bootstrap: bool = False, **settings: Any) -> Any:
        """A membership of the ring (not started; ``refresh()`` syncs it)."""
        router = ConsistentHashRouter()
        for node in nodes:
            router.add_service_node(node)
        if self.kind == "redis":
            from chash.membership import RedisMembership

            assert isinstance(self.server, RedisServer)
            made: Any = RedisMembership(router, self.server.connect(), name=self.ring,
                                        bootstrap=bootstrap, **settings)
        else:
            from chash.membership import EtcdMembership

            made = EtcdMembership(router, self.server.url, name=self.ring,
                                  bootstrap=bootstrap, timeout=2.0, **settings)
        self.made.append(made)
        return made

    def seed(self, *nodes: str) -> Any:
        """Create the ring with ``nodes``; the membership that did."""
        membership = self.membership(*nodes, bootstrap=True)
        membership.refresh()
        return membership

    def close(self) -> None:
        for membership in self.made:
            close = getattr(membership, "close", None)
            if close is not None:
                close()
            else:
                membership.client.close()


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    yield from running_server()


@pytest.fixture(scope="module")
def etcd() -> Iterator[EtcdCluster]:
    yield from running_cluster(1)


@pytest.fixture(params=["redis", "etcd"])
def store(request: pytest.FixtureRequest) -> Iterator[Store]:
    server = request.getfixturevalue("redis_server" if request.param == "redis" else "etcd")
    made = Store(request.param, server)
    try:
        yield made
    finally:
        made.close()


def ring(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``chash ring ARGV``: its exit code, output and errors."""
    code = main(["ring", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def committed_at(out: str) -> list[int]:
    return [int(line.rsplit(" ", 1)[1]) for line in out.splitlines()
            if "committed at version" in line]


def test_show_prints_the_ring_every_gateway_holds(store: Store,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    seeder = store.seed("a:1", "b:1", "c:1")
    seeder.add_node("a:1", weight=2.0)
    seeder.disable_node("b:1", "maintenance")
    gateway = store.membership()
    state = gateway.refresh()
    code, out, err = ring(capsys, "show", "--json", *store.args())
    assert (code, err) == (0, "")
    shown = json.loads(out)
    assert shown == {
        "ring": store.ring, "store": "Redis" if store.kind == "redis" else "etcd",
        "epoch": state.epoch, "version": state.version,
        "fingerprint": gateway.router.fingerprint(), "config": state.config, "in_service": 2,
        "nodes": [{"node": "a:1", "weight": 2.0, "zone": None, "state": "in service"},
                  {"node": "b:1", "weight": 1.0, "zone": None, "state": "disabled",
                   "reason": "maintenance"},
                  {"node": "c:1", "weight": 1.0, "zone": None, "state": "in service"}]}
    code, out, err = ring(capsys, "show", *store.args())
    assert code == 0
    lines = out.splitlines()
    assert f"version {state.version}" in lines[0] and gateway.router.fingerprint() in lines[0]
    assert lines[1] == "3 nodes, 2 in service"
    assert lines[3].split() == ["a:1", "2", "-", "in", "service"]  # no zone
    assert lines[4].split() == ["b:1", "1", "-", "disabled:", "maintenance"]


def test_zones_are_stored_shown_and_kept(store: Store,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    store.seed("a:1")
    code, out, err = ring(capsys, "add", "b:1", "--zone", "eu", *store.args())
    assert (code, err) == (0, "") and "zone eu" in out and len(committed_at(out)) == 1
    # a new weight keeps the zone; a zone alone is a change; '' clears it
    assert ring(capsys, "weight", "b:1", "3", *store.args())[0] == 0
    code, out, _ = ring(capsys, "add", "a:1", "--zone", "us", *store.args())
    assert code == 0 and len(committed_at(out)) == 1
    gateway = store.membership()
    state = gateway.refresh()
    assert dict(state.zones) == {"a:1": "us", "b:1": "eu"} and state.weights["b:1"] == 3.0
    code, out, _ = ring(capsys, "show", "--json", *store.args())
    assert [(n["node"], n["zone"]) for n in json.loads(out)["nodes"]] == [("a:1", "us"),
                                                                          ("b:1", "eu")]
    code, out, _ = ring(capsys, "show", *store.args())
    assert out.splitlines()[2].split() == ["NODE", "WEIGHT", "ZONE", "STATE"]
    assert out.splitlines()[4].split() == ["b:1", "3", "eu", "in", "service"]
    code, out, _ = ring(capsys, "add", "a:1", "--zone", "", *store.args())
    assert code == 0 and "no zone" in out
    assert dict(gateway.refresh().zones) == {"b:1": "eu"}
    code, out, _ = ring(capsys, "history", "--json", *store.args())
    assert [(c["action"], c["node"], c["value"]) for c in json.loads(out)
            if c["action"] == "zone"] == [("zone", "b:1", "eu"), ("zone", "a:1", "us"),
                                          ("zone", "a:1", "")]


def test_a_verdict_shows_its_votes(store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    seeder = store.seed("a:1", "b:1", "c:1")
    seeder.mark_down("c:1", "connection refused")
    seeder.flush()
    code, out, _ = ring(capsys, "show", "--json", *store.args())
    entry = json.loads(out)["nodes"][2]
    assert code == 0
    assert (entry["state"], entry["votes"], entry["reporters"], entry["reason"]) \
        == ("down", 1, 1, "connection refused")
    code, out, _ = ring(capsys, "history", "--json", *store.args())
    assert json.loads(out)[-1]["action"] == "down"


def test_every_change_prints_the_version_it_was_committed_at(
        store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    store.seed("a:1", "b:1", "c:1")
    gateway = store.membership()
    start = gateway.refresh().version
    versions = []
    for argv in (["add", "d:1", "--weight", "2"], ["weight", "d:1", "3.5"],
                 ["remove", "d:1"], ["add", "e:1"]):
        code, out, err = ring(capsys, *argv, *store.args())
        assert (code, err) == (0, ""), argv
        (version,) = committed_at(out)
        versions.append(version)
        assert gateway.refresh().version == version
    assert versions == [start + 1, start + 2, start + 3, start + 4]
    assert gateway.state.weights == {"a:1": 1.0, "b:1": 1.0, "c:1": 1.0, "e:1": 1.0}
    # A change that changes nothing commits nothing, and says so.
    code, out, _ = ring(capsys, "add", "e:1", *store.args())
    assert code == 0 and "nothing to change, at version" in out and not committed_at(out)
    code, out, _ = ring(capsys, "history", "--json", *store.args())
    history = json.loads(out)
    assert [(c["version"], c["action"], c["node"], c["value"]) for c in history[-4:]] == [
        (start + 1, "add", "d:1", "2.0"), (start + 2, "add", "d:1", "3.5"),
        (start + 3, "remove", "d:1", ""), (start + 4, "add", "e:1", "1.0")]
    assert set(history[0]) == {"epoch", "version", "action", "node", "value", "at"}
    code, out, _ = ring(capsys, "history", *store.args())
    assert code == 0 and out.splitlines()[-1].split()[0] == str(start + 4)


def test_drain_ramps_the_weight_down_then_removes(store: Store,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    store.seed("a:1", "b:1", "c:1")
    code, out, err = ring(capsys, "drain", "c:1", "--over", "0.4", *store.args())
    assert (code, err) == (0, "")
    versions = committed_at(out)
    assert len(versions) == 2 and versions[1] == versions[0] + 1
    assert "weight 0.5" in out and out.splitlines()[-1].startswith(f"ring {store.ring}: drain "
                                                                   "c:1: removed")
    assert "c:1" not in store.membership().refresh().weights
    assert drain_steps(4.0, 3.0) == [pytest.approx(8 / 3), pytest.approx(4 / 3)]
    assert drain_steps(1.0, 0.0) == [] and len(drain_steps(1.0, 600.0)) == 9


@pytest.mark.parametrize("argv, message", [
    (["remove", "zz:1"], "holds no node 'zz:1'"),
    (["weight", "zz:1", "2"], "holds no node 'zz:1'"),
    (["drain", "zz:1", "--over", "0"], "holds no node 'zz:1'"),
    (["weight", "a:1", "0"], "the weight must be a positive number, not '0'"),
    (["weight", "a:1", "-1"], "positive number"),
    (["weight", "a:1", "nan"], "positive number"),
    (["weight", "a:1", "inf"], "positive number"),
    (["add", "d:1", "--weight", "heavy"], "positive number, not 'heavy'"),
    (["add", "d:1", "--zone", "e u"], "the zone must be a name without spaces"),
    (["add", "d:1", "--zone", "eu@1"], "the zone must be a name"),
])
def test_bad_input_is_one_line_and_exit_2_with_nothing_changed(
        store: Store, capsys: pytest.CaptureFixture[str], argv: list[str],
        message: str) -> None:
    store.seed("a:1", "b:1")
    before = store.membership().refresh()
    code, out, err = ring(capsys, *argv, *store.args())
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and message in err and err.startswith("chash ring: error:")
    after = store.membership().refresh()
    assert (after.epoch, after.version, after.weights) == (before.epoch, before.version,
                                                           before.weights)


def test_a_store_without_that_ring_is_bad_input(store: Store,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = ring(capsys, "add", "a:1", *store.args("nowhere"))
    assert code == 2 and "holds no chash ring 'nowhere'" in err and len(err.splitlines()) == 1
    # Keys that are not a chash ring's.
    if store.kind == "redis":
        assert isinstance(store.server, RedisServer)
        client = store.server.connect()
        client.set("chash:{junk}:meta", "a string")
        client.close()
    else:
        import base64

        assert isinstance(store.server, EtcdCluster)
        store.server.post("/v3/kv/put", {"key": base64.b64encode(b"chash/junk/ring").decode(),
                                         "value": base64.b64encode(b"[1, 2]").decode()})
    code, _, err = ring(capsys, "show", *store.args("junk"))
    assert code == 2 and "chash ring 'junk'" in err and len(err.splitlines()) == 1
    assert main(["ring", "show", "--ring", "x"]) == 2
    assert "give --redis URL or --etcd" in capsys.readouterr().err


def test_a_refused_removal_is_not_committed(store: Store,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    store.seed("a:1")
    code, out, err = ring(capsys, "remove", "a:1", *store.args())
    assert code == 1 and out == "" and "refused" in err and "force" in err
    assert "a:1" in store.membership().refresh().weights
    code, out, _ = ring(capsys, "remove", "a:1", "--force", *store.args())
    assert code == 0 and len(committed_at(out)) == 1


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("kind", ["redis", "etcd"])
def test_an_unreachable_store_is_exit_1(kind: str, capsys: pytest.CaptureFixture[str]) -> None:
    port = _closed_port()
    url = f"redis://127.0.0.1:{port}/0" if kind == "redis" else f"http://127.0.0.1:{port}"
    code, out, err = ring(capsys, "add", "a:1", f"--{kind}", url, "--timeout", "0.5")
    assert code == 1 and out == "" and "unreachable" in err and len(err.splitlines()) == 1
