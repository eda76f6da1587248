"""vLLM production-stack's SessionRouter on chash.compat.uhashring: its
exact calls, against uhashring 2.5 here and uhashring 2.3 (the version
production-stack pins) in a venv of its own.

``SessionRouterCalls`` reproduces what production-stack's
``vllm_router/routers/routing_logic.py`` does with its ring, call for call:
``HashRing()`` when the router is made; on every request
``_update_hash_ring`` (the ring's ``get_nodes()`` as a set, ``remove_node``
for each node gone from the discovered engine URLs, ``add_node`` for each
new one, in set order) and then ``get_node(session_id)``.  The router
itself is not imported: it needs FastAPI, its service discovery and stats
modules and a network to fetch it, and the tests run with PyPI as their
only network; these are the only calls it makes on the ring.

The scenario: engines scaled up one by one, one dying and coming back, one
replaced by a new URL, the fleet scaled down, 3,000 sessions routed after
each change.  The calls are logged and replayed on uhashring 2.3 in the
venv, so both see the same calls in the same order.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path
from typing import Any

import pytest
import uhashring

from _support.ci import missing
from chash.compat.uhashring import HashRing


class SessionRouterCalls:
    """The ring calls of production-stack's SessionRouter, logged."""

    def __init__(self, ring_class: Any) -> None:
        self.hash_ring = ring_class()
        self.log: list[list[Any]] = []

    def _update_hash_ring(self, endpoint_urls: list[str]) -> None:
        current_nodes = set(self.hash_ring.get_nodes())
        new_nodes = set(endpoint_urls)
        for node in current_nodes - new_nodes:
            self.hash_ring.remove_node(node)
            self.log.append(["remove", node])
        for node in new_nodes - current_nodes:
            self.hash_ring.add_node(node)
            self.log.append(["add", node])

    def route_request(self, endpoint_urls: list[str], session_id: str) -> str:
        self._update_hash_ring(endpoint_urls)
        url: str = self.hash_ring.get_node(session_id)
        return url


def fleets() -> list[list[str]]:
    urls = [f"http://10.0.{i}.7:8000" for i in range(8)]
    steps = [urls[:n] for n in range(1, 9)]
    steps.append(urls[:3] + urls[4:])                                  # engine 3 dies
    steps.append(urls)                                                 # and comes back
    steps.append([*urls[:5], "http://10.0.5.9:8000", *urls[6:]])       # engine 5 gets a new address
    steps += [urls[:4], urls[:2], urls[:1]]                            # scaled down
    return steps


SESSIONS = [f"session-{i:05d}" for i in range(3_000)]


def run(ring_class: Any) -> tuple[list[list[Any]], list[list[str]]]:
    router = SessionRouterCalls(ring_class)
    routes = []
    for fleet in fleets():
        routes.append([router.route_request(fleet, session) for session in SESSIONS])
    return router.log, routes


def test_session_router_routes_every_session_as_uhashring_25() -> None:
    ours_log, ours = run(HashRing)
    theirs_log, theirs = run(uhashring.HashRing)
    assert ours_log == theirs_log
    assert ours == theirs
    assert sum(map(len, ours)) == len(fleets()) * len(SESSIONS)
    # Sessions stay put on engines that stay: engine 3's return moves only
    # the sessions it owns back to it.
    before, after = ours[8], ours[9]
    assert all(b == a for b, a in zip(before, after, strict=True) if a != "http://10.0.3.7:8000")


REPLAY = '''import json, sys
import uhashring
assert uhashring.__version__ == "2.3", uhashring.__version__
calls, sessions = json.load(sys.stdin)
ring = uhashring.HashRing()
routes = []
for op, arg in calls:
    if op == "add":
        ring.add_node(arg)
    elif op == "remove":
        ring.remove_node(arg)
    else:
        routes.append([ring.get_node(s) for s in sessions])
json.dump(routes, sys.stdout)
'''


@pytest.fixture(scope="module")
def venv_23(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("uhashring-23")
    venv.create(root / "venv", with_pip=False)
    python = root / "venv" / "bin" / "python"
    # The parent's pip installs into the venv's site-packages: no index
    # other than PyPI, no dependency (uhashring has none).
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    install = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                              "--no-deps", "--target", site, "uhashring==2.3"],
                             capture_output=True, text=True, timeout=300, check=False)
    if install.returncode != 0:
        missing(f"pip could not install uhashring==2.3 from PyPI: {install.stderr[-500:]}")
    return python


def test_session_router_routes_every_session_as_uhashring_23(venv_23: Path) -> None:
    router = SessionRouterCalls(HashRing)
    calls: list[list[Any]] = []
    ours = []
    for fleet in fleets():
        start = len(router.log)
        ours.append([router.route_request(fleet, session) for session in SESSIONS])
        calls += [*router.log[start:], ["route", None]]
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "PYTHONHOME")}
    replay = subprocess.run([str(venv_23), "-c", REPLAY], input=json.dumps([calls, SESSIONS]),
                            capture_output=True, text=True, timeout=300, check=False, env=env)
    assert replay.returncode == 0, replay.stderr[-2000:]
    theirs = json.loads(replay.stdout)
    assert len(theirs) == len(ours) == len(fleets())
    assert ours == theirs
