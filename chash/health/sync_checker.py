"""``HealthChecker``: health checks run by a thread, probing with http.client.

The thread starts a round every ``interval`` seconds; each round submits one
``HttpProbe`` per watched node to a pool of up to ``max_concurrency``
threads and fails each probe ``timeout`` seconds after it started.
Everything else, from reading the watched nodes to applying the verdicts,
is ``CheckerCore``'s.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
import types

from chash.health.core import CheckerCore, logger
from chash.health.probes import HttpProbe, ProbeOutcome

__all__ = ["HealthChecker"]

_Pending = dict[concurrent.futures.Future[ProbeOutcome], HttpProbe]


class HealthChecker(CheckerCore):
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
        ssl_context: the ``ssl.SSLContext`` that https health URLs are
            probed with (default: verified against the system's CAs).
    """

    _thread: threading.Thread | None
    _stop_event: threading.Event
    _round_lock: threading.Lock
    _inflight_lock: threading.Lock
    _inflight: dict[str, tuple[concurrent.futures.Future[ProbeOutcome], HttpProbe]]
    _executor: concurrent.futures.ThreadPoolExecutor | None

    def _init_runner(self) -> None:
        self._thread = None
        self._stop_event = threading.Event()
        self._round_lock = threading.Lock()
        # _inflight_lock makes "submit a probe" and "stop: abort every probe"
        # atomic with respect to each other, so no probe escapes a stop().
        self._inflight_lock = threading.Lock()
        self._inflight = {}
        self._executor = None

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
            stop_event.wait(max(0.0, started + self.interval - time.monotonic()))

    def _round(self, cancel: threading.Event | None) -> None:
        """One round: probe every watched node, unless ``cancel`` is set
        before its probe is submitted, and record the outcomes."""
        outcomes: list[ProbeOutcome] = []
        pending: _Pending = {}
        for node in self._sync():
            previous = self._inflight.get(node)
            if previous is not None and not previous[0].done():
                outcomes.append(ProbeOutcome(node, False, "previous probe still running", None))
                continue
            target = self._target(node)
            if isinstance(target, ProbeOutcome):
                outcomes.append(target)
                continue
            probe = HttpProbe(node, target, self.timeout, self._settings.healthy_statuses,
                              self.ssl_context)
            future = self._submit(probe, cancel)
            if future is None:
                break
            pending[future] = probe
        outcomes.extend(self._collect(pending))
        with self._inflight_lock:
            for node, (future, _) in list(self._inflight.items()):
                if future.done():
                    del self._inflight[node]
        self._record(outcomes)

    def _submit(self, probe: HttpProbe, cancel: threading.Event | None,
                ) -> concurrent.futures.Future[ProbeOutcome] | None:
        """Start ``probe`` in the pool, or return None if ``cancel`` is set."""
        with self._inflight_lock:
            if cancel is not None and cancel.is_set():
                return None
            if self._executor is None:
                self._executor = concurrent.futures.ThreadPoolExecutor(
                    self._settings.max_concurrency, thread_name_prefix="chash-health-probe")
            future = self._executor.submit(probe.run)
            self._inflight[probe.node] = (future, probe)
        return future

    def _collect(self, pending: _Pending) -> list[ProbeOutcome]:
        """Wait for the probes, failing each one ``timeout`` seconds after it
        started (it may have queued behind ``max_concurrency`` others)."""
        timeout = self.timeout
        outcomes = []
        while pending:
            now = time.monotonic()
            wake = now + timeout
            for future, probe in list(pending.items()):
                if probe.started is None:
                    continue
                deadline = probe.started + timeout
                if deadline > now:
                    wake = min(wake, deadline)
                    continue
                del pending[future]
                if not probe.aborted:
                    probe.abort()
                    outcomes.append(ProbeOutcome(probe.node, False,
                                                 f"timed out after {timeout:g}s",
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
