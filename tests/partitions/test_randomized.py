"""The randomized partition run: faults mixed at random while ``chash
ring`` changes the ring and every gateway routes without pause, then
everything healed and the whole history judged.

Seeds: by default (in CI as anywhere) the fixed list ``SEEDS``, one run of
each store per seed, the seed in the test's id (``[seed=N]``), printed by
the run and named by its failure with the command that replays it:
``--partitions-seed SEED`` runs that seed alone (repeat the option for
several).  Exploring: ``--partitions-fresh N`` runs N fresh seeds instead,
each printed the same way.  A run is ``--partitions-rounds N`` rounds with
each store (4 by default), a round being a fault (or none), changes, a
pause and the heal.  Counted in rounds rather than seconds, and with the
rounds drawn apart from the changes (``_draws``), a replay makes the same
faults on the same hosts with the same pauses and as many changes in each
round, however fast the machine and whatever came of the changes; the
changes themselves are the same as long as the same ones commit.

The faults: a gateway isolated, an etcd member cut
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

#: The seeds of every run unless told otherwise (CI's): fixed, so that a
#: failure replays.  In the default 4 rounds each draws every kind of
#: fault of either store (each run prints what it drew): with etcd, seed 5
#: split, gateway, minority, minority and seed 6 gateway, minority, split,
#: minority; with Redis, seed 5 replica, gateway, primary, primary and
#: seed 6 gateway, primary, replica, replica.
SEEDS = (5, 6)


_FRESH = pytest.StashKey[list[int]]()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Each test once per seed: ``--partitions-seed``'s, else
    ``--partitions-fresh N`` fresh ones (the same for both stores), else
    ``SEEDS``."""
    if "seed" not in metafunc.fixturenames:
        return
    config = metafunc.config
    seeds = config.getoption("--partitions-seed") or []
    fresh = config.getoption("--partitions-fresh")
    if not seeds and fresh:
        if _FRESH not in config.stash:
            draw = random.SystemRandom()
            config.stash[_FRESH] = [draw.randrange(1 << 32) for _ in range(fresh)]
        seeds = config.stash[_FRESH]
    metafunc.parametrize("seed", seeds or SEEDS, ids=lambda seed: f"seed={seed}")


def _replay(seed: int, request: pytest.FixtureRequest) -> str:
    """The command that replays this seed's run."""
    rounds = int(request.config.getoption("--partitions-rounds"))
    return (f"python3 -m pytest tests/partitions/test_randomized.py --partitions-seed {seed} "
            f"--partitions-rounds {rounds}")


def _rounds(seed: int, request: pytest.FixtureRequest) -> int:
    """The run's rounds; prints how to replay it."""
    rounds = int(request.config.getoption("--partitions-rounds"))
    assert rounds > 0, "--partitions-rounds must be positive"
    print(f"randomized partition run, seed {seed}, {rounds} rounds; "
          f"replay: {_replay(seed, request)}")
    return rounds


def test_random_faults_while_the_ring_changes(network: Network, seed: int,
                                              request: pytest.FixtureRequest) -> None:
    rounds = _rounds(seed, request)
    try:
        _run(network, seed, rounds)
    except AssertionError as exc:
        raise AssertionError(f"seed {seed} ({_replay(seed, request)}): {exc}") from exc


def _draws(seed: int) -> tuple[random.Random, random.Random]:
    """Two streams from one seed: the rounds' (faults, their hosts, how many
    changes, the pauses), which therefore never depend on what came of a
    change, and the changes' own (which node, which weight)."""
    return random.Random(seed), random.Random(f"{seed} changes")


def _run(network: Network, seed: int, rounds: int) -> None:
    rng, pick = _draws(seed)
    setup = Setup(network)
    nodes: dict[str, float] = {}
    for node in ("n0:1", "n1:1", "n2:1"):
        assert setup.change("add", node).committed
        nodes[node] = 1.0
    setup.agree("the gateways hold the first nodes")
    made = 3
    faults = 0
    started, drawn = time.monotonic(), []
    for _ in range(rounds):
        fault = rng.choice(["gateway", "minority", "split", "none"])
        drawn.append(fault)
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
            action = pick.choice(["add", "weight", "remove"] if len(nodes) > 2 else ["add"])
            if action == "add":
                node = f"n{made}:1"
                made += 1
                attempt = setup.change("add", node)
                if attempt.committed:
                    nodes[node] = 1.0
            elif action == "weight":
                node = pick.choice(sorted(nodes))
                setup.change("weight", node, str(pick.randint(1, 4)))
            else:
                node = pick.choice(sorted(nodes))
                if setup.change("remove", node).committed:
                    del nodes[node]
            setup.history.sample(setup.gateways)
        time.sleep(rng.uniform(0.2, 1.5))
        setup.history.sample(setup.gateways)
        network.heal()
    setup.agree("one ring after the last heal")
    print(f"{faults} faults in {rounds} rounds ({', '.join(drawn)}), "
          f"{time.monotonic() - started:.0f} s; {len(setup.history.attempts)} changes attempted, "
          f"{len(setup.history.committed())} committed")
    assert len(setup.history.committed()) > 3
    setup.finish()


def test_random_faults_with_redis_and_sentinel(network: Network, seed: int,
                                               request: pytest.FixtureRequest) -> None:
    """The same with Redis: a gateway isolated, the primary cut off with
    one gateway (the sentinels fail over on the other side), the replica
    cut off; ``chash ring --redis-min-replicas 1`` makes the changes, so a
    change is committed only once the replica has it."""
    pytest.importorskip("redis", reason="redis-py not installed")
    rounds = _rounds(seed, request)
    try:
        _run_redis(network, seed, rounds)
    except AssertionError as exc:
        raise AssertionError(f"seed {seed} ({_replay(seed, request)}): {exc}") from exc


def _run_redis(network: Network, seed: int, rounds: int) -> None:
    rng, pick = _draws(seed)
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
    started, drawn = time.monotonic(), []
    for _ in range(rounds):
        fault = rng.choice(["gateway", "primary", "replica", "none"])
        drawn.append(fault)
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
            if pick.random() < 0.6 or len(nodes) <= 2:
                node = f"n{made}:1"
                made += 1
                if operator().change("add", node).committed:
                    nodes.add(node)
            else:
                node = pick.choice(sorted(nodes))
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
    print(f"{faults} faults in {rounds} rounds ({', '.join(drawn)}), "
          f"{time.monotonic() - started:.0f} s; {len(history.attempts)} changes attempted, "
          f"{len(history.committed())} committed")
    setup.finish()
