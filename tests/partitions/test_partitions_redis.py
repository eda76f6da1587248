"""Redis with Sentinel across a real split: the primary cut off with one
gateway while the Sentinels fail over on the majority side, then healed.

Promise 1 with Redis: the isolated primary still takes writes, which the
failover then discards; a change made there is not reported committed
because no replica acknowledged it (``WAIT``), while every change
reported committed, before or after the failover, is in the ring every
gateway ends with.  Hosts: the primary r1 and its replica r2, three
sentinels, three gateways following the primary through the sentinels,
and the operator's ``chash ring``.
"""
from __future__ import annotations

import time

import pytest

from _support.membership_procs import Worker
from _support.netns import Network
from _support.partitions import Attempt, History, Operator, SentinelSetup, start_gateway
from _support.waiting import wait_until

pytest.importorskip("redis", reason="redis-py not installed: pip install 'chash-router[redis]'")

DEADLINE = 45.0


def test_the_redis_primary_isolated_with_one_gateway(network: Network) -> None:
    r1, r2 = network.host("r1"), network.host("r2")
    sentinels = [network.host(f"s{i}") for i in (1, 2, 3)]
    hosts = {name: network.host(name) for name in ("g1", "g2", "g3")}
    op = network.host("op")
    redis = SentinelSetup(network, r1, r2, sentinels)
    redis.ready(op)
    gateways: dict[str, Worker] = {
        name: start_gateway(network, host, "", name, bootstrap=name == "g1",
                            sentinels=redis.sentinels) for name, host in hosts.items()}
    history = History()
    on_r1 = Operator(op, f"redis://{r1.address}:6379/0", history, store="--redis")
    on_r2 = Operator(op, f"redis://{r2.address}:6379/0", history, store="--redis")
    wait_until(lambda: on_r1.run("show")[0] == 0, "g1 created the ring", timeout=DEADLINE)
    for node in ("a:1", "b:1", "c:1"):
        attempt = on_r1.change("add", node)
        assert attempt.committed, attempt  # acknowledged by the replica

    def agree(names: tuple[str, ...], operator: Operator, what: str) -> None:
        shown = operator.read("show")
        wait_until(lambda: {history.sample({n: gateways[n] for n in names})[n]["fingerprint"]
                            for n in names} == {shown["fingerprint"]}, what, timeout=DEADLINE,
                   interval=0.1)

    agree(("g1", "g2", "g3"), on_r1, "the gateways hold a, b, c")
    network.split([r1, hosts["g1"]])
    # The isolated primary takes the write, but no replica acknowledges it:
    # the gateway is told it is not committed.
    gateways["g1"].send("add", node="lost:1")
    answer = gateways["g1"].answer()
    assert "NotReplicatedError" in answer.get("error", ""), answer
    history.attempts.append(Attempt(["add", "lost:1"], 1, None, "", answer["error"]))
    # The majority side fails over to r2 and goes on.
    wait_until(lambda: all(redis.master_seen(s) == r2.address for s in sentinels),
               "the sentinels promoted r2", timeout=DEADLINE)
    wait_until(lambda: redis.ask(op, r2, 6379, "ROLE").split("\n")[0] == "master",
               "r2 took over", timeout=DEADLINE)
    for argv in (("add", "d:1"), ("weight", "a:1", "2")):
        attempt = on_r2.change(*argv)
        assert attempt.committed, attempt
    agree(("g2", "g3"), on_r2, "the majority's gateways follow r2")
    away = history.sample({"g1": gateways["g1"]})["g1"]
    assert away["weights"] and "d:1" not in away["weights"]  # routing on its side's ring
    network.heal()
    healed = time.monotonic()
    agree(("g1", "g2", "g3"), on_r2, "one ring after heal")
    print(f"one ring {time.monotonic() - healed:.1f}s after heal")
    final = history.sample(gateways)
    history.check(final, on_r2.read("history"), on_r2.read("show"))
    # The write the isolated primary took went with the failover, as
    # expected of Redis; it was never reported committed.
    assert "lost:1" not in {node["node"] for node in on_r2.read("show")["nodes"]}
    for gateway in gateways.values():
        assert gateway.close() == []
