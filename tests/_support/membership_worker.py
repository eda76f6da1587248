"""One gateway instance in its own process, driven by the membership tests.

Runs a ``RedisMembership`` over a fresh router and a thread that routes keys
through that router without pause, counting lookups and failures (an
exception, or no node while the ring has nodes).  Reads one JSON command
per line on stdin and answers one JSON object per line on stdout:

``{"op": "status"}``                 fingerprint, version, epoch, connected,
                                     weights, lookups, failures
``{"op": "add", "node", "weight"}``  and ``remove``, ``disable``,
                                     ``enable``, ``mark_down``, ``mark_up``,
                                     ``flush``
``{"op": "burst", "prefix", "count", "at"}``  at wall time ``at``, add
                                     nodes prefix0..prefix{count-1}, then
                                     reweigh each to 2.0; answers
                                     ``{"errors": [...]}``
``{"op": "quit"}``                   stop and exit

Usage: python membership_worker.py PORT NAME REPORTER [QUORUM]
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from chash import ConsistentHashRouter
from chash.membership import RedisMembership

RESYNC_INTERVAL = 0.2
VOTE_TTL = 3.0


class Lookups(threading.Thread):
    """Routes keys through the router until stopped."""

    def __init__(self, router: ConsistentHashRouter) -> None:
        super().__init__(name="lookups", daemon=True)
        self.router = router
        self.count = 0
        self.failures: list[str] = []
        self.done = threading.Event()

    def run(self) -> None:
        i = 0
        while not self.done.is_set():
            key = f"user:{i % 10_000}"
            try:
                nonempty = len(self.router) > 0
                node = self.router.get_target_node(key)
                if node is None and nonempty and len(self.router) > 0:
                    self.failures.append(f"no node for {key}")
            except Exception as exc:  # any exception is a failure to report
                self.failures.append(f"{type(exc).__name__}: {exc}")
            self.count += 1
            i += 1
            if i % 500 == 0:
                time.sleep(0.001)  # leave the CPU to the membership threads


def burst(membership: RedisMembership, prefix: str, count: int, at: float) -> list[str]:
    """Add ``count`` nodes and reweigh each, starting at wall time ``at``."""
    time.sleep(max(0.0, at - time.time()))
    errors = []
    for i in range(count):
        try:
            membership.add_node(f"{prefix}{i}", 1.0)
        except Exception as exc:
            errors.append(f"add {prefix}{i}: {type(exc).__name__}: {exc}")
    for i in range(count):
        try:
            membership.add_node(f"{prefix}{i}", 2.0)
        except Exception as exc:
            errors.append(f"reweigh {prefix}{i}: {type(exc).__name__}: {exc}")
    return errors


def handle(membership: RedisMembership, lookups: Lookups, command: dict[str, Any]) -> Any:
    """Run one command; return the JSON-able answer."""
    op = command["op"]
    router = membership.router
    if op == "status":
        state = membership.state
        return {"fingerprint": router.fingerprint(), "version": membership.version,
                "epoch": None if state is None else state.epoch,
                "connected": membership.connected, "weights": router.weights,
                "lookups": lookups.count, "failures": lookups.failures[:10]}
    if op == "add":
        membership.add_node(command["node"], command.get("weight", 1.0))
    elif op == "remove":
        membership.remove_node(command["node"])
    elif op == "disable":
        membership.disable_node(command["node"], command.get("reason", "maintenance"))
    elif op == "enable":
        membership.enable_node(command["node"])
    elif op == "mark_down":
        membership.mark_down(command["node"], command.get("reason", "failing"))
    elif op == "mark_up":
        membership.mark_up(command["node"])
    elif op == "flush":
        membership.flush()
    elif op == "burst":
        return {"errors": burst(membership, command["prefix"], command["count"], command["at"])}
    else:
        raise ValueError(f"unknown op {op!r}")
    return {"ok": True}


def main(argv: list[str]) -> int:
    """Serve commands until "quit" or the end of stdin."""
    port, name, reporter = int(argv[1]), argv[2], argv[3]
    quorum: str | int = argv[4] if len(argv) > 4 else "majority"
    if isinstance(quorum, str) and quorum.isdigit():
        quorum = int(quorum)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format=f"{reporter} %(threadName)s %(levelname)s %(message)s")
    client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=2.0,
                         socket_connect_timeout=1.0, retry=Retry(NoBackoff(), 1))
    router = ConsistentHashRouter()
    membership = RedisMembership(router, client, name, quorum=quorum, vote_ttl=VOTE_TTL,
                                 resync_interval=RESYNC_INTERVAL, reporter=reporter)
    lookups = Lookups(router)
    membership.start()
    lookups.start()
    try:
        print(json.dumps({"ready": True}), flush=True)
        for line in sys.stdin:
            command = json.loads(line)
            if command["op"] == "quit":
                break
            try:
                answer = handle(membership, lookups, command)
            except Exception as exc:
                answer = {"error": f"{type(exc).__name__}: {exc}"}
            print(json.dumps(answer), flush=True)
    finally:
        lookups.done.set()
        lookups.join()
        membership.stop()
        client.close()
    print(json.dumps({"bye": True, "failures": lookups.failures[:10]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
