"""The Redis scenarios across real splits, each ending with the promises of
docs/reliability.md checked as the etcd ones are (tests/_support/partitions.py):

* Redis with Sentinel: the primary cut off with one gateway while the
  Sentinels fail over on the majority side, then healed.  Promise 1 with
  Redis: the isolated primary still takes writes, which the failover then
  discards; a change made there is not reported committed because no
  replica acknowledged it (``WAIT``), while every change reported
  committed, before or after the failover, is in the ring every gateway
  ends with.
* One Redis server, no replica: a 2/1 split of the server and a gateway
  from the other gateways and the operator.
* One Redis server behind slow, lossy links: 200 ms each way and 5 % of
  chunks late between every gateway (and the operator) and the server,
  while changes are made.
"""
from __future__ import annotations

import pytest

from _support.netns import Network
from _support.partitions import Attempt, RedisSetup
from _support.waiting import wait_until

pytest.importorskip("redis", reason="redis-py not installed: pip install 'chash-router[redis]'")

DEADLINE = 45.0


def test_the_redis_primary_isolated_with_one_gateway(network: Network) -> None:
    setup = RedisSetup(network)
    assert setup.sentinels is not None and setup.r2 is not None
    r1, r2 = setup.r1, setup.r2
    for node in ("a:1", "b:1", "c:1"):
        attempt = setup.change("add", node)
        assert attempt.committed, attempt  # acknowledged by the replica
    setup.agree("the gateways hold a, b, c")
    g1 = setup.gateways["g1"]
    network.split([r1, setup.hosts["g1"]])
    # The isolated primary takes the write, but no replica acknowledges it:
    # the gateway is told it is not committed.
    g1.send("add", node="lost:1")
    answer = g1.answer()
    assert "NotReplicatedError" in answer.get("error", ""), answer
    setup.history.attempts.append(Attempt(["add", "lost:1"], 1, None, "", answer["error"]))
    # The majority side fails over to r2 and goes on.
    wait_until(lambda: all(setup.sentinels.master_seen(s) == r2.address  # type: ignore[union-attr]
                           for s in setup.sentinel_hosts),
               "the sentinels promoted r2", timeout=DEADLINE)
    wait_until(lambda: setup.sentinels.ask(  # type: ignore[union-attr]
        setup.op, r2, 6379, "ROLE").split("\n")[0] == "master", "r2 took over", timeout=DEADLINE)
    setup.sentinels.swap()
    for argv in (("add", "d:1"), ("weight", "a:1", "2")):
        attempt = setup.change(*argv)
        assert attempt.committed, attempt
    setup.agree("the majority's gateways follow r2", names=("g2", "g3"))
    away = setup.history.sample({"g1": g1})["g1"]
    assert away["weights"] and "d:1" not in away["weights"]  # routing on its side's ring
    assert away["stale_seconds"] == 0.0  # its side's primary answers it
    network.heal()
    # r1 stays a primary for seconds after the heal, until the sentinels
    # demote it: g1 moves to r2 at its next check all the same.
    setup.agree("one ring after heal")
    setup.finish()
    # The write the isolated primary took went with the failover, as
    # expected of Redis; it was never reported committed.
    assert "lost:1" not in {node["node"] for node in setup.operator().read("show")["nodes"]}


def test_a_two_one_split_with_one_redis_server(network: Network) -> None:
    """r1 and g3 on one side, g1, g2 and the operator on the other: the
    operator's changes fail (exit 1, never reported committed), g1 and g2
    route on their last ring and say so, a change made through g3 next to
    the server is committed and kept; one ring after heal."""
    setup = RedisSetup(network, sentinel=False)
    for node in ("a:1", "b:1"):
        assert setup.change("add", node).committed
    setup.agree("the three gateways hold a, b")
    before = setup.history.sample(setup.gateways)
    network.split([setup.r1, setup.hosts["g3"]])
    for name in ("g1", "g2"):
        gateway = setup.gateways[name]
        wait_until(lambda gateway=gateway: not gateway.status()["connected"],  # type: ignore[misc]
                   f"{name} finds the server gone", timeout=30)
    failed = setup.change("add", "x:1")
    assert failed.code == 1 and failed.version is None, failed
    assert len(failed.err.strip().splitlines()) == 1 and "unreachable" in failed.err, failed.err
    g3 = setup.gateways["g3"]
    g3.send("add", node="c:1")
    assert g3.answer() == {"ok": True}
    committed = g3.status()["version"]
    setup.history.attempts.append(Attempt(["add", "c:1"], 0, committed, "", ""))
    for name in ("g1", "g2"):
        away = setup.history.sample({name: setup.gateways[name]})[name]
        assert away["weights"] == before[name]["weights"]  # its last ring, not empty
        assert away["stale_seconds"] > 0 and away["stale_since"] is not None
    network.heal()
    setup.agree("one ring after the split heals")
    setup.finish()
    assert "x:1" not in {n["node"] for n in setup.operator().read("show")["nodes"]}


def test_changes_over_slow_and_lossy_links_to_redis(network: Network) -> None:
    """200 ms each way and 5 % of chunks late by a retransmission timeout
    between every gateway (and the operator) and the one Redis server:
    every change reported committed is kept, one ring at the end."""
    setup = RedisSetup(network, sentinel=False, slow=(0.2, 0.05))
    for argv in (("add", "a:1"), ("add", "b:1"), ("weight", "a:1", "3"), ("remove", "b:1")):
        setup.change(*argv)
    committed = setup.history.committed()
    assert len(committed) >= 3, setup.history.attempts  # slow, not stopped
    assert [a.version for a in committed] == sorted(a.version for a in committed)
    setup.agree("the gateways agree over the slow links")
    setup.finish()
