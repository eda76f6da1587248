"""One gateway out of N worker processes: one health verdict, one metrics view.

``chash gateway --workers N`` forks N processes that accept on one port.
Worker 0 leads: it alone probes the backends, and every verdict its
health checker reaches is sent at once to the other workers, which apply
it to their own ring, so that all workers take a node out and put it back
at the same moment.  The other workers follow: they forward the failures
their requests meet to the leader's checker (a success only after a
failure, so that the request path sends nothing while all is well), and
push their counters and loads to the leader a few times a second, so that
the leader's admin listener (``/metrics``, ``/-/status``) covers every
worker: summed, and per worker on the status page.

Slow start (``--slow-start``) is driven by the leader alone: its ramp sets
each weight on its own ring and sends it to the others
(``Leader.set_weight``).  Everything the leader changes in one turn of its
loop (the verdicts of a health round, the ramp's first step for a node
coming back) goes out as one numbered batch, which each other worker
applies in one go, so that no worker routes on half of it; each worker
reports the number of the last change it applied (``ring_changes``) beside
its ring's fingerprint, and one number always means one ring.

With a shared ring (``--redis``) every worker keeps its own checker voting
through the ring, as one instance among others; only the counters are
gathered here.

The processes talk over socket pairs made before the fork, with
length-prefixed pickled tuples: both ends are this program, in processes
forked from one parent, so nothing foreign is ever unpickled.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pickle
import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from chash.gateway.admin import make_registry, start_admin
from chash.gateway.tunnel import TunnelCounts, merge_tunnel_counts
from chash.health.membership import LocalMembership
from chash.metrics import OUTCOMES, CountersSnapshot, RouteCounters
from chash.weights import set_weight

if TYPE_CHECKING:
    from aiohttp import web

    from chash.gateway.config import GatewayConfig
    from chash.gateway.llm import PromptRoutes
    from chash.gateway.reload import ReloadOutcome, Reloads
    from chash.gateway.server import Gateway
    from chash.health import AsyncHealthChecker
    from chash.routers import MutableRouter

__all__ = ["Follower", "GroupCounters", "Leader", "WorkerReport", "merge_snapshots"]

logger = logging.getLogger("chash.gateway")

_SIZE = struct.Struct("!I")
#: Seconds between two pushes of a follower's counters (when they changed).
PUSH_INTERVAL = 0.2


class _Link:
    """Messages (tuples) both ways over one connected socket."""

    def __init__(self, sock: socket.socket, on_message: Callable[[tuple[Any, ...]], None]) -> None:
        self._sock = sock
        self._on_message = on_message
        self._writer: asyncio.StreamWriter | None = None
        self._task: asyncio.Task[None] | None = None

    async def open(self) -> None:
        reader, self._writer = await asyncio.open_unix_connection(sock=self._sock)
        self._task = asyncio.get_running_loop().create_task(self._read(reader))

    def send(self, message: tuple[Any, ...]) -> None:
        writer = self._writer
        if writer is None or writer.is_closing():
            return
        data = pickle.dumps(message, pickle.HIGHEST_PROTOCOL)
        writer.write(_SIZE.pack(len(data)) + data)

    async def _read(self, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                size, = _SIZE.unpack(await reader.readexactly(_SIZE.size))
                self._on_message(pickle.loads(await reader.readexactly(size)))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the other process is gone or stopping
        except Exception:
            logger.exception("worker link failed")

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.wait([task])
        writer, self._writer = self._writer, None
        if writer is not None:
            with contextlib.suppress(Exception):
                await writer.drain()
            writer.close()


@dataclass(frozen=True)
class WorkerReport:
    """What a worker last told of itself."""

    worker: int
    pid: int
    counters: CountersSnapshot
    loads: dict[str, int]
    fingerprint: str
    """The fingerprint of the worker's ring (``ConsistentHashRouter.fingerprint``)."""
    ring_changes: int = 0
    """The changes of the leader's (verdicts, weights) applied to that ring."""
    tunnels: TunnelCounts | None = None
    """The worker's WebSocket tunnels (open, opened, closed, bytes)."""
    config_digest: str = ""
    """The digest of the configuration the worker runs (``Plan.digest``,
    after its last reload)."""
    tls_certificate: str | None = None
    """The SHA-256 of the certificate the worker's TLS listener serves
    (None: plain HTTP)."""
    tls_handshake_failures: int = 0
    """The client handshakes that failed on the worker's listener."""


def merge_snapshots(snapshots: list[CountersSnapshot]) -> CountersSnapshot:
    """The sum of ``snapshots``, counter by counter."""
    lookups: dict[str, int] = {}
    ok: dict[str, int] = {}
    errors: dict[str, int] = {}
    requests = dict.fromkeys(OUTCOMES, 0)
    transitions: dict[tuple[str, str], int] = {}
    retries = 0
    for snap in snapshots:
        for total, part in ((lookups, snap.lookups), (ok, snap.upstream_ok),
                            (errors, snap.upstream_errors), (requests, snap.requests)):
            for key, count in part.items():
                total[key] = total.get(key, 0) + count
        for pair, count in snap.transitions.items():
            transitions[pair] = transitions.get(pair, 0) + count
        retries += snap.retries
    return CountersSnapshot(lookups=lookups, upstream_ok=ok, upstream_errors=errors,
                            requests=requests, retries=retries, transitions=transitions)


class GroupCounters(RouteCounters):
    """The leader's counters, whose snapshot adds what every other worker
    last reported: what ``/metrics`` and ``/-/status`` show."""

    def __init__(self, reports: Callable[[], list[WorkerReport]]) -> None:
        """Count like a ``RouteCounters``; ``reports()`` gives the other
        workers' last reports."""
        super().__init__()
        self._reports = reports

    def own(self) -> CountersSnapshot:
        """This process's counts alone."""
        return super().snapshot()

    def snapshot(self) -> CountersSnapshot:
        """Every worker's counts, summed."""
        return merge_snapshots([self.own(), *(r.counters for r in self._reports())])


class Leader:
    """Worker 0: the one health checker's membership, the other workers'
    reports, and the admin listener over them all.

    Give ``Leader.membership`` (the leader itself) and ``Leader.counters``
    to the ``Gateway`` of worker 0, then ``await start(gateway)``."""

    def __init__(self, router: MutableRouter, links: list[socket.socket], *,
                 share_verdicts: bool, admin_listen: tuple[str, int] | None = None) -> None:
        """``links``: one socket to each other worker, worker 1 first.
        ``share_verdicts``: send the checker's verdicts to the others (not
        with a shared ring, where every worker votes).  ``admin_listen``:
        where to serve the admin listener over every worker (None: not)."""
        self._admin_listen = admin_listen
        self._router = router
        self._local = LocalMembership(router)
        self._changes = 0
        self._outbox: list[tuple[Any, ...]] = []
        self._share = share_verdicts
        self._links = [_Link(sock, self._receiver(index))
                       for index, sock in enumerate(links, start=1)]
        self._reports: dict[int, WorkerReport] = {}
        self.counters = GroupCounters(lambda: [self._reports[i] for i in sorted(self._reports)])
        self._gateway: Gateway | None = None
        self._admin: web.AppRunner | None = None
        self._admin_bound: list[tuple[str, int]] = []
        self.registry: Any = None
        self.metrics_off: str | None = None

    # -- Membership, for worker 0's health checker --------------------------

    @property
    def membership(self) -> Leader:
        """The membership worker 0's health checker applies verdicts to."""
        return self

    def watched_nodes(self) -> dict[str, float]:
        """Every node of the ring, and those taken out."""
        return self._local.watched_nodes()

    def mark_down(self, node: str, reason: str) -> None:
        """Take ``node`` out of this worker's ring and of every other's."""
        self._local.mark_down(node, reason)
        if self._share:
            self._broadcast(("down", node, reason))

    def mark_up(self, node: str) -> None:
        """Put ``node`` back in this worker's ring and in every other's."""
        self._local.mark_up(node)
        if self._share:
            self._broadcast(("up", node))

    def forget(self, node: str) -> bool:
        """Stop serving and watching ``node`` in this worker (a reload
        removed it; each other worker removes it on its own reload)."""
        return self._local.forget(node)

    def reweigh(self, node: str, weight: float) -> bool:
        """The weight ``node``, taken out, comes back with in this worker (a
        reload changed it; each other worker changes it on its own reload)."""
        return self._local.reweigh(node, weight)

    def reload(self) -> ReloadOutcome | None:
        """``POST /-/reload`` on the admin listener: reload this worker,
        then, if that applied, tell every other worker to reload itself;
        None if this gateway is not reloaded."""
        reloads = None if self._gateway is None else self._gateway.reloads
        if reloads is None:
            return None
        outcome = reloads.reload()
        if outcome.ok:
            for link in self._links:
                link.send(("reload",))
        return outcome

    def set_weight(self, node: str, weight: float) -> None:
        """Give ``node`` this weight in this worker's ring and in every
        other's (the slow-start ramp's ``apply``); nothing for a node not
        in the ring."""
        if node not in self._router:
            return
        set_weight(self._router, node, weight)
        self._broadcast(("weight", node, weight))

    @property
    def ring_changes(self) -> int:
        """The changes made to the rings so far (sent, or about to be)."""
        return self._changes

    def _broadcast(self, message: tuple[Any, ...]) -> None:
        """Queue ``message`` for the other workers; what is queued in one
        turn of the loop is sent as one batch at the end of it."""
        self._changes += 1
        self._outbox.append(message)
        if len(self._outbox) > 1:
            return  # a flush is due already
        try:
            asyncio.get_running_loop().call_soon(self._flush)
        except RuntimeError:  # called outside the loop: at once
            self._flush()

    def _flush(self) -> None:
        batch, self._outbox = self._outbox, []
        if batch:
            for link in self._links:
                link.send(("batch", self._changes, batch))

    # -- the other workers ---------------------------------------------------

    def _receiver(self, worker: int) -> Callable[[tuple[Any, ...]], None]:
        def receive(message: tuple[Any, ...]) -> None:
            kind = message[0]
            if kind == "report":
                self._reports[worker] = WorkerReport(worker, *message[1:])
                return
            if kind == "resync":  # the worker's reload added nodes: which are out now
                if self._share:
                    down = [("down", node, "taken out by health checks")
                            for node in self._local.taken_out()]
                    self._links[worker - 1].send(("batch", self._changes, down))
                return
            health = self._health
            if health is None:
                return
            if kind == "failure":
                health.report_failure(message[1], message[2])
            elif kind == "success":
                health.report_success(message[1])
        return receive

    @property
    def _health(self) -> AsyncHealthChecker | None:
        return None if self._gateway is None else self._gateway.health

    @property
    def reports(self) -> list[WorkerReport]:
        """Every worker's counts and loads: this one's now, the others' as
        last reported."""
        own = []
        if self._gateway is not None:
            own = [WorkerReport(0, os.getpid(), self.counters.own(), self._gateway.loads,
                                self._gateway.router.fingerprint(), self._changes,
                                self._gateway.tunnel_counts, _digest(self._gateway),
                                self._gateway.tls_certificate,
                                self._gateway.tls_handshake_failures)]
        return own + [self._reports[i] for i in sorted(self._reports)]

    # -- lifecycle -----------------------------------------------------------

    async def start(self, gateway: Gateway) -> None:
        """Listen to the other workers; serve the admin listener, if
        configured, over every worker's counts."""
        self._gateway = gateway
        for link in self._links:
            await link.open()
        admin_listen = self._admin_listen
        if admin_listen is not None:
            view = GroupView(gateway, self)
            self.registry, self.metrics_off = make_registry(view, gateway.config.metrics, None)
            self._admin, self._admin_bound = await start_admin(view, *admin_listen)

    @property
    def admin_url(self) -> str | None:
        """``http://host:port`` of the admin listener, or None."""
        if not self._admin_bound:
            return None
        host, port = self._admin_bound[0]
        return f"http://{f'[{host}]' if ':' in host else host}:{port}"

    async def stop(self) -> None:
        """Stop the admin listener and the links."""
        runner, self._admin = self._admin, None
        if runner is not None:
            await runner.cleanup()
        for link in self._links:
            await link.close()


class Follower:
    """Workers 1 to N-1: apply the leader's verdicts, forward the failures
    met, push the counters.  Give it to the worker's ``Gateway`` as
    ``health_reports`` (when verdicts are shared), then ``await
    start(gateway)``."""

    def __init__(self, router: MutableRouter, link: socket.socket) -> None:
        """``link``: the socket to the leader."""
        self._router = router
        self._local = LocalMembership(router)
        self._changes = 0
        self._link = _Link(link, self._receive)
        self._failing: set[str] = set()
        self._gateway: Gateway | None = None
        self._pusher: asyncio.Task[None] | None = None

    def forget(self, node: str) -> bool:
        """Stop serving ``node`` in this worker, whatever the leader's verdict
        (a reload removed it)."""
        return self._local.forget(node)

    def watched_nodes(self) -> dict[str, float]:
        """This worker's nodes, those the leader's verdicts took out of
        its ring among them."""
        return self._local.watched_nodes()

    @property
    def ring_changes(self) -> int:
        """The number of the leader's last change applied to this ring."""
        return self._changes

    def resync(self) -> None:
        """Ask the leader for the nodes its health checks have out (a reload
        added nodes here, which the leader may have judged already)."""
        self._link.send(("resync",))

    def reweigh(self, node: str, weight: float) -> bool:
        """The weight ``node``, taken out by the leader's verdict, comes
        back with in this worker (a reload changed it)."""
        return self._local.reweigh(node, weight)

    def report_failure(self, node: str, reason: str = "reported failure") -> None:
        """Forward a request's failure on ``node`` to the leader's checker."""
        self._failing.add(node)
        self._link.send(("failure", node, reason))

    def report_success(self, node: str) -> None:
        """Forward a success on ``node``, if a failure was forwarded since
        the last one (the checker only needs to hear that the run of
        failures ended)."""
        if node in self._failing:
            self._failing.discard(node)
            self._link.send(("success", node))

    def _receive(self, message: tuple[Any, ...]) -> None:
        if message[0] == "reload":  # POST /-/reload on the leader's admin listener
            reloads = None if self._gateway is None else self._gateway.reloads
            if reloads is not None:
                reloads.reload()
            return
        if message[0] != "batch":
            return
        # One batch, applied in one go: no request is routed in between.
        _, changes, batch = message
        for change in batch:
            if change[0] == "down":
                self._local.mark_down(change[1], change[2])
            elif change[0] == "up":
                self._local.mark_up(change[1])
            elif change[0] == "weight" and change[1] in self._router:
                set_weight(self._router, change[1], change[2])
        self._changes = changes
        if self._gateway is not None:
            self._gateway.ring_changed()

    async def start(self, gateway: Gateway) -> None:
        """Listen to the leader and push ``gateway``'s counters to it."""
        self._gateway = gateway
        await self._link.open()
        self._pusher = asyncio.get_running_loop().create_task(self._push())

    def _report(self, last: tuple[Any, ...] | None) -> tuple[Any, ...]:
        assert self._gateway is not None
        gateway = self._gateway
        message = ("report", os.getpid(), gateway.counters.snapshot(), gateway.loads,
                   gateway.router.fingerprint(), self._changes, gateway.tunnel_counts,
                   _digest(gateway), gateway.tls_certificate, gateway.tls_handshake_failures)
        if message != last:
            self._link.send(message)
        return message

    async def _push(self) -> None:
        last = None
        while True:
            last = self._report(last)
            await asyncio.sleep(PUSH_INTERVAL)

    async def stop(self) -> None:
        """Push the last counts, then close the link."""
        pusher, self._pusher = self._pusher, None
        if pusher is not None:
            pusher.cancel()
            await asyncio.wait([pusher])
        if self._gateway is not None:
            self._report(None)
        await self._link.close()


class GroupView:
    """Worker 0's gateway as the admin listener shows it: every worker's
    counters and loads (a ``GatewayView``), and ``workers``, each one's."""

    def __init__(self, gateway: Gateway, leader: Leader) -> None:
        self._gateway = gateway
        self._leader = leader

    @property
    def config(self) -> GatewayConfig:
        """Worker 0's settings (every worker has the same)."""
        return self._gateway.config

    @property
    def router(self) -> MutableRouter:
        """Worker 0's ring (the verdicts keep every worker's alike)."""
        return self._gateway.router

    @property
    def prompts(self) -> PromptRoutes | None:
        """Worker 0's routing of completions by prompt, or None: its view
        and counts are every worker's (``chash.gateway.worker_loads``)."""
        return self._gateway.prompts

    @property
    def addresses(self) -> dict[str, str]:
        """``{node: address}`` of every configured backend (``host:port``, or
        ``https://host:port`` for a TLS one)."""
        return self._gateway.addresses

    @property
    def health(self) -> AsyncHealthChecker | None:
        """Worker 0's health checker."""
        return self._gateway.health

    @property
    def membership(self) -> object | None:
        """The shared ring's membership, or None when the workers share
        verdicts among themselves."""
        membership = self._gateway.membership
        return None if membership is self._leader else membership

    @property
    def hints(self) -> dict[str, str]:
        """Advice for the operator, by node."""
        return self._gateway.hints

    @property
    def tls_status(self) -> dict[str, Any] | None:
        """Worker 0's TLS listener, its handshake failures those of every
        worker's; each worker's certificate is in ``workers``."""
        own = self._gateway.tls_status
        if own is None:
            return None
        return {**own, "handshake_failures": sum(r.tls_handshake_failures
                                                 for r in self._leader.reports)}

    @property
    def started_at(self) -> float | None:
        """When worker 0 started listening."""
        return self._gateway.started_at

    def address_of(self, node: str) -> str:
        """The address ``node`` is reached at: ``host:port``, or
        ``https://host:port`` for a TLS backend."""
        return self._gateway.address_of(node)

    @property
    def zones(self) -> dict[str, str]:
        """``{node: zone}`` (every worker has the same)."""
        return self._gateway.zones

    @property
    def counters(self) -> RouteCounters:
        """Every worker's counters, summed."""
        return self._leader.counters

    @property
    def loads(self) -> dict[str, int]:
        """Requests in flight by node, over every worker."""
        total: dict[str, int] = {}
        for report in self._leader.reports:
            for node, count in report.loads.items():
                total[node] = total.get(node, 0) + count
        return total

    @property
    def tunnel_counts(self) -> TunnelCounts:
        """The WebSocket tunnels of every worker, summed."""
        return merge_tunnel_counts([r.tunnels for r in self._leader.reports
                                    if r.tunnels is not None])

    @property
    def registry(self) -> Any:
        """The Prometheus registry of the admin listener, or None."""
        return self._leader.registry

    @property
    def metrics_off(self) -> str | None:
        """Why metrics are not served (None when they are)."""
        return self._leader.metrics_off

    @property
    def workers(self) -> list[dict[str, Any]]:
        """Each worker's requests by outcome, retries, loads and ring (its
        fingerprint, and the number of the leader's changes it applied)."""
        return [{"worker": r.worker, "pid": r.pid, "requests": dict(r.counters.requests),
                 "retries": r.counters.retries, "in_flight": sum(r.loads.values()),
                 "tunnels": 0 if r.tunnels is None else sum(r.tunnels.open.values()),
                 "fingerprint": r.fingerprint, "ring_changes": r.ring_changes,
                 "config_digest": r.config_digest, "tls_certificate": r.tls_certificate}
                for r in self._leader.reports]

    @property
    def reloads(self) -> Reloads | None:
        """What ``POST /-/reload`` calls: worker 0's reload, which tells
        every other worker to reload after its own applied."""
        reloads = self._gateway.reloads
        return None if reloads is None else _GroupReloads(reloads, self._leader)


class _GroupReloads:
    """Worker 0's ``Reloads``, whose ``reload`` reaches every worker."""

    def __init__(self, own: Reloads, leader: Leader) -> None:
        self._own = own
        self._leader = leader

    @property
    def digest(self) -> str:
        """Worker 0's configuration digest."""
        return self._own.digest

    def reload(self) -> ReloadOutcome:
        """Worker 0's reload, then (if it applied) every other worker's."""
        outcome = self._leader.reload()
        assert outcome is not None  # worker 0's gateway has its reloads
        return outcome

    def status(self) -> dict[str, Any]:
        """Worker 0's configuration status (each worker's digest is in
        ``workers``)."""
        return self._own.status()


def _digest(gateway: Gateway) -> str:
    return "" if gateway.reloads is None else gateway.reloads.digest
