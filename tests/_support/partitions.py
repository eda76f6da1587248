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
* ``agree(...)``: every gateway holds the stored ring, and after a heal
  promise 3 as docs/reliability.md writes it: within ``ONE_RING`` (2 ×
  ``RESYNC``) of the latest of the last heal, the operator's last change
  and the store's last refusal of the check's read, as the gateways' own
  clocks tell;
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
from _support.netns import Host, Network
from _support.waiting import wait_until

__all__ = ["HEAL_DEADLINE", "ONE_RING", "RESYNC", "Attempt", "EtcdMembers", "EtcdSetup", "History",
           "Operator", "RealGateway", "RedisSetup", "agree", "start_http_backend", "start_redis",
           "SentinelSetup", "start_gateway", "start_relay"]


def _env() -> dict[str, str]:
    """The environment of a Python process started on a host: the chash under
    test (and the sanitizer runtime a sanitized run preloads, which its
    extension needs)."""
    return dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [str(CHASH_ROOT), os.environ.get("PYTHONPATH")])))


class EtcdMembers:
    """An etcd cluster, one member on each host.

    ``slow``: (delay, loss) of the links between the members too: member
    ``j`` is known to the others as ``127.0.0.1:2390+j``, where a relay on
    each of their hosts forwards to its peer port, and the raft timings are
    stretched as etcd's tuning guide asks for such a round trip (heartbeat
    about the round trip, election ten heartbeats)."""

    def __init__(self, network: Network, hosts: list[Host], version: str = "3.4",
                 slow: tuple[float, float] | None = None) -> None:
        self.network = network
        self.hosts = hosts
        self.executable = etcd_executable(version)
        heartbeat, election = 100, 1000
        if slow is None:
            peers = {h.name: f"http://{h.address}:2380" for h in hosts}
        else:
            peers = {h.name: f"http://127.0.0.1:{2390 + j}" for j, h in enumerate(hosts)}
            for i, host in enumerate(hosts):
                for j, other in enumerate(hosts):
                    if other is not host:
                        start_relay(host, 2390 + j, other, 2380, slow[0], slow[1],
                                    100 + 10 * i + j)
            heartbeat = int(2000 * slow[0])
            election = 10 * heartbeat
        cluster = ",".join(f"{name}={url}" for name, url in peers.items())
        for host in hosts:
            url, peer = f"http://{host.address}:2379", peers[host.name]
            host.spawn([self.executable, "--name", host.name,
                        "--data-dir", network.path(f"{host.name}.etcd"),
                        "--listen-client-urls", url, "--advertise-client-urls", url,
                        "--listen-peer-urls", f"http://{host.address}:2380",
                        "--initial-advertise-peer-urls", peer,
                        "--initial-cluster", cluster, "--initial-cluster-state", "new",
                        "--initial-cluster-token", network.tag,
                        "--heartbeat-interval", str(heartbeat),
                        "--election-timeout", str(election),
                        # A member back from the minority side joins the
                        # leader it finds instead of calling an election
                        # (etcd 3.5's default; 3.4 needs the flag).
                        "--pre-vote",
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
                  sentinels: str | None = None, redis: str | None = None,
                  etcd_timeout: float = 1.0) -> Worker:
    """A gateway process on ``host`` sharing ``ring`` through etcd at
    ``endpoints`` (each call given ``etcd_timeout`` seconds), or through
    Redis behind ``sentinels``, or the one Redis server at ``redis``
    (HOST:PORT), with the resync interval ``RESYNC``; ready (its first sync
    tried) when this returns."""
    port = 0
    if sentinels:
        store: tuple[str, ...] = ("--sentinel", sentinels)
    elif redis:
        address, _, number = redis.rpartition(":")
        store, port = ("--redis-host", address), int(number)
    else:
        store = ("--etcd", endpoints, "--etcd-timeout", str(etcd_timeout))
    options = store + ("--calm", "--resync-interval", str(RESYNC)) + \
        (() if bootstrap else ("--no-bootstrap",))
    worker = Worker(port, ring, reporter, Path(network.workdir), options=options,
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
        return self.read_served(what, deadline)[0]

    def read_served(self, what: str, deadline: float = 30.0) -> tuple[Any, float | None]:
        """``read``'s answer, and when the store last refused it before
        (wall clock), or None if it answered at once."""
        until = time.monotonic() + deadline
        refused = None
        while True:
            code, out, err = self.run(what, "--json")
            if code == 0:
                return json.loads(out), refused
            refused = time.time()
            assert time.monotonic() < until, err
            time.sleep(0.1)


#: The gateways' resync interval in the scenarios: above the store clients'
#: timeouts (1 s), as promise 3 requires (docs/reliability.md), so that a
#: call stuck on a link cut when it began ends within one interval of the
#: heal; equal to them, a loaded machine's scheduling delays alone could
#: break the bound.
RESYNC = 2.0

#: Promise 3: one ring within this many seconds of the latest of the last
#: heal, the operator's last change and the store's last refusal (``agree``).
ONE_RING = 2 * RESYNC

#: How long the harness waits for what it waits on (a generous timeout for
#: the harness's own steps; promise 3 is checked against ``ONE_RING``).
HEAL_DEADLINE = 45.0


def agree(network: Network, history: History, gateways: dict[str, Worker],
          operator: Operator, what: str, deadline: float = HEAL_DEADLINE) -> float:
    """Wait until every one of ``gateways`` holds the ring the store holds
    (as ``operator`` shows it); within ``deadline``, the harness's generous
    timeout.  After a heal (``Network.healed_at``), check promise 3 as
    docs/reliability.md states it: the last gateway to get there held it
    within ``ONE_RING`` seconds, as its own clock of when it applied its
    state tells (``applied_at``: not the harness's polling).  Seconds from
    the bound's start to then (0 without a heal).

    The bound runs from the last moment the gateways could have had
    something new to learn (docs/reliability.md): the heal, or later a
    change the operator made (a randomized run goes on changing the ring
    after its last fault), or the end of the store's last refusal of the
    operator's read (no leader yet, say); the message says which."""
    shown, refused = operator.read_served("show")

    def same() -> bool:
        statuses = history.sample(gateways)
        return {s["fingerprint"] for s in statuses.values()} == {shown["fingerprint"]}
    wait_until(same, what, timeout=deadline, interval=0.1)
    healed, network.healed_at = network.healed_at, None
    if healed is None:
        return 0.0
    marks = {"the last heal": healed}
    if history.attempts:
        marks["the last change"] = max(attempt.at for attempt in history.attempts)
    if refused is not None:
        marks["the store's last refusal"] = refused
    mark = max(marks, key=marks.__getitem__)
    since = marks[mark]
    statuses = history.sample(gateways)
    after = {name: float(status["applied_at"]) - since for name, status in statuses.items()}
    took = max(0.0, *after.values())
    print(f"{what}: {took:.2f}s after {mark} ({since - healed:.2f}s after the heal)")
    if took > ONE_RING:
        slowest = max(after, key=after.__getitem__)
        each = ", ".join(f"{name} {seconds:+.2f}s" for name, seconds in sorted(after.items()))
        tail = "\n".join(gateways[slowest].log().splitlines()[-40:])
        raise AssertionError(
            f"{what}: one ring {took:.2f}s after {mark}, promised within {ONE_RING:g}s "
            f"(healed at {healed:.3f}, {mark} at {since:.3f}; each gateway applied it at: "
            f"{each}); {slowest}'s log ends:\n{tail}")
    return took


class EtcdSetup:
    """Three etcd members, three gateways, an operator, a history.
    ``slow``: (delay, loss) of a relay on every link: between every gateway
    (and the operator) and every member, and between the members."""

    def __init__(self, network: Network, gateway_endpoints: dict[str, str] | None = None,
                 slow: tuple[float, float] | None = None) -> None:
        self.network = network
        self.members = [network.host(f"e{i}") for i in (1, 2, 3)]
        self.hosts = {name: network.host(name) for name in ("g1", "g2", "g3")}
        self.op = network.host("op")
        self.etcd = EtcdMembers(network, self.members, slow=slow)
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
        # With every link slow a write crosses five of them (client, member,
        # leader, a follower and back): about 1.2 s, past the usual 1 s a
        # call, so the callers give each call 3 s (as a WAN deployment does).
        timeout = 1.0 if slow is None else 3.0
        self.operator = Operator(self.op, op_endpoints, self.history,
                                 extra=("--timeout", f"{timeout:g}"))
        self.gateways: dict[str, Worker] = {}
        for name, host in self.hosts.items():
            self.gateways[name] = start_gateway(
                network, host, endpoints.get(name, self.etcd.endpoints()), name,
                bootstrap=name == "g1", etcd_timeout=timeout)
        wait_until(lambda: self.operator.run("show")[0] == 0,
                   "etcd elected a leader and g1 created the ring", timeout=60)

    def change(self, *argv: str, endpoints: str | None = None) -> Any:
        attempt = self.operator.change(*argv, endpoints=endpoints)
        return attempt

    def agree(self, what: str, deadline: float = HEAL_DEADLINE) -> float:
        """Wait until every gateway holds the stored ring (the harness's
        generous ``deadline``); after a heal, check promise 3 and return
        how long after it they held it."""
        return agree(self.network, self.history, self.gateways, self.operator, what, deadline)

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


class RedisSetup:
    """Redis for the Redis scenarios, three gateways, an operator, a
    history.  With ``sentinel``: the primary r1, its replica r2 and three
    sentinels s1-s3, the gateways following the primary through them (the
    operator's changes wait for a replica while the primary shows one,
    ``chash ring``'s default).  Without: one Redis server r1 alone (no replica, so a change is
    committed once r1 ran it), and with ``slow`` (delay, loss) a relay
    between every gateway (and the operator) and it."""

    def __init__(self, network: Network, *, sentinel: bool = True,
                 slow: tuple[float, float] | None = None) -> None:
        self.network = network
        self.slow = slow
        self.r1 = network.host("r1")
        self.r2 = network.host("r2") if sentinel else None
        self.sentinel_hosts = [network.host(f"s{i}") for i in (1, 2, 3)] if sentinel else []
        self.hosts = {name: network.host(name) for name in ("g1", "g2", "g3")}
        self.op = network.host("op")
        self.history = History()
        self.sentinels: SentinelSetup | None = None
        addresses = {name: f"{self.r1.address}:6379" for name in [*self.hosts, "op"]}
        if self.r2 is not None:
            self.sentinels = SentinelSetup(network, self.r1, self.r2, self.sentinel_hosts)
            self.sentinels.ready(self.op)
        else:
            start_redis(network, self.r1)
            if slow is not None:
                for seed, (name, host) in enumerate([*self.hosts.items(), ("op", self.op)]):
                    addresses[name] = start_relay(host, 16379, self.r1, 6379, slow[0], slow[1],
                                                  seed + 1)
        self.addresses = addresses
        self.gateways: dict[str, Worker] = {
            name: start_gateway(network, host, "", name, bootstrap=name == "g1",
                                sentinels=self.sentinels.sentinels if self.sentinels else None,
                                redis=None if self.sentinels else addresses[name])
            for name, host in self.hosts.items()}
        wait_until(lambda: self.operator().run("show")[0] == 0, "g1 created the ring",
                   timeout=HEAL_DEADLINE)

    @property
    def primary(self) -> Host:
        """The Redis server that is the primary now (as far as the tests made it)."""
        return self.sentinels.primary if self.sentinels else self.r1

    def operator(self, server: Host | None = None, extra: tuple[str, ...] = ()) -> Operator:
        """``chash ring`` on the operator's host against ``server`` (the
        primary by default; with one server, through its relay if slow),
        with the options ``extra``."""
        if server is None and self.sentinels is None:
            address = self.addresses["op"]
        else:
            address = f"{(server or self.primary).address}:6379"
        # Over slow links a call's answer may come a round trip and a
        # retransmission late: the operator gives the server longer.
        slow = ("--timeout", "3") if self.slow else ()
        return Operator(self.op, f"redis://{address}/0", self.history, store="--redis",
                        extra=slow + extra)

    def change(self, *argv: str, server: Host | None = None) -> Attempt:
        return self.operator(server).change(*argv)

    def agree(self, what: str, names: tuple[str, ...] | None = None,
              deadline: float = HEAL_DEADLINE) -> float:
        """As ``EtcdSetup.agree``, for the gateways ``names`` (all by default)."""
        gateways = {name: self.gateways[name] for name in names or self.gateways}
        return agree(self.network, self.history, gateways, self.operator(), what, deadline)

    def finish(self) -> None:
        """Every promise, judged on the whole run (as ``EtcdSetup.finish``)."""
        wait_until(lambda: all((s["stale_seconds"], s["stale_since"]) == (0.0, None)
                               for s in self.history.sample(self.gateways).values()),
                   "every gateway hears from its store", timeout=HEAL_DEADLINE)
        operator = self.operator()
        final = self.history.sample(self.gateways)
        self.history.check(final, operator.read("history"), operator.read("show"))
        for gateway in self.gateways.values():
            assert gateway.close() == [], f"{gateway.reporter} failed lookups"


def start_redis(network: Network, host: Host) -> None:
    """One Redis server on ``host`` (port 6379 on its address), no replica."""
    server = shutil.which("redis-server")
    if server is None:
        pytest.skip("redis-server needed: apt-get install redis-server")
    host.spawn([server, "--port", "6379", "--bind", host.address, "--save", "",
                "--appendonly", "no", "--protected-mode", "no", "--dir", network.workdir,
                "--dbfilename", f"{host.name}.rdb"],
               log=f"{host.name}.redis.log", env=program_env())


#: An HTTP backend: answers every GET on ADDRESS:7000 with 200 and its own
#: name, the health checks' path included.
HTTP_BACKEND = (
    "import sys\n"
    "from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer\n"
    "name = sys.argv[2].encode()\n"
    "class Handler(BaseHTTPRequestHandler):\n"
    "    protocol_version = 'HTTP/1.1'\n"
    "    def do_GET(self):\n"
    "        self.send_response(200)\n"
    "        self.send_header('Content-Length', str(len(name)))\n"
    "        self.end_headers()\n"
    "        self.wfile.write(name)\n"
    "    def log_message(self, *args):\n"
    "        pass\n"
    "ThreadingHTTPServer((sys.argv[1], 7000), Handler).serve_forever()\n")

#: Run inside a gateway's host: each key of argv[2:] sent through the
#: gateway at 127.0.0.1:8080 (``X-User-Id``), then its status page read
#: from 127.0.0.1:9090; prints ``{"routes": {key: backend or "HTTP nnn"},
#: "status": {...}}``.
GATEWAY_CLIENT = (
    "import http.client, json, sys\n"
    "routes = {}\n"
    "for key in sys.argv[1:]:\n"
    "    conn = http.client.HTTPConnection('127.0.0.1', 8080, timeout=10)\n"
    "    conn.request('GET', '/', headers={'X-User-Id': key})\n"
    "    reply = conn.getresponse()\n"
    "    body = reply.read().decode()\n"
    "    routes[key] = body if reply.status == 200 else f'HTTP {reply.status}'\n"
    "    conn.close()\n"
    "conn = http.client.HTTPConnection('127.0.0.1', 9090, timeout=10)\n"
    "conn.request('GET', '/-/status')\n"
    "status = json.loads(conn.getresponse().read())\n"
    "print(json.dumps({'routes': routes, 'status': status}))\n")


def start_http_backend(host: Host, name: str) -> str:
    """An HTTP backend ``name`` on ``host``; its address, ADDRESS:7000."""
    host.spawn([sys.executable, "-c", HTTP_BACKEND, host.address, name],
               log=f"{host.name}.backend.log")
    return f"{host.address}:7000"


class RealGateway:
    """A ``chash gateway`` process on a host of its own: listening on port
    8080 of every address of the host, its admin on 127.0.0.1:9090 there,
    sharing ring ``shop`` through etcd; the tests reach both from inside
    the host (``routes``), never over the network under test."""

    def __init__(self, network: Network, host: Host, endpoints: str,
                 backends: dict[str, str], bootstrap: bool, vote_ttl: float) -> None:
        self.host = host
        self.name = host.name
        spec = ",".join(f"{name}={address}" for name, address in backends.items())
        self.process = host.spawn(
            [sys.executable, "-m", "chash", "gateway", "--listen", "0.0.0.0:8080",
             "--admin-listen", "127.0.0.1:9090", "--backend", spec, "--etcd", endpoints,
             "--ring", "shop", "--health-interval", "0.2", "--health-timeout", "0.5",
             "--fall", "1", "--rise", "1", "--vote-ttl", f"{vote_ttl:g}",
             "--resync-interval", f"{RESYNC:g}", "--connect-timeout", "0.5",
             "--log-level", "warning", *(["--bootstrap"] if bootstrap else [])],
            log=f"{host.name}.gateway.log", env=_env())
        network.processes.append(self.process)
        self.log_path = network.path(f"{host.name}.gateway.log")

    def routes(self, keys: list[str]) -> tuple[dict[str, str], dict[str, Any]]:
        """Where each of ``keys`` went through this gateway (the backend
        that answered, or ``HTTP nnn``), and its status page after."""
        done = self.host.run([sys.executable, "-c", GATEWAY_CLIENT, *keys], timeout=60,
                             env=_env())
        assert done.returncode == 0, f"{done.stderr}\n{self.log()}"
        reply = json.loads(done.stdout)
        return reply["routes"], reply["status"]

    def log(self) -> str:
        path = Path(self.log_path)
        return path.read_text()[-3000:] if path.exists() else ""
