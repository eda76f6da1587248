"""The randomized partition run: faults mixed at random while ``chash
ring`` changes the ring and every gateway routes without pause, then
everything healed and the whole history judged.

``--partitions-seed SEED`` replays a run (every run prints its seed, and a
failure names it); ``--partitions-seconds S`` makes it longer (60 s by
default, as in CI).  The faults: a gateway isolated, an etcd member cut
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


def test_random_faults_while_the_ring_changes(network: Network,
                                              request: pytest.FixtureRequest) -> None:
    seed = request.config.getoption("--partitions-seed")
    if seed is None:
        seed = random.SystemRandom().randrange(1 << 32)
    seconds = float(request.config.getoption("--partitions-seconds"))
    print(f"randomized partition run: --partitions-seed {seed} --partitions-seconds "
          f"{seconds:g}")
    rng = random.Random(seed)
    try:
        _run(network, rng, seconds)
    except AssertionError as exc:
        raise AssertionError(f"--partitions-seed {seed}: {exc}") from exc


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
