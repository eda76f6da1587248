"""Health checks that take failing nodes out of a consistent-hash ring.

A checker probes every watched node's health URL on a schedule, all probes
at once and each bounded by ``timeout``.  ``fall`` consecutive failures take
a node out of the ring, so its keys flow clockwise to the next node; ``rise``
consecutive successes put it back with the weight it had, so exactly those
keys return.  Keys of other nodes never move.  The gateway's own traffic can
feed the same verdicts through ``report_failure()`` / ``report_success()``.

When fewer than ``panic_threshold`` of the watched nodes are healthy the
checker panics, as Envoy does: every watched node is kept in the ring, since
sending some requests to failing nodes beats sending all of them to the few
healthy ones, or to none.

Two runners share one state machine (``chash._health_state``):
``HealthChecker`` runs rounds in a thread and probes with ``http.client``;
``AsyncHealthChecker`` runs them in an asyncio task and probes with aiohttp
(the ``async`` extra).  Both apply verdicts through a ``Membership``; the
default, ``LocalMembership``, edits the router in this process.

See docs/health.md for the state machine and worked gateway examples.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import errno
import http.client
import logging
import math
import socket
import threading
import time
import types
import urllib.parse
from collections.abc import Callable, Container
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ._health_state import HealthState, NodeState, NodeStatus, Transition

if TYPE_CHECKING:
    import aiohttp

__all__ = [
    "AsyncHealthChecker",
    "HealthChecker",
    "LocalMembership",
    "Membership",
    "NodeState",
    "NodeStatus",
]

logger = logging.getLogger("chash.health")

_USER_AGENT = "chash-health-check"

#: A URL template with a ``{node}`` field, or a callable ``node -> url``.
UrlSpec = str | Callable[[str], str]
#: ``on_change(node, old_state, new_state, reason)``; its result is ignored.
OnChange = Callable[[str, NodeState, NodeState, str], object]


class _Router(Protocol):
    """The part of ``chash.ConsistentHashRouter`` that LocalMembership uses."""

    @property
    def weights(self) -> dict[str, float]: ...

    def add_service_node(self, node: str, weight: float, /) -> None: ...

    def remove_service_node(self, node: str, /) -> None: ...

    def __contains__(self, node: str, /) -> bool: ...


class Membership(Protocol):
    """Where the checker learns which nodes to watch and applies verdicts.

    ``mark_down`` and ``mark_up`` must be idempotent and must ignore nodes
    they do not know: the checker re-applies its verdicts after every round
    (so a failed or overridden update is repaired), and a verdict may race
    with the operator removing the node.  The checker never calls
    ``mark_up`` for a node absent from ``watched_nodes()``, so a node the
    operator removed is never re-added.
    """

    def watched_nodes(self) -> dict[str, float]:
        """Every node the operator wants in service, with its weight: those
        in the ring and those currently taken out by health checks."""
        ...

    def mark_down(self, node: str, reason: str) -> None:
        """Take ``node`` out of service (no-op if it already is, or unknown)."""
        ...

    def mark_up(self, node: str) -> None:
        """Put ``node`` back in service with the weight it had (no-op if it
        is in service, or unknown)."""
        ...


class LocalMembership:
    """Applies verdicts to a router in this process.

    The operator manages nodes on the router itself: a node added there is
    watched from the next round on, and a node removed from it while in
    service is no longer watched.  A node that health checks took out is
    not in the router, so the operator removes it with ``forget()`` (which
    works in every state); until then it is watched and comes back when it
    recovers.  If the operator adds a taken-out node to the router again,
    the router's weight wins and the checker takes it out again at its next
    round if it is still down.
    """

    def __init__(self, router: _Router) -> None:
        """Manage ``router`` (a ``chash.ConsistentHashRouter`` or alike)."""
        self._router = router
        self._lock = threading.Lock()
        self._down: dict[str, float] = {}

    @property
    def router(self) -> _Router:
        """The router this membership edits."""
        return self._router

    def watched_nodes(self) -> dict[str, float]:
        """The router's nodes and weights, plus the nodes taken out."""
        with self._lock:
            watched = dict(self._down)
            watched.update(self._router.weights)
        return watched

    def taken_out(self) -> dict[str, float]:
        """The nodes health checks took out, with the weights they will get
        back."""
        with self._lock:
            return dict(self._down)

    def mark_down(self, node: str, reason: str) -> None:
        """Remove ``node`` from the router, remembering its weight.

        A node not in the router is left alone: either it is already out,
        or the operator removed it, and then it must stay unwatched.
        """
        with self._lock:
            if node not in self._router:
                return
            weight = self._router.weights.get(node)
            if weight is None:
                return
            try:
                self._router.remove_service_node(node)
            except KeyError:  # the operator removed it meanwhile
                return
            self._down[node] = weight

    def mark_up(self, node: str) -> None:
        """Re-add ``node`` with its remembered weight, if this membership
        took it out; if the operator has put it back already, leave it."""
        with self._lock:
            weight = self._down.pop(node, None)
            if weight is None:
                return
            if node in self._router:
                return
            try:
                self._router.add_service_node(node, weight)
            except BaseException:
                self._down[node] = weight
                raise

    def forget(self, node: str) -> bool:
        """Stop serving and watching ``node``, whatever its health.

        Removes it from the router if it is there and drops it if health
        checks took it out, so it is never re-added.  Returns whether the
        node was known.
        """
        with self._lock:
            known = self._down.pop(node, None) is not None
            if node in self._router:
                try:
                    self._router.remove_service_node(node)
                    known = True
                except KeyError:
                    pass
        return known


@dataclass(frozen=True)
class _Outcome:
    node: str
    ok: bool
    error: str | None
    latency: float | None
    aborted: bool = False


def _describe(exc: BaseException, timeout: float) -> str:
    """A short, runner-independent description of a failed probe."""
    if isinstance(exc, (TimeoutError, socket.timeout)):
        return f"timed out after {timeout:g}s"
    if getattr(exc, "errno", None) == errno.ECONNREFUSED:
        return "connection refused"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class _CheckerBase:
    """Configuration, passive reports, status and verdict application shared
    by both runners.  Runners add the probing."""

    def __init__(
        self,
        router: _Router | None,
        *,
        url: UrlSpec,
        interval: float,
        timeout: float,
        fall: int,
        rise: int,
        on_change: OnChange | None,
        membership: Membership | None,
        healthy_statuses: Container[int],
        panic_threshold: float,
        max_concurrency: int,
    ) -> None:
        if membership is None:
            if router is None:
                raise TypeError("a router or a membership is required")
            membership = LocalMembership(router)
        for name, value in (("interval", interval), ("timeout", timeout)):
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive number of seconds, not {value!r}")
        if isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int) \
                or max_concurrency < 1:
            raise ValueError(f"max_concurrency must be an integer >= 1, not {max_concurrency!r}")
        if isinstance(url, str):
            try:
                url.format(node="node")
            except (KeyError, IndexError, ValueError) as exc:
                raise ValueError(f"url template {url!r} may only use {{node}}") from exc
        elif not callable(url):
            raise TypeError(f"url must be a template string or a callable, not {url!r}")
        if on_change is not None and not callable(on_change):
            raise TypeError(f"on_change must be callable, not {on_change!r}")
        self._state = HealthState(fall=fall, rise=rise, panic_threshold=panic_threshold)
        self._membership: Membership = membership
        self._url = url
        self._interval = float(interval)
        self._timeout = float(timeout)
        self._on_change = on_change
        self._healthy_statuses = healthy_statuses
        self._max_concurrency = max_concurrency
        # _lock guards _state; _apply_lock serializes membership updates so
        # that the last update applied reflects the latest verdicts.
        self._lock = threading.Lock()
        self._apply_lock = threading.Lock()
        self._panicking = False

    # -- configuration ------------------------------------------------------

    @property
    def membership(self) -> Membership:
        """Where nodes come from and verdicts go."""
        return self._membership

    @property
    def interval(self) -> float:
        """Seconds from the start of one round to the start of the next."""
        return self._interval

    @property
    def timeout(self) -> float:
        """Seconds a single probe may take before it counts as failed."""
        return self._timeout

    @property
    def fall(self) -> int:
        """Consecutive failures that take a node out."""
        return self._state.fall

    @property
    def rise(self) -> int:
        """Consecutive successes that put a node back."""
        return self._state.rise

    @property
    def panic_threshold(self) -> float:
        """Healthy fraction below which every watched node stays in service."""
        return self._state.panic_threshold

    def url_for(self, node: str) -> str:
        """The health URL probed for ``node``."""
        if isinstance(self._url, str):
            return self._url.format(node=node)
        return self._url(node)

    # -- state --------------------------------------------------------------

    def status(self) -> dict[str, NodeStatus]:
        """A snapshot of every watched node, by node name."""
        with self._lock:
            return self._state.status()

    @property
    def panicking(self) -> bool:
        """Whether too few nodes are healthy, so all are kept in service."""
        with self._lock:
            return self._state.panicking

    def report_success(self, node: str) -> None:
        """Count a request the gateway sent to ``node`` that succeeded.

        Feeds the same counters as the probes; ignored for unwatched nodes.
        """
        with self._lock:
            transition = self._state.record_success(node, time.time())
        if transition is not None:
            self._settle([transition])

    def report_failure(self, node: str, reason: str = "reported failure") -> None:
        """Count a request the gateway sent to ``node`` that failed.

        ``fall`` consecutive failures, probes and reports alike, take the
        node out.  Ignored for unwatched nodes.
        """
        with self._lock:
            transition = self._state.record_failure(node, reason, time.time())
        if transition is not None:
            self._settle([transition])

    # -- rounds -------------------------------------------------------------

    def _sync(self) -> list[str]:
        """Refresh the watched set from the membership; return the nodes to
        probe.  If the membership fails, the last known set is kept."""
        try:
            watched = self._membership.watched_nodes()
        except Exception:
            logger.exception("could not read the watched nodes; keeping the last known set")
            with self._lock:
                return self._state.nodes
        with self._lock:
            added, removed = self._state.sync(watched, time.time())
            nodes = self._state.nodes
        for node in added:
            logger.info("watching node %s", node, extra={"node": node})
        for node in removed:
            logger.info("no longer watching node %s", node, extra={"node": node})
        return nodes

    def _record(self, outcomes: list[_Outcome]) -> None:
        """Feed one round's outcomes to the state machine, then settle."""
        now = time.time()
        transitions = []
        with self._lock:
            for outcome in outcomes:
                if outcome.ok:
                    transition = self._state.record_success(
                        outcome.node, now, latency=outcome.latency)
                else:
                    transition = self._state.record_failure(
                        outcome.node, outcome.error or "failed", now, latency=outcome.latency)
                if transition is not None:
                    transitions.append(transition)
        self._settle(transitions)

    def _settle(self, transitions: list[Transition]) -> None:
        """Apply every verdict to the membership, then log and notify."""
        with self._apply_lock:
            with self._lock:
                wanted = self._state.in_service()
                reasons = {node: self._state.last_error(node) or "unhealthy"
                           for node, serve in wanted.items() if not serve}
                panicking = self._state.panicking
                healthy, total = self._state.healthy_count, len(self._state)
            for node, serve in wanted.items():
                try:
                    if serve:
                        self._membership.mark_up(node)
                    else:
                        self._membership.mark_down(node, reasons[node])
                except Exception:
                    logger.exception("could not mark node %s %s; retrying next round",
                                     node, "up" if serve else "down", extra={"node": node})
            panic_changed = panicking != self._panicking
            self._panicking = panicking
        for t in transitions:
            level = logging.WARNING if t.new is NodeState.DOWN else logging.INFO
            kept = " (kept in service: panic)" if t.new is NodeState.DOWN and panicking else ""
            logger.log(level, "node %s is %s: %s%s", t.node, t.new.value, t.reason, kept,
                       extra={"node": t.node, "old_state": t.old.value,
                              "new_state": t.new.value, "reason": t.reason})
        if panic_changed:
            if panicking:
                logger.error("panic: only %d of %d nodes are healthy (threshold %g); "
                             "keeping every node in service", healthy, total,
                             self._state.panic_threshold)
            else:
                logger.warning("panic over: %d of %d nodes are healthy", healthy, total)
        if self._on_change is not None:
            for t in transitions:
                try:
                    self._on_change(t.node, t.old, t.new, t.reason)
                except Exception:
                    logger.exception("on_change callback failed for node %s", t.node,
                                     extra={"node": t.node})


# -- the thread runner ------------------------------------------------------


class _HttpProbe:
    """One GET of a health URL over http.client, abortable from another
    thread by shutting its socket down."""

    def __init__(self, node: str, url: str, timeout: float,
                 healthy: Container[int]) -> None:
        self.node = node
        self.url = url
        self.timeout = timeout
        self.healthy = healthy
        self.started: float | None = None
        self._lock = threading.Lock()
        self._conn: http.client.HTTPConnection | None = None
        self._aborted = False

    @property
    def aborted(self) -> bool:
        return self._aborted

    def run(self) -> _Outcome:
        started = self.started = time.monotonic()
        error: str | None
        try:
            status = self._get()
        except Exception as exc:
            ok, error = False, _describe(exc, self.timeout)
        else:
            ok = status in self.healthy
            error = None if ok else f"HTTP {status}"
        return _Outcome(self.node, ok, error, time.monotonic() - started, self._aborted)

    def _get(self) -> int:
        parts = urllib.parse.urlsplit(self.url)
        conn_type: type[http.client.HTTPConnection]
        if parts.scheme == "http":
            conn_type = http.client.HTTPConnection
        elif parts.scheme == "https":
            conn_type = http.client.HTTPSConnection
        else:
            raise ValueError(f"unsupported URL {self.url!r}")
        if not parts.hostname:
            raise ValueError(f"no host in URL {self.url!r}")
        conn = conn_type(parts.hostname, parts.port, timeout=self.timeout)
        with self._lock:
            if self._aborted:
                raise ConnectionAbortedError("probe aborted")
            self._conn = conn
        try:
            target = parts.path or "/"
            if parts.query:
                target += "?" + parts.query
            conn.request("GET", target, headers={
                "Connection": "close", "User-Agent": _USER_AGENT, "Accept": "*/*"})
            with conn.getresponse() as response:
                return response.status
        finally:
            conn.close()

    def abort(self) -> None:
        """Make the probe fail now; its outcome is to be ignored."""
        with self._lock:
            self._aborted = True
            conn = self._conn
        sock = conn.sock if conn is not None else None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class HealthChecker(_CheckerBase):
    """Health checks run by a background thread, for synchronous gateways.

    ``start()`` runs a round at once and then every ``interval`` seconds;
    ``stop()`` (or leaving the ``with`` block) ends the thread promptly and
    releases the probe threads.  ``check_now()`` runs one round in the
    calling thread, whether or not the background thread runs.

    Arguments:
        router: the ``chash.ConsistentHashRouter`` to keep healthy; may be
            None when ``membership`` is given.
        url: health URL template with ``{node}``, or a callable
            ``node -> url``; http and https.
        interval: seconds between the starts of two rounds.
        timeout: seconds one probe may take, connecting included.
        fall: consecutive failures that take a node out.
        rise: consecutive successes that put it back, with its weight.
        on_change: called as ``on_change(node, old, new, reason)`` after each
            transition has been applied; exceptions are logged.
        membership: a ``Membership``; default ``LocalMembership(router)``.
        healthy_statuses: HTTP statuses that count as success (2xx).
            Redirects are not followed.
        panic_threshold: keep every node in service while fewer than this
            fraction of the watched nodes are healthy; 0 disables.
        max_concurrency: at most this many probes in flight at once.
    """

    def __init__(
        self,
        router: _Router | None,
        *,
        url: UrlSpec = "http://{node}/health",
        interval: float = 5.0,
        timeout: float = 2.0,
        fall: int = 3,
        rise: int = 2,
        on_change: OnChange | None = None,
        membership: Membership | None = None,
        healthy_statuses: Container[int] = range(200, 300),
        panic_threshold: float = 0.5,
        max_concurrency: int = 64,
    ) -> None:
        """See the class docstring."""
        super().__init__(router, url=url, interval=interval, timeout=timeout,
                         fall=fall, rise=rise, on_change=on_change,
                         membership=membership, healthy_statuses=healthy_statuses,
                         panic_threshold=panic_threshold,
                         max_concurrency=max_concurrency)
        self._thread: threading.Thread | None = None
        self._stop_event = threading.Event()
        self._round_lock = threading.Lock()
        # _inflight_lock makes "submit a probe" and "stop: abort every probe"
        # atomic with respect to each other, so no probe escapes a stop().
        self._inflight_lock = threading.Lock()
        self._inflight: dict[str, tuple[concurrent.futures.Future[_Outcome], _HttpProbe]] = {}
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None

    @property
    def running(self) -> bool:
        """Whether the background thread runs."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Start the background thread; its first round begins at once."""
        if self.running:
            raise RuntimeError("the health checker is already running")
        self._stop_event = threading.Event()
        thread = threading.Thread(target=self._run, args=(self._stop_event,),
                                  name="chash-health", daemon=True)
        self._thread = thread
        thread.start()

    def stop(self) -> None:
        """Stop the background thread and release the probe threads.

        Probes in flight are aborted and their outcome discarded, so stop()
        does not wait out an interval or a hanging backend.  Safe to call
        more than once, or without start().
        """
        with self._inflight_lock:
            self._stop_event.set()
            probes = [probe for _, probe in self._inflight.values()]
        for probe in probes:
            probe.abort()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        with self._inflight_lock:
            executor, self._executor = self._executor, None
            self._inflight.clear()
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> HealthChecker:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None,
                 exc: BaseException | None, tb: types.TracebackType | None) -> None:
        self.stop()

    def check_now(self) -> None:
        """Probe every watched node once, concurrently, and apply verdicts."""
        with self._round_lock:
            self._round(None)

    def _run(self, stop_event: threading.Event) -> None:
        while not stop_event.is_set():
            started = time.monotonic()
            try:
                with self._round_lock:
                    self._round(stop_event)
            except Exception:
                logger.exception("health-check round failed")
            stop_event.wait(max(0.0, started + self._interval - time.monotonic()))

    def _round(self, cancel: threading.Event | None) -> None:
        nodes = self._sync()
        outcomes: list[_Outcome] = []
        pending: dict[concurrent.futures.Future[_Outcome], _HttpProbe] = {}
        for node in nodes:
            previous = self._inflight.get(node)
            if previous is not None and not previous[0].done():
                outcomes.append(_Outcome(node, False, "previous probe still running", None))
                continue
            try:
                url = self.url_for(node)
            except Exception as exc:
                outcomes.append(_Outcome(node, False, f"no URL: {_describe(exc, 0)}", None))
                continue
            probe = _HttpProbe(node, url, self._timeout, self._healthy_statuses)
            with self._inflight_lock:
                if cancel is not None and cancel.is_set():
                    break
                if self._executor is None:
                    self._executor = concurrent.futures.ThreadPoolExecutor(
                        self._max_concurrency, thread_name_prefix="chash-health-probe")
                future = self._executor.submit(probe.run)
                self._inflight[node] = (future, probe)
            pending[future] = probe
        outcomes.extend(self._collect(pending))
        with self._inflight_lock:
            for node, (future, _) in list(self._inflight.items()):
                if future.done():
                    del self._inflight[node]
        self._record(outcomes)

    def _collect(self, pending: dict[concurrent.futures.Future[_Outcome], _HttpProbe],
                 ) -> list[_Outcome]:
        """Wait for the probes, failing each one ``timeout`` seconds after it
        started (it may have queued behind ``max_concurrency`` others)."""
        outcomes = []
        while pending:
            now = time.monotonic()
            wake = now + self._timeout
            for future, probe in list(pending.items()):
                if probe.started is None:
                    continue
                deadline = probe.started + self._timeout
                if deadline > now:
                    wake = min(wake, deadline)
                    continue
                del pending[future]
                if not probe.aborted:
                    probe.abort()
                    outcomes.append(_Outcome(probe.node, False,
                                             f"timed out after {self._timeout:g}s",
                                             now - probe.started))
            if not pending:
                break
            done, _ = concurrent.futures.wait(
                pending, timeout=max(0.0, wake - now),
                return_when=concurrent.futures.FIRST_COMPLETED)
            for future in done:
                del pending[future]
                outcome = future.result()
                if not outcome.aborted:
                    outcomes.append(outcome)
        return outcomes


# -- the asyncio runner -----------------------------------------------------


def _import_aiohttp() -> Any:
    try:
        import aiohttp
    except ImportError as exc:
        raise ImportError(
            "AsyncHealthChecker needs aiohttp: pip install 'chash-router[async]'") from exc
    return aiohttp


class AsyncHealthChecker(_CheckerBase):
    """Health checks run by an asyncio task, for async gateways.

    Takes the same arguments as ``HealthChecker`` and probes with aiohttp
    (``pip install 'chash-router[async]'``).  ``async with`` (or ``await start()``)
    runs a round at once and then every ``interval`` seconds in a task;
    ``await stop()`` / ``await aclose()`` cancels it, probes in flight
    included, and closes the HTTP session.  ``await check_now()`` runs one
    round.  ``report_success`` / ``report_failure`` are plain methods, safe
    to call from request handlers.
    """

    def __init__(
        self,
        router: _Router | None,
        *,
        url: UrlSpec = "http://{node}/health",
        interval: float = 5.0,
        timeout: float = 2.0,
        fall: int = 3,
        rise: int = 2,
        on_change: OnChange | None = None,
        membership: Membership | None = None,
        healthy_statuses: Container[int] = range(200, 300),
        panic_threshold: float = 0.5,
        max_concurrency: int = 64,
    ) -> None:
        """See ``HealthChecker``; raises ImportError without aiohttp."""
        self._aiohttp = _import_aiohttp()
        super().__init__(router, url=url, interval=interval, timeout=timeout,
                         fall=fall, rise=rise, on_change=on_change,
                         membership=membership, healthy_statuses=healthy_statuses,
                         panic_threshold=panic_threshold,
                         max_concurrency=max_concurrency)
        self._task: asyncio.Task[None] | None = None
        self._session: aiohttp.ClientSession | None = None
        self._round_lock: asyncio.Lock | None = None

    @property
    def running(self) -> bool:
        """Whether the background task runs."""
        return self._task is not None and not self._task.done()

    async def start(self) -> None:
        """Start the background task; its first round begins at once."""
        if self.running:
            raise RuntimeError("the health checker is already running")
        self._open_session()
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name="chash-health")

    async def stop(self) -> None:
        """Cancel the background task and any round in progress, and close
        the HTTP session.  Outcomes of cancelled probes are discarded.  Safe
        to call more than once, or without start()."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.wait([task])
            if not task.cancelled() and task.exception() is not None:
                logger.error("health-check task failed", exc_info=task.exception())
        session, self._session = self._session, None
        self._round_lock = None  # asyncio locks belong to one event loop
        if session is not None:
            await session.close()

    async def aclose(self) -> None:
        """Same as ``stop()``."""
        await self.stop()

    async def __aenter__(self) -> AsyncHealthChecker:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: types.TracebackType | None) -> None:
        await self.stop()

    async def check_now(self) -> None:
        """Probe every watched node once, concurrently, and apply verdicts.

        Opens the HTTP session if needed; ``aclose()`` closes it.
        """
        if self._round_lock is None:
            self._round_lock = asyncio.Lock()
        async with self._round_lock:
            session = self._open_session()
            nodes = self._sync()
            slots = asyncio.Semaphore(self._max_concurrency)
            outcomes = await asyncio.gather(
                *(self._probe(session, slots, node) for node in nodes))
            if self._session is session:  # not closed under us
                self._record(list(outcomes))

    def _open_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            lib = self._aiohttp
            self._session = lib.ClientSession(
                connector=lib.TCPConnector(limit=0, force_close=True),
                timeout=lib.ClientTimeout(total=None),
                headers={"User-Agent": _USER_AGENT},
                auto_decompress=False,
            )
        session: aiohttp.ClientSession = self._session
        return session

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            try:
                await self.check_now()
            except Exception:
                logger.exception("health-check round failed")
            await asyncio.sleep(max(0.0, started + self._interval - loop.time()))

    async def _probe(self, session: aiohttp.ClientSession, slots: asyncio.Semaphore,
                     node: str) -> _Outcome:
        try:
            url = self.url_for(node)
        except Exception as exc:
            return _Outcome(node, False, f"no URL: {_describe(exc, 0)}", None)
        loop = asyncio.get_running_loop()
        # The timeout starts once the probe has a slot, not while it queues
        # behind max_concurrency others.
        async with slots:
            started = loop.time()
            error: str | None
            try:
                status = await asyncio.wait_for(self._get(session, url), self._timeout)
            except Exception as exc:
                ok, error = False, _describe(exc, self._timeout)
            else:
                ok = status in self._healthy_statuses
                error = None if ok else f"HTTP {status}"
            return _Outcome(node, ok, error, loop.time() - started)

    @staticmethod
    async def _get(session: aiohttp.ClientSession, url: str) -> int:
        if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
            raise ValueError(f"unsupported URL {url!r}")
        async with session.get(url, allow_redirects=False,
                               headers={"Connection": "close"}) as response:
            status: int = response.status
            return status
