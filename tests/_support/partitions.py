"""What the partition scenarios run on a ``netns.Network``: etcd members,
gateway processes and the operator's ``chash ring``, each on a host of its
own, and the history checker that judges a run.

* ``EtcdMembers(network, hosts)``: one etcd member per host (client port
  2379, peer port 2380 on the host's address), fast elections;
* ``start_gateway(network, host, endpoints, ...)``: a gateway process
  (tests/_support/membership_worker.py, routing without pause) on a host,
  driven over its pipes;
* ``Operator(host, endpoints)``: ``chash ring ...`` run on a host, every
  change recorded in the ``History``;
* ``EtcdSetup(network)``: all of it for the etcd scenarios: three
  members, three gateways, the operator, a history;
* ``History``: every change attempted with its outcome (committed at
  version v, failed, nothing to change) and every gateway's fingerprint
  over time; ``check()`` fails the run on a committed change the final
  ring lost, a ring that went empty, gateways that disagree after heal.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from _support.compat_programs import program_env
from _support.etcd_server import etcd_executable
from _support.membership_procs import CHASH_ROOT, Worker
from _support.membership_worker import RESYNC_INTERVAL
from _support.netns import Host, Network
from _support.waiting import wait_until

__all__ = ["HEAL_DEADLINE", "Attempt", "EtcdMembers", "EtcdSetup", "History", "Operator",
           "SentinelSetup", "start_backend", "start_gateway", "start_relay"]


def _env() -> dict[str, str]:
    """The environment of a Python process started on a host: the chash under
    test (and the sanitizer runtime a sanitized run preloads, which its
    extension needs)."""
    return dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [str(CHASH_ROOT), os.environ.get("PYTHONPATH")])))


class EtcdMembers:
    """An etcd cluster, one member on each host."""

    def __init__(self, network: Network, hosts: list[Host], version: str = "3.4") -> None:
        self.network = network
        self.hosts = hosts
        self.executable = etcd_executable(version)
        cluster = ",".join(f"{h.name}=http://{h.address}:2380" for h in hosts)
        for host in hosts:
            url, peer = f"http://{host.address}:2379", f"http://{host.address}:2380"
            host.spawn([self.executable, "--name", host.name,
                        "--data-dir", network.path(f"{host.name}.etcd"),
                        "--listen-client-urls", url, "--advertise-client-urls", url,
                        "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                        "--initial-cluster", cluster, "--initial-cluster-state", "new",
                        "--initial-cluster-token", network.tag,
                        "--heartbeat-interval", "100", "--election-timeout", "1000",
                        "--logger", "zap", "--log-level", "error"],
                       log=f"{host.name}.etcd.log",
                       env={**program_env(), "ETCD_UNSUPPORTED_ARCH": os.environ.get(
                           "ETCD_UNSUPPORTED_ARCH", "")})

    def endpoints(self, *hosts: Host) -> str:
        """The client URLs of ``hosts`` (every member's by default)."""
        return ",".join(f"http://{h.address}:2379" for h in (hosts or self.hosts))

    def leader(self, asker: Host) -> Host:
        """The member that leads now, as the members tell ``asker``."""
        probe = ("import json, sys, urllib.request\n"
                 "for url in sys.argv[1:]:\n"
                 "    try:\n"
                 "        request = urllib.request.Request(url + '/v3/maintenance/status',\n"
                 "                                         data=b'{}', method='POST')\n"
                 "        reply = json.load(urllib.request.urlopen(request, timeout=1))\n"
                 "    except OSError:\n"
                 "        continue\n"
                 "    if reply.get('leader') and reply['leader'] == reply['header']"
                 "['member_id']:\n"
                 "        print(url)\n")
        urls = [f"http://{h.address}:2379" for h in self.hosts]
        until = time.monotonic() + 30
        while True:
            found = asker.run([sys.executable, "-c", probe, *urls]).stdout.split()
            if len(found) == 1:
                return self.hosts[urls.index(found[0])]
            assert time.monotonic() < until, f"no single leader: {found}"
            time.sleep(0.2)

    def log(self) -> str:
        return "\n".join(Path(self.network.path(f"{h.name}.etcd.log")).read_text()[-2000:]
                         for h in self.hosts if os.path.exists(self.network.path(
                             f"{h.name}.etcd.log")))


class SentinelSetup:
    """A Redis primary and its replica, and a sentinel on each of three
    hosts watching them as ``mymaster`` (port 6379 for the servers, 26379
    for the sentinels, on the hosts' addresses)."""

    service = "mymaster"

    def __init__(self, network: Network, primary: Host, replica: Host,
                 sentinels: list[Host]) -> None:
        self.network = network
        self.primary, self.replica, self.sentinel_hosts = primary, replica, sentinels
        server = shutil.which("redis-server")
        sentinel = shutil.which("redis-sentinel")
        if server is None or sentinel is None:
            pytest.skip("redis-server and redis-sentinel needed: apt-get install redis-server "
                        "redis-sentinel")
        for host in (primary, replica):
            extra = [] if host is primary else ["--replicaof", primary.address, "6379"]
            host.spawn([server, "--port", "6379", "--bind", host.address, "--save", "",
                        "--appendonly", "no", "--protected-mode", "no",
                        "--repl-diskless-sync-delay", "0", "--dir", network.workdir,
                        "--dbfilename", f"{host.name}.rdb", *extra],
                       log=f"{host.name}.redis.log", env=program_env())
        for host in sentinels:
            config = network.path(f"{host.name}.sentinel.conf")
            with open(config, "w") as out:
                out.write(f"port 26379\nbind {host.address}\nprotected-mode no\n"
                          f"sentinel monitor {self.service} {primary.address} 6379 2\n"
                          f"sentinel down-after-milliseconds {self.service} 1000\n"
                          f"sentinel failover-timeout {self.service} 5000\n")
            host.spawn([sentinel, config], log=f"{host.name}.sentinel.log", env=program_env())

    @property
    def sentinels(self) -> str:
        """The sentinels, as the gateways' ``--sentinel`` takes them."""
        return ",".join(f"{host.address}:26379" for host in self.sentinel_hosts)

    def ask(self, host: Host, target: Host, port: int, *command: str) -> str:
        """``redis-cli`` run on ``host`` against ``target:port``; its output."""
        done = host.run(["redis-cli", "-h", target.address, "-p", str(port), *command],
                        timeout=10, env=program_env())
        return done.stdout.strip()

    def ready(self, asker: Host, deadline: float = 45.0) -> None:
        """Wait until the replica is in sync and every sentinel knows the
        others and the replica (asked from ``asker``)."""
        def fields(text: str) -> dict[str, str]:
            lines = text.split("\n")
            return dict(zip(lines[::2], lines[1::2], strict=False))

        wait_until(lambda: all(self.master_seen(host) == self.primary.address
                               for host in self.sentinel_hosts),
                   "every sentinel names the primary", timeout=deadline)
        wait_until(lambda: "master_link_status:up" in self.ask(asker, self.replica, 6379,
                                                               "INFO", "replication"),
                   "the replica is in sync", timeout=deadline)

        def known(host: Host) -> bool:
            seen = fields(self.ask(asker, host, 26379, "SENTINEL", "master", self.service))
            return seen.get("num-other-sentinels") == "2" and seen.get("num-slaves") == "1"
        wait_until(lambda: all(known(host) for host in self.sentinel_hosts),
                   "the sentinels know each other and the replica", timeout=deadline)

    def swap(self) -> None:
        """After a failover: the replica is the primary now, and the old
        primary (once healed) its replica."""
        self.primary, self.replica = self.replica, self.primary

    def master_seen(self, host: Host) -> str:
        """The primary's address as the sentinel on ``host`` names it."""
        return self.ask(host, host, 26379, "SENTINEL", "get-master-addr-by-name",
                        self.service).split("\n")[0]


#: A backend: accepts connections on ADDRESS:7000 and closes them.
BACKEND = ("import socket, sys\n"
           "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
           "s.bind((sys.argv[1], 7000)); s.listen(64)\n"
           "while True:\n"
           "    s.accept()[0].close()\n")


def start_backend(host: Host) -> str:
    """A backend on ``host``; its node name, ADDRESS:7000."""
    host.spawn([sys.executable, "-c", BACKEND, host.address], log=f"{host.name}.backend.log")
    return f"{host.address}:7000"


RELAY = Path(__file__).with_name("relays.py")


def start_relay(host: Host, port: int, target: Host, target_port: int, delay: float,
                loss: float, seed: int) -> str:
    """A delaying, losing relay (tests/_support/relays.py) on ``host``'s
    loopback ``port`` to ``target:target_port``; its address, listening."""
    process = host.spawn([sys.executable, str(RELAY), f"127.0.0.1:{port}",
                          f"{target.address}:{target_port}", "--delay", str(delay),
                          "--loss", str(loss), "--seed", str(seed)], pipes=True,
                         log=f"{host.name}.relay{port}.log")
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    assert line == "ready", f"the relay on {host.name} did not start: {line!r}"
    return f"127.0.0.1:{port}"


def start_gateway(network: Network, host: Host, endpoints: str, reporter: str,
                  bootstrap: bool = False, ring: str = "shop",
                  sentinels: str | None = None) -> Worker:
    """A gateway process on ``host`` sharing ``ring`` through etcd at
    ``endpoints`` (or through Redis behind ``sentinels``); ready (its first
    sync tried) when this returns."""
    store = ("--sentinel", sentinels) if sentinels else ("--etcd", endpoints)
    options = store + ("--calm",) + (() if bootstrap else ("--no-bootstrap",))
    worker = Worker(0, ring, reporter, Path(network.workdir), options=options,
                    prefix=tuple(host.command([])))
    network.processes.append(worker.process)
    first = worker.answer(deadline=60)
    assert first.get("ready"), f"{first}\n{worker.log()}"
    return worker


@dataclass
class Attempt:
    """One change the operator attempted, and what came of it."""

    argv: list[str]
    code: int
    version: int | None
    """The version it was committed at (None unless committed)."""
    out: str
    err: str
    at: float = field(default_factory=time.time)

    @property
    def committed(self) -> bool:
        return self.code == 0 and self.version is not None


class History:
    """Every change attempted, and every gateway's fingerprint over time."""

    def __init__(self) -> None:
        self.attempts: list[Attempt] = []
        self.samples: list[tuple[float, str, str, int, int]] = []
        """(time, gateway, fingerprint, version, nodes)"""

    def sample(self, gateways: dict[str, Worker]) -> dict[str, dict[str, Any]]:
        """Every gateway's status now, recorded; the statuses."""
        statuses = {}
        for name, gateway in gateways.items():
            status = gateway.status()
            statuses[name] = status
            self.samples.append((time.time(), name, status["fingerprint"], status["version"],
                                 len(status["weights"])))
        return statuses

    def committed(self) -> list[Attempt]:
        return [a for a in self.attempts if a.committed]

    def check(self, final: dict[str, dict[str, Any]], stored: list[dict[str, Any]],
              shown: dict[str, Any]) -> None:
        """Fail on a lost committed change, a ring that went empty, or
        gateways that disagree.  ``final``: every gateway's status after
        heal; ``stored``: ``chash ring history --json``; ``shown``: ``chash
        ring show --json``."""
        by_version = {entry["version"]: entry for entry in stored}
        for attempt in self.committed():
            entry = by_version.get(attempt.version)  # type: ignore[arg-type]
            assert entry is not None and entry["node"] == attempt.argv[1], \
                f"committed {attempt.argv} at version {attempt.version} is not in the " \
                f"ring's history: {stored}"
        # One ring: every gateway holds the ring the store holds.
        fingerprints = {status["fingerprint"] for status in final.values()}
        assert fingerprints == {shown["fingerprint"]}, \
            f"gateways disagree after heal: {fingerprints} against {shown['fingerprint']}"
        held = {node["node"]: node["weight"] for node in shown["nodes"]
                if node["state"] == "in service"}
        for status in final.values():
            assert status["weights"] == held
        last: dict[str, Attempt] = {}
        for attempt in self.attempts:
            if attempt.argv[0] in ("add", "remove", "weight"):
                last[attempt.argv[1]] = attempt
        for node, attempt in last.items():
            if not attempt.committed:
                continue  # a failed change may or may not have landed
            if attempt.argv[0] == "remove":
                assert node not in held, f"{node} was removed at {attempt.version}, yet held"
            else:
                assert node in held, f"{node} committed at {attempt.version} is lost"
        empty = [sample for sample in self.samples if sample[4] == 0]
        assert not empty, f"a gateway's ring went empty: {empty[:3]}"
        for status in final.values():
            assert not status["failures"], status["failures"]


class Operator:
    """``chash ring`` run on a host, each change recorded in ``history``."""

    def __init__(self, host: Host, endpoints: str, history: History,
                 ring: str = "shop", store: str = "--etcd",
                 extra: tuple[str, ...] = ()) -> None:
        """``store``: ``--etcd`` (``endpoints`` its URLs) or ``--redis``
        (``endpoints`` a redis:// URL); ``extra``: more options of every
        command."""
        self.host = host
        self.endpoints = endpoints
        self.history = history
        self.ring = ring
        self.store = store
        self.extra = extra

    def run(self, *argv: str, endpoints: str | None = None,
            timeout: float = 60.0) -> tuple[int, str, str]:
        done = self.host.run([sys.executable, "-m", "chash", "ring", *argv, self.store,
                              endpoints or self.endpoints, "--ring", self.ring,
                              "--timeout", "1", *self.extra], timeout=timeout, env=_env())
        return done.returncode, done.stdout, done.stderr

    def change(self, *argv: str, endpoints: str | None = None) -> Attempt:
        """A change (``add NODE``, ``weight NODE W``, ``remove NODE``),
        recorded with its outcome."""
        code, out, err = self.run(*argv, endpoints=endpoints)
        found = re.findall(r"committed at version (\d+)", out)
        attempt = Attempt(list(argv), code, int(found[-1]) if found else None, out, err)
        self.history.attempts.append(attempt)
        return attempt

    def read(self, what: str, deadline: float = 30.0) -> Any:
        """``show`` or ``history``, as JSON, once the command succeeds
        (right after a heal the store may still be electing a leader)."""
        until = time.monotonic() + deadline
        while True:
            code, out, err = self.run(what, "--json")
            if code == 0:
                return json.loads(out)
            assert time.monotonic() < until, err
            time.sleep(0.5)


#: How long a healed gateway gets to hold the stored ring again: two resync
#: intervals, as promised, plus room for TCP to reconnect on a loaded
#: machine (the test reports how long it took).
HEAL_DEADLINE = 2 * RESYNC_INTERVAL + 15.0


class EtcdSetup:
    """Three etcd members, three gateways, an operator, a history.
    ``slow``: (delay, loss) of a relay between every gateway (and the
    operator) and every member."""

    def __init__(self, network: Network, gateway_endpoints: dict[str, str] | None = None,
                 slow: tuple[float, float] | None = None) -> None:
        self.network = network
        self.members = [network.host(f"e{i}") for i in (1, 2, 3)]
        self.hosts = {name: network.host(name) for name in ("g1", "g2", "g3")}
        self.op = network.host("op")
        self.etcd = EtcdMembers(network, self.members)
        self.history = History()
        endpoints = dict(gateway_endpoints or {})
        op_endpoints = self.etcd.endpoints()
        if slow is not None:
            seed = 0
            for name, host in [*self.hosts.items(), ("op", self.op)]:
                relayed = []
                for i, member in enumerate(self.members):
                    seed += 1
                    relayed.append("http://" + start_relay(host, 23790 + i, member, 2379,
                                                           slow[0], slow[1], seed))
                endpoints[name] = ",".join(relayed)
            op_endpoints = endpoints.pop("op")
        self.operator = Operator(self.op, op_endpoints, self.history)
        self.gateways: dict[str, Worker] = {}
        for name, host in self.hosts.items():
            self.gateways[name] = start_gateway(
                network, host, endpoints.get(name, self.etcd.endpoints()), name,
                bootstrap=name == "g1")
        wait_until(lambda: self.operator.run("show")[0] == 0,
                   "etcd elected a leader and g1 created the ring", timeout=60)

    def change(self, *argv: str, endpoints: str | None = None) -> Any:
        attempt = self.operator.change(*argv, endpoints=endpoints)
        return attempt

    def agree(self, what: str, deadline: float = HEAL_DEADLINE) -> float:
        """Wait until every gateway holds the stored ring; seconds it took."""
        started = time.monotonic()
        shown = self.operator.read("show")

        def same() -> bool:
            statuses = self.history.sample(self.gateways)
            return {s["fingerprint"] for s in statuses.values()} == {shown["fingerprint"]}
        wait_until(same, what, timeout=deadline, interval=0.1)
        return time.monotonic() - started

    def finish(self) -> None:
        """Every promise, judged on the whole run."""
        # In step, every gateway hears from the store (on slow links a call
        # may stall past the watchdog for a moment: not for long).
        wait_until(lambda: all((s["stale_seconds"], s["stale_since"]) == (0.0, None)
                               for s in self.history.sample(self.gateways).values()),
                   "every gateway hears from its store", timeout=HEAL_DEADLINE)
        final = self.history.sample(self.gateways)
        self.history.check(final, self.operator.read("history"), self.operator.read("show"))
        for gateway in self.gateways.values():
            assert gateway.close() == [], f"{gateway.reporter} failed lookups"
