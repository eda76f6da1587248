"""Running a gateway as a program: one process, or ``--workers N`` of them.

``chash gateway`` parses its arguments into a ``Plan`` (the settings, the
backends, how to build the ring and what feeds it) and hands it here:
``run`` serves it in this process until SIGINT/SIGTERM or its duration;
``supervise`` forks N worker processes that accept on one port
(SO_REUSEPORT), each of which builds its own gateway from the plan
(``build``), and watches them.  Worker 0 leads and the others follow
(``chash.gateway.workers``): one health verdict, one metrics view.

Nothing here reads a command line: the plan is built, and checked, by the
caller.  A plan built from a configuration file can read it again
(``Plan.reread``): SIGHUP (to the one process, or to the parent, which
sends it on to every worker) and ``POST /-/reload`` make each process's
``Reloader`` reread it and apply what changed to its gateway
(``Gateway.reconfigure``), or change nothing and say why.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from chash._optional import require
from chash.gateway.config import GatewayConfig
from chash.gateway.reload import ReloadError, ReloadOutcome, ring_changes
from chash.gateway.session_tickets import new_ticket_keys
from chash.gateway.worker_loads import WorkerLoads

if TYPE_CHECKING:
    from chash.gateway.server import Gateway
    from chash.gateway.workers import Follower, Leader
    from chash.routers import MutableRouter

__all__ = ["Feeds", "Plan", "Reloader", "StartRefused", "banner", "build", "run", "run_loop",
           "serve", "supervise"]

logger = logging.getLogger("chash.gateway")


class StartRefused(Exception):
    """The store of the shared ring refused this gateway at start (its
    user, password or permissions), or holds the ring with other shared
    router settings: the gateway exits saying so."""


class _Driver(Protocol):
    """What ``Feeds`` needs of a shared ring's sync driver
    (``chash.membership.RedisMembership``, ``EtcdMembership``)."""

    @property
    def name(self) -> str: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def is_refusal(self, exc: BaseException) -> bool: ...


class _Started(Protocol):
    def start(self) -> None: ...

    def stop(self) -> None: ...


class Feeds:
    """The shared ring and the record set a gateway follows, started and
    stopped as one (``serve()``'s ``membership``): the membership first, so
    that the discovery writes into a synced ring, and stopped last."""

    def __init__(self, membership: _Driver | None, discovery: _Started | None) -> None:
        """``membership``: the shared ring's sync driver, or None;
        ``discovery``: what follows a record set into it, or None."""
        self.membership = membership
        self.discovery = discovery

    def start(self) -> None:
        """Start both; StartRefused if the store refuses this gateway."""
        membership = self.membership
        if membership is not None:
            try:
                membership.start()
            except Exception as exc:
                if isinstance(exc, ValueError) or membership.is_refusal(exc):
                    raise StartRefused(
                        f"cannot join the shared ring {membership.name!r}: {exc}") from exc
                raise
        if self.discovery is not None:
            self.discovery.start()

    def stop(self) -> None:
        """Stop both, the discovery first."""
        if self.discovery is not None:
            self.discovery.stop()
        if self.membership is not None:
            self.membership.stop()


def _no_feeds(router: MutableRouter) -> Feeds | None:
    return None


@dataclass(frozen=True)
class Plan:
    """A gateway program, built and checked: what every process of it
    builds its ``Gateway`` from (``build``)."""

    config: GatewayConfig
    """The settings as one process runs them (with ``--workers N``,
    worker 0 alone probes and ramps, and serves ``admin_listen`` over
    every worker)."""
    backends: dict[str, str]
    """``{node: host:port}``."""
    router: Callable[[], MutableRouter]
    """A new ring (each worker builds its own after the fork)."""
    zones: dict[str, str] = field(default_factory=dict)
    """``{node: zone}``."""
    feeds: Callable[[MutableRouter], Feeds | None] = _no_feeds
    """What feeds the ring built (a shared ring, a record set), or None."""
    listen: tuple[str, int] = ("127.0.0.1", 8080)
    duration: float | None = None
    """Seconds to run (None: until SIGINT/SIGTERM)."""
    workers: int = 1
    log_level: str = "info"
    weights: dict[str, float] = field(default_factory=dict)
    """``{node: weight}`` the ring was built with (1 where not given)."""
    digest: str = ""
    """The digest of the configuration the plan was built from (``sha256:``
    and the hex SHA-256 of its canonical text)."""
    source: str | None = None
    """The configuration file the plan was read from, or None."""
    reread: Callable[[], Plan] | None = None
    """The plan the configuration gives now (the file read again, flags
    and variables still over it); ``ReloadError`` if it does not validate
    or changes a setting a running gateway cannot take.  None: nothing
    to reread."""


class Reloader:
    """Reloads one process's gateway from its plan's configuration: SIGHUP
    and ``POST /-/reload`` call ``reload()``; the status page shows
    ``status()``.  A reload either applies all it changes, in one step
    (``Gateway.reconfigure``), or nothing."""

    def __init__(self, plan: Plan, gateway: Gateway,
                 adapt: Callable[[GatewayConfig], GatewayConfig] | None = None) -> None:
        """``adapt``: what this process makes of a plan's settings (a
        worker of ``--workers N``: its own health checks and admin
        listener, see ``build``); by default the settings as they are."""
        self._plan = plan
        self._gateway = gateway
        self._adapt = adapt if adapt is not None else (lambda config: config)
        self._reloads = 0
        self._last: ReloadOutcome | None = None

    @property
    def digest(self) -> str:
        """The digest of the configuration running now."""
        return self._plan.digest

    @property
    def plan(self) -> Plan:
        """The plan running now (the last one applied)."""
        return self._plan

    def reload(self) -> ReloadOutcome:
        """Reread the configuration and apply it; the outcome, logged."""
        plan, now = self._plan, time.time()
        outcome: ReloadOutcome
        if plan.reread is None:
            outcome = ReloadOutcome(False, plan.digest, now, "no configuration file to reread "
                                    "(the gateway was started without --config FILE)")
        else:
            try:
                new = plan.reread()
                changes = ring_changes(plan.backends, new.backends, plan.weights, new.weights,
                                       plan.zones, new.zones)
                settings = self._gateway.reconfigure(self._adapt(new.config), changes)
            except ReloadError as exc:
                outcome = ReloadOutcome(False, plan.digest, now, str(exc), exc.refused,
                                        invalid=not exc.refused)
            else:
                self._plan = new
                self._reloads += 1
                outcome = ReloadOutcome(True, new.digest, now, changes=changes,
                                        settings=settings)
        self._last = outcome
        if outcome.ok:
            logger.info("configuration reloaded from %s (%s): %s", plan.source, outcome.digest,
                        outcome.changes.as_json() | {"settings": list(outcome.settings)})
        else:
            logger.error("reload refused, nothing changed: %s", outcome.error)
        return outcome

    def status(self) -> dict[str, Any]:
        """The configuration's file, digest, reloads applied and the last
        reload's outcome (None before the first)."""
        return {"file": self._plan.source, "digest": self._plan.digest,
                "reloads": self._reloads,
                "last_reload": None if self._last is None else self._last.as_json()}


def build(plan: Plan, worker: int = 0,
          links: list[tuple[socket.socket, socket.socket]] | None = None,
          ticket_keys: bytes | None = None, loads: WorkerLoads | None = None,
          ) -> tuple[Gateway, Feeds | None, Leader | Follower | None]:
    """The gateway of one process, what feeds its ring (or None), and its
    part in ``--workers N`` (None for a single process, ``links`` None).
    ``links``: the socket pairs between worker 0 and each other worker;
    ``ticket_keys``: the TLS session ticket keys the workers share;
    ``loads``: the table of loads they share (``--affinity prefix``), whose
    row ``worker`` this process takes (zeroed)."""
    from chash.gateway.server import Gateway

    router = plan.router()
    feeds = plan.feeds(router)
    membership = None if feeds is None else feeds.membership
    config = plan.config
    role: Leader | Follower | None = None
    verdicts: Any = membership  # where worker 0's checker applies its verdicts
    counters = reports = ramp = None
    # Slow start ramps this process's ring, or with --workers N worker 0's,
    # which sends each weight to the other workers (they ramp nothing).
    slow_start = config.slow_start
    if links is not None:
        from chash.gateway.workers import Follower, Leader

        if worker == 0:
            role = Leader(router, [ours for ours, _ in links], share_verdicts=membership is None,
                          admin_listen=config.admin_listen)
            counters = role.counters
            if membership is None:
                verdicts = role
            if slow_start:
                from chash.gateway.slow_start import WeightRamp

                ramp = WeightRamp(router, slow_start, apply=role.set_weight)
        else:
            slow_start = 0.0
            role = Follower(router, links[worker - 1][1])
            if membership is None:  # worker 0 alone probes; failures go to it
                reports = role
        probes = config.health and (worker == 0 or membership is not None)

        def adapt(config: GatewayConfig) -> GatewayConfig:
            return config.replace(health=probes, admin_listen=None, slow_start=slow_start)
    else:
        def adapt(config: GatewayConfig) -> GatewayConfig:
            return config
    gateway = Gateway(plan.backends, adapt(config), router=router, zones=plan.zones,
                      membership=verdicts, counters=counters, health_reports=reports, ramp=ramp,
                      tls_ticket_keys=ticket_keys,
                      worker_loads=None if loads is None else loads.row(worker))
    gateway.reloads = Reloader(plan, gateway, adapt)
    # A record set written into the ring itself (not through a shared
    # ring's store, whose new versions the gateway hears of on its own).
    listen = getattr(None if feeds is None or membership is not None else feeds.discovery,
                     "add_listener", None)
    if callable(listen):
        listen(gateway.ring_changed)
    return gateway, feeds, role


def run_loop(main: Coroutine[Any, Any, None]) -> None:
    """Run ``main`` on uvloop when it is installed, else on asyncio's loop.

    uvloop only makes the gateway faster: without it the gateway runs all
    the same, and says nothing."""
    try:
        uvloop = require("uvloop", user="chash gateway", extra="gateway")
    except ImportError:  # not installed, or installed but not importable here
        asyncio.run(main)
        return
    uvloop.run(main)


def banner(gateway: Gateway, workers: int, leader: Leader | None = None) -> str:
    """What the program prints once it listens."""
    nodes = ", ".join(f"{node}={address}" if node != address else node
                      for node, address in gateway.addresses.items())
    url = gateway.url
    shown: Gateway | Leader = gateway if leader is None else leader  # who serves the admin
    admin = shown.admin_url
    lines = [f"chash gateway listening on {url}"
             + (f" ({workers} worker processes)" if workers > 1 else ""),
             f"  key {gateway.key_rule}; backends {nodes}"]
    if admin is None:
        lines.append("  no admin listener (status page and metrics: --admin-listen HOST:PORT)")
    else:
        lines.append(f"  status {admin}{gateway.status_path}, "
                     + (f"metrics {admin}{gateway.metrics_path}" if shown.registry is not None
                        else str(shown.metrics_off)))
    return "\n".join(lines)


async def serve(gateway: Gateway, host: str, port: int, duration: float | None = None, *,
                reuse_port: bool = False, ready: Callable[[Gateway], None] | None = None,
                membership: Any = None, role: Leader | Follower | None = None) -> None:
    """Run ``gateway`` on ``host:port`` until SIGINT/SIGTERM or ``duration``
    seconds.  ``ready(gateway)`` is called once it listens (by default: print
    where).  ``membership``, if given, is started first and stopped last;
    ``role``, a worker's part in ``--workers N``, starts once the gateway
    listens and stops before it."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    handled = []
    def reload() -> None:
        if gateway.reloads is None:
            logger.warning("SIGHUP: nothing to reload")
        else:
            gateway.reloads.reload()  # logs its outcome

    for signum, handler in ((signal.SIGINT, stop.set), (signal.SIGTERM, stop.set),
                            (signal.SIGHUP, reload)):
        try:
            loop.add_signal_handler(signum, handler)
            handled.append(signum)
        except (NotImplementedError, RuntimeError, AttributeError):  # not the main thread,
            pass                                                     # or Windows
    try:
        if membership is not None:
            await asyncio.to_thread(membership.start)
        try:
            await gateway.start(host, port, reuse_port=reuse_port)
            try:
                if role is not None:
                    await role.start(gateway)
                if ready is None:
                    print(banner(gateway, 1), flush=True)
                else:
                    ready(gateway)
                # Everything built so far (modules, the ring, the app) lives
                # as long as the process: kept out of the cyclic collector,
                # whose full collections would otherwise scan all of it
                # while requests wait (a tail-latency cost).
                gc.freeze()
                try:
                    await asyncio.wait_for(stop.wait(), duration)
                except TimeoutError:
                    pass
                finally:
                    gc.unfreeze()
                if ready is None:
                    print("chash gateway stopping", flush=True)
            finally:
                if role is not None:
                    await role.stop()
                await gateway.stop()
        finally:
            if membership is not None:
                await asyncio.to_thread(membership.stop)
    finally:
        for signum in handled:
            loop.remove_signal_handler(signum)


def run(plan: Plan, built: tuple[Gateway, Feeds | None, object] | None = None) -> int:
    """Serve ``plan`` in this process (``plan.workers`` is not read), with
    what ``build(plan)`` gave if ``built``; the exit status: 0, or 1 after
    saying why on stderr."""
    try:
        gateway, feeds, _ = build(plan) if built is None else built
    except ImportError as exc:
        print(f"chash gateway: {exc}", file=sys.stderr)
        return 1
    host, port = plan.listen
    try:
        run_loop(serve(gateway, host, port, plan.duration, membership=feeds))
    except StartRefused as exc:
        print(f"chash gateway: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"chash gateway: cannot listen on {host}:{port}: {exc.strerror or exc}",
              file=sys.stderr)
        return 1
    return 0


def _worker(plan: Plan, index: int, pipe: Any,
            links: list[tuple[socket.socket, socket.socket]], ticket_keys: bytes,
            loads: WorkerLoads | None) -> None:
    """One worker process of ``--workers N``: serve until SIGTERM."""
    # The parent's handler (send SIGHUP on to every worker) is not this
    # process's: until serve() reloads on it, a SIGHUP is ignored.
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    logging.basicConfig(level=getattr(logging, plan.log_level.upper()), stream=sys.stderr,
                        format=f"%(asctime)s worker {index} %(name)s %(levelname)s %(message)s")
    for number, (ours, theirs) in enumerate(links, start=1):  # keep only this worker's ends
        if index != 0:
            ours.close()
        if index != number:
            theirs.close()
    try:
        gateway, feeds, role = build(plan, index, links, ticket_keys, loads)
        host, port = plan.listen

        from chash.gateway.workers import Leader

        def ready(gateway: Gateway) -> None:
            leader = role if isinstance(role, Leader) else None
            pipe.send(("ready", banner(gateway, plan.workers, leader)))

        run_loop(serve(gateway, host, port, None, reuse_port=True, ready=ready,
                       membership=feeds, role=role))
    except (ImportError, OSError, ValueError, StartRefused) as exc:
        pipe.send(("error", str(getattr(exc, "strerror", None) or exc)))
        sys.exit(1)


def supervise(plan: Plan) -> int:
    """Run ``plan.workers`` processes on one port (SO_REUSEPORT) until
    SIGINT/SIGTERM or ``plan.duration``; the exit status (1 when a worker
    did not start, or exited)."""
    host, port = plan.listen
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    reserve = socket.socket(family, socket.SOCK_STREAM)
    reserve.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        reserve.bind((host, port))  # holds the port (not listening) until all listen
    except OSError as exc:
        reserve.close()
        print(f"chash gateway: cannot listen on {host}:{port}: {exc.strerror or exc}",
              file=sys.stderr)
        return 1
    plan = dataclasses.replace(plan, listen=(host, reserve.getsockname()[1]))
    context = multiprocessing.get_context("fork")
    stopping = []
    workers: list[multiprocessing.context.ForkProcess] = []

    def send_on(signum: int, frame: object) -> None:
        """SIGHUP: every worker rereads the configuration itself."""
        for process in workers:
            if process.pid is not None and process.is_alive():
                os.kill(process.pid, signal.SIGHUP)

    previous = {signum: signal.signal(signum, lambda s, f: stopping.append(s))
                for signum in (signal.SIGINT, signal.SIGTERM)}
    previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, send_on)
    # Worker 0 talks with each other worker over a socket pair of its own
    # (chash.gateway.workers): one health verdict, one metrics view.
    links = [socket.socketpair() for _ in range(plan.workers - 1)]
    # One set of TLS session ticket keys for every worker: a client resumes
    # its session on whichever worker takes its next connection.
    ticket_keys = new_ticket_keys()
    # Completions routed by prompt: on every worker's loads, through a
    # table in memory each worker inherits (chash.gateway.worker_loads).
    loads = WorkerLoads(plan.workers) if plan.config.affinity is not None else None
    try:
        pipes = []
        for index in range(plan.workers):
            ours, theirs = context.Pipe()
            process = context.Process(target=_worker, name=f"chash-gateway-{index}",
                                      args=(plan, index, theirs, links, ticket_keys, loads))
            process.start()
            workers.append(process)
            pipes.append(ours)
        for pair in links:
            for end in pair:
                end.close()
        banners = []
        for ours in pipes:
            if not ours.poll(60):
                print("chash gateway: a worker did not start within 60 s", file=sys.stderr)
                return 1
            kind, text = ours.recv()
            if kind == "error":
                print(f"chash gateway: {text}", file=sys.stderr)
                return 1
            banners.append(text)
        reserve.close()
        print(banners[0], flush=True)  # worker 0 serves the admin listener
        deadline = None if plan.duration is None else time.monotonic() + plan.duration
        while not stopping:
            if any(not p.is_alive() for p in workers):
                print("chash gateway: a worker process exited; stopping", file=sys.stderr)
                return 1
            if deadline is not None and time.monotonic() >= deadline:
                break
            multiprocessing.connection.wait([p.sentinel for p in workers], timeout=0.2)
        print("chash gateway stopping", flush=True)
        return 0
    finally:
        reserve.close()
        for pair in links:
            for end in pair:
                end.close()
        for process in workers:
            if process.is_alive():
                process.terminate()
        for process in workers:
            process.join(15)
            if process.is_alive():
                process.kill()
                process.join()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
