"""How long shared membership takes to converge, with real processes.

Starts a redis-server on a free loopback port (no persistence) and three
gateway processes (tests/_support/membership_worker.py, ``resync_interval`` 0.2 s,
the driver given by ``--driver``), then measures, as wall time between
processes on one machine:

* normal changes: from an operator call in this process (add, reweigh,
  remove, in turn) until every gateway routes with the new ring;
* each fault: from the moment Redis is damaged until every gateway routes
  with the same, complete ring again (for a hung Redis: until every
  gateway sees the outage, and after it, until a change made at once
  reaches all of them);
* failing fast: how long ``add_node`` takes to raise against a hung Redis
  with ``socket_timeout=1`` and redis-py's default retries, and with
  ``retry=Retry(NoBackoff(), 0)``.

With ``--store etcd`` the same gateways share the ring through a
3-member etcd cluster instead, and the faults are etcd's: another ring at
the same version, the ring gone back a version, the leader killed, a
member paused (SIGSTOP), a member restarted, the history compacted; each
measured from the fault until a change made at once reaches every
gateway (the first three: until every gateway holds the right ring).

Prints median and max per measurement; ``--json FILE`` writes every
sample.  Needs redis-server and redis-py (etcd and httpx for ``--store
etcd``); about two minutes.

    python benchmarks/bench_membership.py [--changes 40] [--repeat 5] [--driver sync]
    python benchmarks/bench_membership.py --nodes 5000 --changes 15 --no-faults
    python benchmarks/bench_membership.py --store etcd --driver async
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import redis  # noqa: E402
from redis.backoff import NoBackoff  # noqa: E402
from redis.retry import Retry  # noqa: E402

from _support.membership_procs import Worker, fingerprint_of  # noqa: E402
from _support.redis_server import RedisServer  # noqa: E402
from chash import ConsistentHashRouter  # noqa: E402
from chash.membership import RedisMembership  # noqa: E402

META, NODES, ORDER = "chash:{default}:meta", "chash:{default}:nodes", "chash:{default}:order"


class Bench:
    """Three gateways and an operator's membership of one ring: what both
    stores' benchmarks share.  ``operator`` is set by the subclass."""

    operator: Any

    def __init__(self, port: int, driver: str, workdir: Path, options: tuple[str, ...] = ()
                 ) -> None:
        self.gateways = [Worker(port, "default", f"gw{i}", workdir,
                                options=("--driver", driver, *options)) for i in range(3)]
        for gateway in self.gateways:
            assert gateway.answer().get("ready"), gateway.log()
        self.ring: dict[str, float] = {}

    def close(self) -> None:
        self.operator.stop()
        self.operator.client.close()
        for gateway in self.gateways:
            gateway.close()

    def converged(self, act: Callable[[], None], **condition: Any) -> float:
        """Seconds from ``act()`` until every gateway meets ``condition``
        (a fingerprint, an epoch left, a connected value)."""
        condition.setdefault("deadline", 30.0)
        for gateway in self.gateways:
            gateway.send("when", **condition)
        started = time.time()
        act()
        answers = [gateway.answer(deadline=condition["deadline"] + 10) for gateway in self.gateways]
        if not all(answer.get("ok") for answer in answers):
            raise RuntimeError(f"no convergence: {answers}; {[g.status() for g in self.gateways]}")
        return max(answer["at"] for answer in answers) - started

    def change(self, i: int) -> float:
        """One operator change, in turn an add, a reweigh and a removal."""
        node = f"n{i // 3}"
        kind = i % 3
        if kind == 2:
            del self.ring[node]
        else:
            self.ring[node] = float(kind + 1)

        def act() -> None:
            if kind == 2:
                self.operator.remove_node(node, force=True)
            else:
                self.operator.add_node(node, float(kind + 1))

        if len(self.ring) > 100:  # a fingerprint per poll would cost more than the change
            return self.converged(act, node=node, weight=self.ring.get(node), interval=0.005)
        return self.converged(act, fingerprint=fingerprint_of(self.ring))

    def settle(self, nodes: int) -> None:
        """A ring of ``nodes`` nodes everywhere, at one version: ten added
        by the operator, the rest written at once (as one change)."""
        for i in range(min(nodes, 10)):
            self.ring[f"base{i}"] = 1.0
            self.operator.add_node(f"base{i}", 1.0)
        if nodes > 10:
            bulk = {f"10.1.{i // 250}.{i % 250}:8080": 1.0 for i in range(nodes - 10)}
            self.ring.update(bulk)
            self.bulk_write(bulk)
        self.converged(lambda: None, fingerprint=fingerprint_of(self.ring), deadline=120.0)

    def bulk_write(self, bulk: dict[str, float]) -> None:
        """Add ``bulk`` to the stored ring as one change, behind the
        membership's back."""
        raise NotImplementedError

    def change_at_once(self) -> float:
        """A change made at once, retried through an outage, until every
        gateway holds it."""
        node = f"after{time.monotonic_ns()}"
        self.ring[node] = 1.0

        def write() -> None:
            deadline = time.monotonic() + 30
            while True:
                try:
                    self.operator.add_node(node, 1.0)
                    return
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.01)

        return self.converged(write, fingerprint=fingerprint_of(self.ring))


class RedisBench(Bench):
    """A Redis, three gateways, an operator's membership and a raw client."""

    def __init__(self, driver: str, workdir: Path) -> None:
        self.server = RedisServer()
        self.server.start()
        self.raw = redis.Redis(host="127.0.0.1", port=self.server.port, decode_responses=True)
        super().__init__(self.server.port, driver, workdir)
        self.operator = RedisMembership(
            ConsistentHashRouter(), redis.Redis(**self.server.client_kwargs()),
            resync_interval=0.2, vote_ttl=3.0, reporter="operator")

    def close(self) -> None:
        super().close()
        self.raw.close()
        self.server.close()

    def bulk_write(self, bulk: dict[str, float]) -> None:
        with self.raw.pipeline(transaction=True) as write:
            write.hset(NODES, mapping={node: repr(weight) for node, weight in bulk.items()})
            write.hset(META, "count", len(self.ring))
            write.hincrby(META, "version", 1)
            write.hdel(META, "digest")
            write.execute()

    def epoch(self) -> str:
        return str(self.raw.hget(META, "epoch"))

    # -- faults -------------------------------------------------------------

    def same_version_other_ring(self) -> float:
        other = dict(self.ring)
        node = f"other{len(other)}"
        other[node] = 1.0
        version = self.raw.hget(META, "version")

        def act() -> None:
            rewrite = self.raw.pipeline(transaction=True)
            rewrite.hset(NODES, node, "1.0")
            rewrite.hset(META, mapping={"version": version, "count": len(other),
                                        "digest": fingerprint_of(other)})
            rewrite.execute()

        elapsed = self.converged(act, fingerprint=fingerprint_of(other))
        self.ring = other
        return elapsed

    def going_back(self) -> float:
        meta = self.raw.hgetall(META)
        nodes = self.raw.hgetall(NODES)
        order = self.raw.hgetall(ORDER)
        self.operator.add_node("lost", 1.0)
        self.converged(lambda: None, fingerprint=fingerprint_of({**self.ring, "lost": 1.0}))

        def act() -> None:
            rollback = self.raw.pipeline(transaction=True)
            rollback.delete(NODES)
            rollback.hset(NODES, mapping=nodes)
            rollback.delete(ORDER)
            rollback.hset(ORDER, mapping=order)
            rollback.hset(META, mapping=meta)
            rollback.execute()

        return self.converged(act, fingerprint=fingerprint_of(self.ring),
                              epoch_not=meta["epoch"])

    def restart_empty(self) -> float:
        return self.converged(self.server.restart, epoch_not=self.epoch())

    def damage(self, harm: Callable[[], Any]) -> float:
        return self.converged(harm, epoch_not=self.epoch())

    def outage(self) -> tuple[float, float]:
        detected = self.converged(self.server.pause, connected=False)
        node = f"after{time.monotonic_ns()}"
        self.ring[node] = 1.0

        def resume_and_write() -> None:
            self.server.resume()
            deadline = time.monotonic() + 30
            while True:
                try:
                    self.operator.add_node(node, 1.0)
                    return
                except (redis.ConnectionError, redis.TimeoutError):
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.01)

        recovered = self.converged(resume_and_write, fingerprint=fingerprint_of(self.ring))
        return detected, recovered


class EtcdBench(Bench):
    """A 3-member etcd cluster, three gateways, an operator's membership."""

    def __init__(self, driver: str, workdir: Path) -> None:
        from _support.etcd_server import EtcdCluster
        from chash.membership import EtcdMembership

        self.cluster = EtcdCluster(3)
        self.cluster.start()
        super().__init__(0, driver, workdir, ("--etcd", self.cluster.url))
        self.operator = EtcdMembership(ConsistentHashRouter(), self.cluster.urls,
                                       resync_interval=0.2, vote_ttl=3.0, reporter="operator",
                                       timeout=1.0)

    def close(self) -> None:
        super().close()
        self.cluster.close()

    def doc(self) -> dict[str, Any]:
        reply = self.cluster.post("/v3/kv/range", {"key": _b64(ETCD_RING)})
        return dict(json.loads(base64.b64decode(reply["kvs"][0]["value"])))

    def put(self, doc: dict[str, Any]) -> None:
        self.cluster.post("/v3/kv/put", {"key": _b64(ETCD_RING),
                                         "value": _b64(json.dumps(doc))})

    def bulk_write(self, bulk: dict[str, float]) -> None:
        doc = self.doc()
        for node, weight in bulk.items():
            doc["seq"] += 1
            doc["nodes"][node] = repr(weight)
            doc["order"][node] = doc["seq"]
        doc["version"] += 1
        doc.pop("digest", None)
        self.put(doc)

    def same_version_other_ring(self) -> float:
        doc = self.doc()
        node = f"other{len(self.ring)}"
        other = {**self.ring, node: 1.0}
        doc["seq"] += 1
        doc["nodes"][node] = "1.0"
        doc["order"][node] = doc["seq"]
        doc["digest"] = fingerprint_of(other)
        elapsed = self.converged(lambda: self.put(doc), fingerprint=fingerprint_of(other))
        self.ring = other
        return elapsed

    def going_back(self) -> float:
        old = self.doc()
        self.operator.add_node("lost", 1.0)
        self.converged(lambda: None, fingerprint=fingerprint_of({**self.ring, "lost": 1.0}))
        return self.converged(lambda: self.put(old), fingerprint=fingerprint_of(self.ring),
                              epoch_not=old["epoch"])

    def leader_killed(self) -> float:
        leader = self.cluster.leader()
        started = time.monotonic()
        leader.kill()
        elapsed = (time.monotonic() - started) + self.change_at_once()
        self.cluster.restart(leader)
        return elapsed

    def member_paused(self) -> float:
        member = self.cluster.members[self.operator.client._cluster.current]
        member.pause()
        try:
            return self.change_at_once()
        finally:
            member.resume()
            self.cluster.wait_healthy()

    def member_restarted(self) -> float:
        member = self.cluster.members[0]
        started = time.monotonic()
        self.cluster.restart(member)
        return (time.monotonic() - started) + self.change_at_once()

    def compacted(self) -> float:
        self.cluster.compact()
        return self.change_at_once()


ETCD_RING = "chash/default/ring"


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def fail_fast(server: RedisServer, retry: Any) -> float:
    """Seconds until add_node raises against a hung Redis."""
    kwargs: dict[str, Any] = {"host": "127.0.0.1", "port": server.port, "socket_timeout": 1.0,
                              "socket_connect_timeout": 1.0}
    if retry is not None:
        kwargs["retry"] = retry
    client = redis.Redis(**kwargs)
    membership = RedisMembership(ConsistentHashRouter(), client, bootstrap=True)
    membership.add_node("warm", 1.0)  # connected, scripts loaded
    server.pause()
    started = time.monotonic()
    try:
        membership.add_node("x", 1.0)
    except (redis.TimeoutError, redis.ConnectionError):
        pass
    elapsed = time.monotonic() - started
    server.resume()
    client.close()
    return elapsed


def summary(samples: list[float]) -> str:
    return (f"median {statistics.median(samples) * 1000:8.1f} ms   "
            f"max {max(samples) * 1000:8.1f} ms   (n={len(samples)})")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=60)
    parser.add_argument("--nodes", type=int, default=10, help="ring size (default 10)")
    parser.add_argument("--no-faults", action="store_true", help="normal changes only")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--driver", choices=("sync", "async"), default="sync")
    parser.add_argument("--store", choices=("redis", "etcd"), default="redis")
    parser.add_argument("--json")
    args = parser.parse_args(argv[1:])
    if args.store == "etcd":
        return etcd_main(args)

    results: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        bench = RedisBench(args.driver, Path(tmp))
        try:
            bench.gateways[0].call("add", node="seed")
            bench.ring["seed"] = 1.0
            bench.operator.refresh()
            bench.settle(args.nodes)
            results[f"normal change, {args.nodes} nodes"] = [bench.change(i)
                                                             for i in range(args.changes)]
            bench.converged(lambda: None, fingerprint=fingerprint_of(bench.ring))  # all agree
            if args.no_faults:
                return report(args, results)
            faults: dict[str, Callable[[], float]] = {
                "1. same version, other ring": bench.same_version_other_ring,
                "1. Redis went back a version": bench.going_back,
                "2. Redis restarted empty": bench.restart_empty,
                "3. meta without epoch": lambda: bench.damage(
                    lambda: bench.raw.hdel(META, "epoch")),
                "4. version not an integer": lambda: bench.damage(
                    lambda: bench.raw.hset(META, "version", "4.5")),
                "5. node set evicted": lambda: bench.damage(lambda: bench.raw.delete(NODES)),
            }
            for label, measure in faults.items():
                results[label] = [measure() for _ in range(args.repeat)]
            detected, recovered = [], []
            for _ in range(args.repeat):
                seen, back = bench.outage()
                detected.append(seen)
                recovered.append(back)
            results["6. hung Redis: outage seen"] = detected
            results["6. hung Redis: change after it"] = recovered
        finally:
            bench.close()
    server = RedisServer()
    server.start()
    try:
        results["add_node, hung Redis, default retries"] = [fail_fast(server, None)]
        results["add_node, hung Redis, Retry(NoBackoff(), 0)"] = [
            fail_fast(server, Retry(NoBackoff(), 0)) for _ in range(args.repeat)]
    finally:
        server.close()

    return report(args, results)


def normal_changes(bench: Bench, args: argparse.Namespace,
                   results: dict[str, list[float]]) -> None:
    bench.gateways[0].call("add", node="seed")
    bench.ring["seed"] = 1.0
    bench.operator.refresh()
    bench.settle(args.nodes)
    results[f"normal change, {args.nodes} nodes"] = [bench.change(i) for i in range(args.changes)]
    bench.converged(lambda: None, fingerprint=fingerprint_of(bench.ring))  # all agree


def etcd_main(args: argparse.Namespace) -> int:
    """The etcd figures: normal changes, then each fault ``--repeat`` times."""
    results: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        bench = EtcdBench(args.driver, Path(tmp))
        try:
            normal_changes(bench, args, results)
            if not args.no_faults:
                faults: dict[str, Callable[[], float]] = {
                    "1. same version, other ring": bench.same_version_other_ring,
                    "1. etcd went back a version": bench.going_back,
                    "2. leader killed (kill to change everywhere)": bench.leader_killed,
                    "3. member paused: a change everywhere": bench.member_paused,
                    "4. member restarted (restart to change everywhere)":
                        bench.member_restarted,
                    "5. history compacted: a change everywhere": bench.compacted,
                }
                for label, measure in faults.items():
                    results[label] = [measure() for _ in range(args.repeat)]
        finally:
            bench.close()
    return report(args, results)


def report(args: argparse.Namespace, results: dict[str, list[float]]) -> int:
    """Print the figures; write the samples if asked."""
    if args.store == "etcd":
        import httpx

        from _support.etcd_server import EtcdCluster
        version = subprocess.run([EtcdCluster(1).executable, "--version"], capture_output=True,
                                 text=True, check=False).stdout.split("\n")[0]
        where = f"a 3-member etcd cluster on 127.0.0.1 ({version}), httpx {httpx.__version__}"
    else:
        where = f"redis-server on 127.0.0.1, redis-py {redis.__version__}"
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True, check=False).stdout.strip()
    print(f"chash membership convergence at {commit or 'an unknown commit'}: 3 gateway "
          f"processes ({args.driver} driver, resync_interval 0.2 s), {where}, "
          f"{platform.python_implementation()} {platform.python_version()}, load average "
          f"{os.getloadavg()[0]:.1f}")
    width = max(map(len, results))
    for label, samples in results.items():
        print(f"{label:<{width}}  {summary(samples)}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"driver": args.driver, "samples": results}, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
