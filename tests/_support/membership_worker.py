"""One gateway instance in its own process, driven by the membership tests.

Runs a ``RedisMembership`` (or, with ``--driver async``, an
``AsyncRedisMembership`` on an event loop thread) over a fresh router and a
thread that routes keys through that router without pause, counting
lookups and failures (an exception, or no node while the ring has nodes).
Reads one JSON command per line on stdin and answers one JSON object per
line on stdout:

``{"op": "status"}``                 fingerprint, version, epoch, connected,
                                     weights, stale_seconds, stale_since,
                                     lookups, failures, applied_at (the
                                     wall time the state held was first
                                     seen by the lookups, to a few ms)
``{"op": "add", "node", "weight"}``  and ``remove``, ``disable``,
                                     ``enable`` (each with ``force``),
                                     ``mark_down``, ``mark_up``, ``flush``,
                                     ``refresh``
``{"op": "burst", "prefix", "count", "at"}``  at wall time ``at``, add
                                     nodes prefix0..prefix{count-1}, then
                                     reweigh each to 2.0; answers
                                     ``{"errors": [...]}``
``{"op": "when", "fingerprint", "node", "weight", "epoch_not",
"connected", "deadline", "interval"}``
                                     wait until every condition given
                                     holds (polling every ``interval``
                                     seconds, default 0.001);
                                     answers ``{"at": wall time, "ok"}``
``{"op": "quit"}``                   stop and exit

The first line is ``{"ready": true}`` once ``start()`` returned, or
``{"start_error": "..."}`` if it raised.

Usage: python membership_worker.py PORT NAME REPORTER [options]; see
``--help``.  With ``--etcd URLS`` the membership is an ``EtcdMembership``
(``AsyncEtcdMembership``) of those endpoints instead.
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import json
import logging
import signal
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.asyncio.sentinel
import redis.cluster
import redis.sentinel
from redis.backoff import NoBackoff

from chash import ConsistentHashRouter
from chash.membership import AsyncEtcdMembership, AsyncRedisMembership, EtcdMembership, RedisMembership

RESYNC_INTERVAL = 0.2
VOTE_TTL = 3.0


class Lookups(threading.Thread):
    """Routes keys through the router until stopped."""

    def __init__(self, router: ConsistentHashRouter, calm: bool = False,
                 state: Callable[[], object] = lambda: None) -> None:
        super().__init__(name="lookups", daemon=True)
        self.router = router
        #: The membership's state, and the wall time it was first seen here.
        self.state = state
        self.held: object = state()
        self.applied_at = time.time()
        #: Pause 5 ms every 100 lookups instead of 1 ms every 500 (a few
        #: thousand a second: enough to notice an empty ring, and several
        #: processes leave the machine's cores to the stores).
        self.every, self.pause = (100, 0.005) if calm else (500, 0.001)
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
            if i % self.every == 0:
                held = self.state()
                if held is not self.held:
                    self.held, self.applied_at = held, time.time()
                time.sleep(self.pause)  # leave the CPU to the membership threads


class Instance:
    """The membership under test, whichever driver: every call is made
    synchronously from the command thread."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.router = ConsistentHashRouter()
        self.driver = args.driver
        self.loop: asyncio.AbstractEventLoop | None = None
        quorum: str | int = int(args.quorum) if args.quorum.isdigit() else args.quorum
        settings: dict[str, Any] = {"quorum": quorum, "vote_ttl": VOTE_TTL,
                                    "resync_interval": args.resync_interval,
                                    "reporter": args.reporter, "bootstrap": args.bootstrap}
        if self.driver == "async":
            self.loop = asyncio.new_event_loop()
            threading.Thread(target=self.loop.run_forever, name="loop", daemon=True).start()

            async def make() -> Any:
                if args.etcd:
                    return AsyncEtcdMembership(self.router, args.etcd, args.name,
                                               timeout=args.etcd_timeout, **settings)
                return AsyncRedisMembership(self.router, client_for(args, True), args.name,
                                            **settings)

            self.membership: Any = self._await(make())
        elif args.etcd:
            self.membership = EtcdMembership(self.router, args.etcd, args.name,
                                             timeout=args.etcd_timeout, **settings)
        else:
            self.membership = RedisMembership(self.router, client_for(args, False), args.name,
                                              **settings)

    def _await(self, coroutine: Awaitable[Any]) -> Any:
        assert self.loop is not None

        async def run() -> Any:
            return await coroutine

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(120)

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Call a membership method, awaiting it for the async driver."""
        result = getattr(self.membership, method)(*args, **kwargs)
        if self.driver == "async" and asyncio.iscoroutine(result):
            return self._await(result)
        return result

    def close(self) -> None:
        """Stop the membership and close its client."""
        self.call("stop")
        client = self.membership.client
        if self.driver == "async":
            self._await(client.aclose())
            assert self.loop is not None
            self.loop.call_soon_threadsafe(self.loop.stop)
        else:
            client.close()


def client_for(args: argparse.Namespace, use_asyncio: bool) -> Any:
    """The client the options ask for, failing fast (one retry, short timeouts)."""
    if use_asyncio:
        from redis.asyncio.retry import Retry as AsyncRetry
        retry: Any = AsyncRetry(NoBackoff(), 1)
    else:
        from redis.retry import Retry
        retry = Retry(NoBackoff(), 1)
    common: dict[str, Any] = {"socket_timeout": 2.0, "socket_connect_timeout": 1.0,
                              "username": args.username, "password": args.password}
    if args.sentinel:
        # PORT (on 127.0.0.1) or HOST:PORT (a host of the partition tests)
        addresses = [(host or "127.0.0.1", int(port)) for host, _, port in
                     (item.rpartition(":") for item in args.sentinel.split(","))]
        module: Any = redis.asyncio.sentinel if use_asyncio else redis.sentinel
        # The sentinels' own client retries as slowly as redis-py's default
        # unless told otherwise.
        sentinel = module.Sentinel(addresses, socket_timeout=1.0, socket_connect_timeout=1.0,
                                   sentinel_kwargs={"socket_timeout": 1.0, "retry": retry,
                                                    "socket_connect_timeout": 1.0})
        return sentinel.master_for(args.service, retry=retry, **common)
    if args.cluster:
        cluster: Any = redis.asyncio.cluster if use_asyncio else redis.cluster
        return cluster.RedisCluster(host="127.0.0.1", port=args.port, **common)
    client: Any = redis.asyncio.Redis if use_asyncio else redis.Redis
    return client(host=args.redis_host, port=args.port, retry=retry, **common)


def burst(instance: Instance, prefix: str, count: int, at: float) -> list[str]:
    """Add ``count`` nodes and reweigh each, starting at wall time ``at``."""
    time.sleep(max(0.0, at - time.time()))
    errors = []
    for i in range(count):
        try:
            instance.call("add_node", f"{prefix}{i}", 1.0)
        except Exception as exc:
            errors.append(f"add {prefix}{i}: {type(exc).__name__}: {exc}")
    for i in range(count):
        try:
            instance.call("add_node", f"{prefix}{i}", 2.0)
        except Exception as exc:
            errors.append(f"reweigh {prefix}{i}: {type(exc).__name__}: {exc}")
    return errors


def when(instance: Instance, command: dict[str, Any]) -> dict[str, Any]:
    """Wait until the router has a fingerprint (or gives ``node`` the
    ``weight``, None for absent), the state left an epoch, or ``connected``
    has a value, as asked; report the wall time."""
    end = time.monotonic() + command.get("deadline", 30.0)
    membership = instance.membership

    def holds() -> bool:
        state = membership.state
        return ("node" not in command  # cheap on large rings
                or instance.router.weights.get(command["node"]) == command["weight"]) \
            and ("fingerprint" not in command
                 or instance.router.fingerprint() == command["fingerprint"]) \
            and ("epoch_not" not in command
                 or (state is not None and state.epoch != command["epoch_not"])) \
            and ("connected" not in command or membership.connected == command["connected"])

    while not holds():
        if time.monotonic() > end:
            return {"at": time.time(), "ok": False}
        time.sleep(command.get("interval", 0.001))
    return {"at": time.time(), "ok": True}


OPERATIONS: dict[str, Callable[[Instance, dict[str, Any]], Any]] = {
    "add": lambda i, c: i.call("add_node", c["node"], c.get("weight", 1.0)),
    "remove": lambda i, c: i.call("remove_node", c["node"], force=c.get("force", False)),
    "disable": lambda i, c: i.call("disable_node", c["node"], c.get("reason", "maintenance"),
                                   force=c.get("force", False)),
    "enable": lambda i, c: i.call("enable_node", c["node"]),
    "mark_down": lambda i, c: i.call("mark_down", c["node"], c.get("reason", "failing")),
    "mark_up": lambda i, c: i.call("mark_up", c["node"]),
    "flush": lambda i, c: i.call("flush"),
    "refresh": lambda i, c: i.call("refresh"),
}


def handle(instance: Instance, lookups: Lookups, command: dict[str, Any]) -> Any:
    """Run one command; return the JSON-able answer."""
    op = command["op"]
    router = instance.router
    membership = instance.membership
    if op == "status":
        state = membership.state
        return {"fingerprint": router.fingerprint(), "version": membership.version,
                "epoch": None if state is None else state.epoch,
                "connected": membership.connected, "weights": router.weights,
                "stale_seconds": membership.stale_seconds,
                "stale_since": membership.stale_since,
                "lookups": lookups.count, "failures": lookups.failures[:10],
                "applied_at": lookups.applied_at}
    if op == "when":
        return when(instance, command)
    if op == "burst":
        return {"errors": burst(instance, command["prefix"], command["count"], command["at"])}
    if op not in OPERATIONS:
        raise ValueError(f"unknown op {op!r}")
    OPERATIONS[op](instance, command)
    return {"ok": True}


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("port", type=int)
    parser.add_argument("name")
    parser.add_argument("reporter")
    parser.add_argument("quorum", nargs="?", default="majority")
    parser.add_argument("--driver", choices=("sync", "async"), default="sync")
    parser.add_argument("--no-bootstrap", dest="bootstrap", action="store_false")
    parser.add_argument("--cluster", action="store_true", help="PORT is a cluster node")
    parser.add_argument("--redis-host", default="127.0.0.1",
                        help="the Redis server's address (PORT its port; default 127.0.0.1)")
    parser.add_argument("--calm", action="store_true",
                        help="route fewer keys a second (the partition tests run many processes)")
    parser.add_argument("--sentinel", help="comma-separated sentinel ports (or HOST:PORT)")
    parser.add_argument("--service", default="mymaster", help="the sentinel's service name")
    parser.add_argument("--username")
    parser.add_argument("--password")
    parser.add_argument("--resync-interval", type=float, default=RESYNC_INTERVAL,
                        help=f"the membership's resync interval (default {RESYNC_INTERVAL})")
    parser.add_argument("--etcd", help="share the ring through etcd at these comma-separated "
                                       "URLs instead (PORT is then unused)")
    parser.add_argument("--etcd-timeout", type=float, default=1.0,
                        help="seconds an etcd call may take (default 1)")
    return parser.parse_args(argv[1:])


def main(argv: list[str]) -> int:
    """Serve commands until "quit" or the end of stdin."""
    args = parse_args(argv)
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # stacks, to debug a hang
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format=f"%(created).3f {args.reporter} %(threadName)s %(levelname)s %(message)s")
    instance = Instance(args)
    lookups = Lookups(instance.router, calm=args.calm,
                      state=lambda: instance.membership.state)
    try:
        instance.call("start")
    except Exception as exc:
        print(json.dumps({"start_error": f"{type(exc).__name__}: {exc}"}), flush=True)
        instance.close()
        return 1
    lookups.start()
    try:
        print(json.dumps({"ready": True}), flush=True)
        for line in sys.stdin:
            command = json.loads(line)
            if command["op"] == "quit":
                break
            try:
                answer = handle(instance, lookups, command)
            except Exception as exc:
                answer = {"error": f"{type(exc).__name__}: {exc}"}
            print(json.dumps(answer), flush=True)
    finally:
        lookups.done.set()
        lookups.join()
        instance.close()
    print(json.dumps({"bye": True, "failures": lookups.failures[:10]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
