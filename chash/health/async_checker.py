"""``AsyncHealthChecker``: health checks run by an asyncio task, probing
with aiohttp (the ``async`` extra).

The task starts a round every ``interval`` seconds; each round gathers one
probe per watched node, at most ``max_concurrency`` at a time, each bounded
by ``timeout`` once it has its slot.  Everything else, from reading the
watched nodes to applying the verdicts, is ``CheckerCore``'s.
"""

from __future__ import annotations

import asyncio
import types
from typing import TYPE_CHECKING

from chash._optional import require
from chash.health.core import CheckerCore, logger
from chash.health.probes import ProbeOutcome, aiohttp_session, aiohttp_status, judge

if TYPE_CHECKING:
    import aiohttp

__all__ = ["AsyncHealthChecker"]


class AsyncHealthChecker(CheckerCore):
    """Health checks run by an asyncio task, for async gateways.

    Takes the same arguments as ``HealthChecker`` and probes with aiohttp
    (``pip install 'chash-router[async]'``); without aiohttp, constructing
    one raises ImportError saying so.  ``async with`` (or ``await start()``)
    runs a round at once and then every ``interval`` seconds in a task;
    ``await stop()`` / ``await aclose()`` cancels it, probes in flight
    included, and closes the HTTP session.  ``await check_now()`` runs one
    round.  ``report_success`` / ``report_failure`` are plain methods, safe
    to call from request handlers.
    """

    _aiohttp: types.ModuleType
    _task: asyncio.Task[None] | None
    _session: aiohttp.ClientSession | None
    _round_lock: asyncio.Lock | None

    def _init_runner(self) -> None:
        self._aiohttp = require("aiohttp", user="AsyncHealthChecker", extra="async")
        self._task = None
        self._session = None
        self._round_lock = None

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
            slots = asyncio.Semaphore(self._settings.max_concurrency)
            outcomes = await asyncio.gather(
                *(self._probe(session, slots, node) for node in nodes))
            if self._session is session:  # not closed under us
                self._record(list(outcomes))

    def _open_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp_session(self._aiohttp)
        return self._session

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            try:
                await self.check_now()
            except Exception:
                logger.exception("health-check round failed")
            await asyncio.sleep(max(0.0, started + self.interval - loop.time()))

    async def _probe(self, session: aiohttp.ClientSession, slots: asyncio.Semaphore,
                     node: str) -> ProbeOutcome:
        target = self._target(node)
        if isinstance(target, ProbeOutcome):
            return target
        loop = asyncio.get_running_loop()
        timeout = self.timeout
        # The timeout starts once the probe has a slot, not while it queues
        # behind max_concurrency others.
        async with slots:
            started = loop.time()
            answer: int | Exception
            try:
                answer = await asyncio.wait_for(aiohttp_status(session, target, self.ssl_context), timeout)
            except Exception as exc:
                answer = exc
            return judge(node, answer, healthy=self._settings.healthy_statuses,
                         timeout=timeout, latency=loop.time() - started)
