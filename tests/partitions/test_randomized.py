"""The randomized partition run: faults mixed at random while ``chash
ring`` changes the ring and every gateway routes without pause, then
everything healed and the whole history judged.

``--partitions-seed SEED`` replays a run (every run prints its seed, and a
failure names it); ``--partitions-seconds S`` makes it longer (60 s by
default, as in CI: half with etcd, half with Redis and Sentinel).  The faults: a gateway isolated, an etcd member cut
off from the others (the minority side; the leader or not), a 2/1 split
of a member and a gateway from the rest; each healed before the next,
with changes made throughout and every gateway routing keys without pause
(the load: an empty ring or a failed lookup fails the run).
"""
from __future__ import annotations

import random
import time

import pytest

from _support.netns import Network
from _support.partitions import EtcdSetup as Setup
from _support.partitions import Operator, RedisSetup
from _support.waiting import wait_until


def test_random_faults_while_the_ring_changes(network: Network,
                                              request: pytest.FixtureRequest) -> None:
    seed, seconds = _options(request)
    try:
        _run(network, random.Random(seed), seconds)
    except AssertionError as exc:
        raise AssertionError(f"--partitions-seed {seed}: {exc}") from exc


def _options(request: pytest.FixtureRequest) -> tuple[int, float]:
    seed = request.config.getoption("--partitions-seed")
    if seed is None:
        seed = random.SystemRandom().randrange(1 << 32)
    seconds = float(request.config.getoption("--partitions-seconds"))
    print(f"randomized partition run: --partitions-seed {seed} --partitions-seconds "
          f"{seconds:g} ({seconds / 2:g} s of it on this store)")
    return int(seed), seconds / 2  # the run's time, shared by the two stores


def _run(network: Network, rng: random.Random, seconds: float) -> None:
    setup = Setup(network)
    nodes: dict[str, float] = {}
    for node in ("n0:1", "n1:1", "n2:1"):
        assert setup.change("add", node).committed
        nodes[node] = 1.0
    setup.agree("the gateways hold the first nodes")
    made = 3
    faults = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        fault = rng.choice(["gateway", "minority", "split", "none"])
        members, gateways = setup.members, list(setup.hosts.values())
        if fault == "gateway":
            network.isolate(rng.choice(gateways))
        elif fault == "minority":
            member = rng.choice(members)
            for other in members:
                if other is not member:
                    network.cut(member, other)
        elif fault == "split":
            network.split([rng.choice(members), rng.choice(gateways)])
        faults += fault != "none"
        for _ in range(rng.randint(1, 3)):
            action = rng.choice(["add", "weight", "remove"] if len(nodes) > 2 else ["add"])
            if action == "add":
                node = f"n{made}:1"
                made += 1
                attempt = setup.change("add", node)
                if attempt.committed:
                    nodes[node] = 1.0
            elif action == "weight":
                node = rng.choice(sorted(nodes))
                setup.change("weight", node, str(rng.randint(1, 4)))
            else:
                node = rng.choice(sorted(nodes))
                if setup.change("remove", node).committed:
                    del nodes[node]
            setup.history.sample(setup.gateways)
        time.sleep(rng.uniform(0.2, 1.5))
        setup.history.sample(setup.gateways)
        network.heal()
    setup.agree("one ring after the last heal")
    print(f"{faults} faults, {len(setup.history.attempts)} changes attempted, "
          f"{len(setup.history.committed())} committed")
    assert len(setup.history.committed()) > 3
    setup.finish()


def test_random_faults_with_redis_and_sentinel(network: Network,
                                               request: pytest.FixtureRequest) -> None:
    """The same with Redis: a gateway isolated, the primary cut off with
    one gateway (the sentinels fail over on the other side), the replica
    cut off; ``chash ring --redis-min-replicas 1`` makes the changes, so a
    change is committed only once the replica has it."""
    pytest.importorskip("redis", reason="redis-py not installed")
    seed, seconds = _options(request)
    try:
        _run_redis(network, random.Random(seed), seconds)
    except AssertionError as exc:
        raise AssertionError(f"--partitions-seed {seed}: {exc}") from exc


def _run_redis(network: Network, rng: random.Random, seconds: float) -> None:
    setup = RedisSetup(network)
    redis = setup.sentinels
    assert redis is not None
    hosts, gateways, history = setup.hosts, setup.gateways, setup.history

    def operator() -> Operator:
        return setup.operator(extra=("--redis-min-replicas", "1"))

    nodes: set[str] = set()
    for node in ("n0:1", "n1:1", "n2:1"):
        assert operator().change("add", node).committed
        nodes.add(node)
    made, faults = 3, 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        fault = rng.choice(["gateway", "primary", "replica", "none"])
        failed_over = False
        if fault == "gateway":
            network.isolate(rng.choice(list(hosts.values())))
        elif fault == "replica":
            network.isolate(redis.replica)
        elif fault == "primary":
            old = redis.primary
            network.split([old, rng.choice(list(hosts.values()))])
            wait_until(lambda: all(redis.master_seen(s) == redis.replica.address
                                   for s in setup.sentinel_hosts), "the sentinels fail over",
                       timeout=45)
            redis.swap()
            failed_over = True
        faults += fault != "none"
        for _ in range(rng.randint(1, 2)):
            if rng.random() < 0.6 or len(nodes) <= 2:
                node = f"n{made}:1"
                made += 1
                if operator().change("add", node).committed:
                    nodes.add(node)
            else:
                node = rng.choice(sorted(nodes))
                if operator().change("remove", node).committed:
                    nodes.discard(node)
            history.sample(gateways)
        time.sleep(rng.uniform(0.2, 1.0))
        history.sample(gateways)
        network.heal()
        if failed_over or fault == "replica":
            setup.agree("one ring after the heal")  # promise 3, before the next fault
            redis.ready(setup.op)
    setup.agree("one ring after the last heal")
    print(f"{faults} faults, {len(history.attempts)} changes attempted, "
          f"{len(history.committed())} committed")
    setup.finish()
