"""The harness itself (tests/_support/netns.py): hosts reach each other
over the switch and nothing else, cuts and isolation drop what they should
and no more, and closing removes everything even after a failure."""
from __future__ import annotations

import sys

import pytest

from _support.netns import Network, leftovers, require_netns

#: Connect from inside a host to ADDRESS:PORT within a second; prints ok or
#: the error's name.
CONNECT = ("import socket, sys\n"
           "try:\n"
           "    socket.create_connection((sys.argv[1], int(sys.argv[2])), 1).close()\n"
           "    print('ok')\n"
           "except OSError as exc:\n"
           "    print(type(exc).__name__)\n")
LISTEN = ("import socket, sys, time\n"
          "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
          "s.bind((sys.argv[1], 7000)); s.listen(16)\n"
          "while True:\n"
          "    s.accept()[0].close()\n")


def reach(network: Network, source: str, target: str) -> str:
    host = network.hosts[target]
    done = network.hosts[source].run([sys.executable, "-c", CONNECT, host.address, "7000"])
    return done.stdout.strip() or done.stderr.strip()


def test_cuts_and_isolation_between_hosts(network: Network) -> None:
    for name in ("a", "b", "c"):
        host = network.host(name)
        host.spawn([sys.executable, "-c", LISTEN, host.address])
    from _support.waiting import wait_until

    wait_until(lambda: reach(network, "a", "b") == "ok" and reach(network, "a", "c") == "ok",
               "the hosts reach each other", timeout=20)
    network.cut(network.hosts["a"], network.hosts["b"])
    assert reach(network, "a", "b") != "ok" and reach(network, "b", "a") != "ok"
    assert reach(network, "a", "c") == "ok" and reach(network, "b", "c") == "ok"
    network.isolate(network.hosts["c"])
    assert reach(network, "a", "c") != "ok" and reach(network, "c", "b") != "ok"
    network.heal()
    assert {reach(network, x, y) for x, y in (("a", "b"), ("b", "a"), ("a", "c"),
                                              ("c", "b"))} == {"ok"}


def test_closing_removes_everything_whatever_failed() -> None:
    require_netns()
    network = Network()
    names: list[str] = []
    with pytest.raises(RuntimeError, match="midway"):
        try:
            host = network.host("a")
            process = host.spawn([sys.executable, "-c", "import time; time.sleep(600)"])
            raise RuntimeError("a scenario failing midway")
        finally:
            names = network.namespaces()
            network.close()
    assert len(names) == 2  # the host and the switch
    assert network.namespaces() == [] and process.poll() is not None
    assert not leftovers()
