"""The suite's test-server ports (tests/_support/ports.py): given from below
the ephemeral range, free, and claimed across processes, so two suites run
side by side are never handed one port."""
from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from _support import ports

TESTS = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(not ports._range_is_ours(),
                                reason="the ephemeral port range covers the suite's: ports come from the OS")


def test_a_port_is_free_outside_the_ephemeral_range_and_claimed() -> None:
    port = ports.free_port()
    low, high = ports._ephemeral_range()
    assert ports.FIRST_PORT <= port < ports.END_PORT and not low <= port <= high
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))  # free
    assert not ports.claim_port(port)  # held by this process's claim


def test_distinct_ports_and_a_bus_port_beside_one() -> None:
    many = ports.free_ports(20)
    assert len(set(many)) == 20
    port = ports.free_port(also=10000)
    assert not ports.claim_port(port + 10000)
    assert port + 10000 < ports._ephemeral_range()[0]


def test_another_process_is_never_given_a_claimed_port() -> None:
    mine = ports.free_ports(50)
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from _support import ports; "
            "print(*ports.free_ports(200)); print(*[p for p in map(int, sys.argv[2:]) if ports.claim_port(p)])")
    out = subprocess.run([sys.executable, "-c", code, str(TESTS), *map(str, mine)], capture_output=True,
                         text=True, check=True, timeout=60).stdout.splitlines()
    theirs, stolen = set(map(int, out[0].split())), out[1].split() if len(out) > 1 else []
    assert len(theirs) == 200 and not theirs & set(mine) and stolen == []
