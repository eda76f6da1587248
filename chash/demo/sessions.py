"""The ``chash demo`` scenario: sticky sessions through a backend's death.

Everything runs in one process on 127.0.0.1:

1. three small backends (``SessionBackend``), ``a``, ``b`` and ``c``, each
   keeping every user's session in memory: a session id and a visit count;
2. a ``chash.gateway.Gateway`` in front of them, routing by the
   ``X-User-Id`` header, health-checking them twice a second;
3. simulated users, each sending one request after another with a short
   pause, remembering which backend answered and which session it saw.

After a first phase (every user stays on one backend), backend ``b`` stops.
Its users' requests fail over to the next node of their preference list
(first by retry, then because health checks take ``b`` out of the ring);
nobody else moves and no request fails.  Then ``b`` restarts, empty, and
once health checks put it back exactly its users return.  The run prints a
timeline as it goes and the figures at the end; ``run_demo()`` returns them
as a ``DemoResult``.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from chash._text import plural
from chash.demo.backends import SessionBackend, aiohttp_module
from chash.demo.timeline import FailureLog, HealthLog, Timeline, until

if TYPE_CHECKING:
    import aiohttp

    from chash.gateway import Gateway

__all__ = ["DemoResult", "Visit", "render_figures", "run_demo"]

#: The backends' node names; the one stopped mid-run.
BACKENDS = ("a", "b", "c")
STOPPED = "b"
#: Health checks in the demo: fast, so that the timeline is short.
HEALTH_INTERVAL = 0.5
HEALTH_TIMEOUT = 1.0


@dataclass(frozen=True)
class Visit:
    """One request of a simulated user, as the user saw it."""

    started: float
    """Seconds since the start of the run when the request was sent."""
    backend: str | None
    """The backend that answered, or None if the request failed."""
    session: str | None = None
    """The session id the backend reported."""
    visits: int = 0
    """The session's visit count the backend reported."""
    error: str | None = None
    """Why the request failed, if it did."""


@dataclass
class DemoResult:
    """What a demo run measured.  Times are seconds since the start."""

    users: int
    backends: dict[str, str]
    """``{node: address}``."""
    ownership: dict[str, float]
    """The ring's share of each backend."""
    requests: int = 0
    failed: int = 0
    retried: int = 0
    """Requests the gateway sent to a second node (before health checks
    took the stopped backend out of the ring)."""
    home: dict[str, str] = field(default_factory=dict)
    """The backend each user was on before the stop."""
    sticky: bool = False
    """Whether every user stayed on one backend before the stop."""
    expected: list[str] = field(default_factory=list)
    """The stopped backend's users."""
    moved: list[str] = field(default_factory=list)
    """Users served by another backend than their home while it was down."""
    returned: list[str] = field(default_factory=list)
    """Moved users served by their home again after its return."""
    strayed: list[str] = field(default_factory=list)
    """Users served by another backend than their home after its return."""
    sessions_kept: list[str] = field(default_factory=list)
    """Users not on the stopped backend whose session counted on unbroken."""
    stopped_at: float | None = None
    down_at: float | None = None
    """When health checks took the stopped backend out of the ring."""
    restarted_at: float | None = None
    back_at: float | None = None
    """When health checks put it back."""
    ended_at: float = 0.0
    timeline: list[tuple[float, str]] = field(default_factory=list)

    @property
    def others(self) -> list[str]:
        """Users whose home is not the stopped backend."""
        return sorted(u for u, node in self.home.items() if node != STOPPED)

    @property
    def checks(self) -> dict[str, bool]:
        """Each claim of the demo and whether it held."""
        return {
            "every user stayed on one backend before the stop": self.sticky,
            "no request failed": self.requests > 0 and self.failed == 0,
            "only the stopped backend's users moved":
                bool(self.expected) and self.moved == self.expected,
            "the stopped backend came back": self.back_at is not None,
            "exactly those users returned":
                self.returned == self.expected and not self.strayed,
            "everyone else kept their session": self.sessions_kept == self.others,
        }

    @property
    def ok(self) -> bool:
        """Whether every check held."""
        return all(self.checks.values())

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the result."""
        return {
            "ok": self.ok,
            "checks": self.checks,
            "users": self.users,
            "backends": self.backends,
            "ownership": self.ownership,
            "stopped": STOPPED,
            "requests": self.requests,
            "failed": self.failed,
            "retried": self.retried,
            "users_per_backend": {node: sum(1 for h in self.home.values() if h == node)
                                  for node in self.backends},
            "expected": self.expected,
            "moved": self.moved,
            "returned": self.returned,
            "strayed": self.strayed,
            "sessions_kept": len(self.sessions_kept),
            "stopped_at": self.stopped_at,
            "down_at": self.down_at,
            "restarted_at": self.restarted_at,
            "back_at": self.back_at,
            "ended_at": self.ended_at,
            "timeline": [[round(t, 3), text] for t, text in self.timeline],
        }


async def _browse(session: aiohttp.ClientSession, url: str, user: str, log: list[Visit],
                  clock: Callable[[], float], stop: asyncio.Event, pause: tuple[float, float],
                  rng: random.Random) -> None:
    """One user: a request, a pause, until ``stop`` is set."""
    client_error = aiohttp_module().ClientError
    while not stop.is_set():
        started = clock()
        try:
            async with session.get(url, headers={"X-User-Id": user}) as response:
                if response.status == 200:
                    data = await response.json()
                    log.append(Visit(started, data["backend"], data["session"], data["visits"]))
                else:
                    log.append(Visit(started, None, error=f"HTTP {response.status}"))
        except (client_error, TimeoutError, ValueError) as exc:
            log.append(Visit(started, None, error=f"{type(exc).__name__}: {exc}"))
        try:
            await asyncio.wait_for(stop.wait(), rng.uniform(*pause))
        except TimeoutError:
            pass


async def run_demo(duration: float = 30.0, users: int = 60,
                   out: Callable[[str], None] | None = print) -> DemoResult:
    """Run the demo for about ``duration`` seconds with ``users`` users,
    printing the timeline through ``out`` (None: silent)."""
    if not duration > 0 or users < len(BACKENDS):
        raise ValueError("duration must be positive and users at least 3")
    return await _DemoRun(duration, users, out).run()


class _DemoRun:
    """One run of the scenario: its backends, gateway and users, and the
    result its phases fill in."""

    def __init__(self, duration: float, users: int, out: Callable[[str], None] | None) -> None:
        self.warm, self.outage, self.recovery = 0.3 * duration, 0.4 * duration, 0.3 * duration
        # Requests lost to a slow machine do not make the run longer than this.
        self.grace = max(10.0, duration)
        self.backends = {name: SessionBackend(name) for name in BACKENDS}
        self.result = DemoResult(users=users, backends={}, ownership={})
        self.say = Timeline(self.result, out)
        self.logs: dict[str, list[Visit]] = {f"user-{i:03d}": [] for i in range(1, users + 1)}
        self.gateway: Gateway | None = None
        self.stop = asyncio.Event()
        self.tasks: list[asyncio.Task[None]] = []

    async def run(self) -> DemoResult:
        """Start everything, run the three phases, shut down, tally."""
        aiohttp = aiohttp_module()
        failure_log = FailureLog(self.say)
        chash_logger = logging.getLogger("chash")
        chash_logger.addHandler(failure_log)
        try:
            gateway, url = await self._start()
            timeout = aiohttp.ClientTimeout(total=30.0)
            async with aiohttp.ClientSession(timeout=timeout) as session:
                self._start_users(session, url)
                await self._before_the_stop()
                await self._while_stopped()
                await self._after_the_return(gateway)
                self.stop.set()
                await asyncio.gather(*self.tasks)
                self.tasks.clear()
            self.result.retried = gateway.counters.snapshot().retries
        finally:
            await self._shut_down()
            chash_logger.removeHandler(failure_log)
        self._tally()
        self.result.ended_at = self.say("users stop; gateway and backends shut down")
        return self.result

    async def _start(self) -> tuple[Gateway, str]:
        """The backends, then the gateway in front of them; its URL."""
        from chash.gateway import Gateway, GatewayConfig

        for backend in self.backends.values():
            await backend.start()
        result = self.result
        result.backends = {name: b.address for name, b in self.backends.items()}
        self.say("backends " + ", ".join(f"{n} on {b.address}" for n, b in self.backends.items())
                 + ", each keeping its users' sessions in memory")
        self.gateway = gateway = Gateway(result.backends, GatewayConfig(
            key="header:X-User-Id", health_interval=HEALTH_INTERVAL,
            health_timeout=HEALTH_TIMEOUT, connect_timeout=2.0, read_timeout=10.0,
            metrics=False), on_change=HealthLog(self.say, result, STOPPED))
        url = await gateway.start()
        result.ownership = gateway.router.ownership()
        self.say(f"gateway on {url}: key header:X-User-Id, a ring of "
                 f"{plural(len(gateway.router), 'node')} x "
                 f"{plural(getattr(gateway.router, 'virtual_node_count', 0), 'virtual node')}, "
                 f"health checks "
                 f"every {HEALTH_INTERVAL:g} s")
        return gateway, url

    def _start_users(self, session: aiohttp.ClientSession, url: str) -> None:
        """One browsing task per user, each with its own seeded pauses."""
        pause = (0.15, 0.35)
        for i, (name, log) in enumerate(self.logs.items()):
            self.tasks.append(asyncio.create_task(_browse(
                session, url + "/cart", name, log, self.say.now, self.stop, pause,
                random.Random(i))))
        self.say(f"{plural(self.result.users, 'user')} start browsing, each sending a request "
                 f"every {pause[0]:g}-{pause[1]:g} s")

    async def _served_everyone_since(self, since: float) -> None:
        """Wait (up to the grace time) until every user has sent a request
        after ``since``."""
        await until(lambda: all(any(v.started > since for v in log)
                                 for log in self.logs.values()), self.grace)

    async def _before_the_stop(self) -> None:
        """Phase 1: everyone on their own backend."""
        result, logs = self.result, self.logs
        await asyncio.sleep(self.warm)
        await until(lambda: all(any(v.backend for v in log) for log in logs.values()),
                     self.grace)
        before = self.say.now()
        result.sticky = True
        for name, log in logs.items():
            served = {v.backend for v in log if v.backend and v.started < before}
            result.home[name] = min(served) if served else "?"
            result.sticky = result.sticky and len(served) == 1
        counts = ", ".join(f"{n} {plural(sum(1 for h in result.home.values() if h == n), 'user')}"
                           for n in BACKENDS)
        done = sum(len(log) for log in logs.values())
        failed = sum(1 for log in logs.values() for v in log if v.backend is None)
        self.say(("every user stayed on one backend: " if result.sticky
                  else "some users were served by several backends: ")
                 + f"{counts} ({plural(done, 'request')}, {failed:,} failed)")
        result.expected = sorted(u for u, h in result.home.items() if h == STOPPED)

    async def _while_stopped(self) -> None:
        """Phase 2: the backend stops; only its users move."""
        result = self.result
        stopped_at = result.stopped_at = self.say(
            f"backend {STOPPED} stops; its "
            + ("1 user's session goes" if len(result.expected) == 1
               else f"{len(result.expected)} users' sessions go")
            + " with it")
        await self.backends[STOPPED].stop()
        await asyncio.sleep(self.outage)
        await self._served_everyone_since(stopped_at)
        restart = self.say.now()
        went: Counter[str] = Counter()
        for name, log in self.logs.items():
            during = {v.backend for v in log if v.backend and stopped_at < v.started < restart}
            if during - {result.home[name]}:
                result.moved.append(name)
                went.update(during - {result.home[name]})
        stayed = result.users - len(result.moved)
        self.say(f"while {STOPPED} was down {plural(len(result.moved), 'user')} moved"
                 + (f", exactly {STOPPED}'s {len(result.expected)}" if result.moved
                    == result.expected else f" ({STOPPED} had {len(result.expected)})")
                 + " (to " + ", ".join(f"{n} {c}" for n, c in sorted(went.items()))
                 + f"); the other {stayed} stayed where they were")

    async def _after_the_return(self, gateway: Gateway) -> None:
        """Phase 3: it restarts, and exactly its users come back."""
        result = self.result
        await self.backends[STOPPED].start()
        restarted_at = result.restarted_at = self.say(
            f"backend {STOPPED} restarts on the same port, with empty memory")
        came_back = await until(lambda: STOPPED in gateway.router, self.grace)
        back = self.say.now()
        if not came_back:
            self.say(f"{STOPPED} was not back in the ring after {self.grace:g} s")
        await asyncio.sleep(max(0.0, self.recovery - (back - restarted_at)))
        await self._served_everyone_since(back)
        end = self.say.now()
        for name, log in self.logs.items():
            after = {v.backend for v in log if v.backend and back < v.started < end}
            if after - {result.home[name]}:
                result.strayed.append(name)
            elif name in result.moved and after == {result.home[name]}:
                result.returned.append(name)
        self.say(f"{len(result.returned)} of {STOPPED}'s {plural(len(result.expected), 'user')} "
                 f"{'is' if len(result.returned) == 1 else 'are'} back on {STOPPED}; "
                 + ("nobody else moved" if not result.strayed
                    else f"{plural(len(result.strayed), 'user')} "
                         f"{'is' if len(result.strayed) == 1 else 'are'} elsewhere"))

    async def _shut_down(self) -> None:
        """Users, then the gateway, then the backends, whatever happened."""
        self.stop.set()
        for task in self.tasks:
            task.cancel()
        if self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)
        if self.gateway is not None:
            await self.gateway.stop()
        for backend in self.backends.values():
            await backend.stop()

    def _tally(self) -> None:
        """Requests, failures, and whose session counted on unbroken."""
        result = self.result
        visits = [v for log in self.logs.values() for v in log]
        result.requests = len(visits)
        result.failed = sum(1 for v in visits if v.backend is None)
        for name in result.others:
            counts_up = [v.visits for v in self.logs[name] if v.backend]
            sessions = {v.session for v in self.logs[name] if v.backend}
            if len(sessions) == 1 and counts_up == list(range(1, len(counts_up) + 1)):
                result.sessions_kept.append(name)


def render_figures(result: DemoResult) -> str:
    """The figures and the verdict, as printed at the end of the run."""
    others = result.others
    share = result.ownership.get(STOPPED, 0.0)
    rows = [
        ("requests", f"{result.requests:,}", ""),
        ("failed requests", f"{result.failed:,}", ""),
        ("retried on the next node", f"{result.retried:,}",
         f"before health checks took {STOPPED} out"),
        (f"users moved when {STOPPED} stopped", f"{len(result.moved)} of {result.users}",
         f"{STOPPED} owns {share:.1%} of the ring"),
        (f"users back on {STOPPED}", f"{len(result.returned)} of {len(result.expected)}", ""),
        ("sessions kept", f"{len(result.sessions_kept)} of {len(others)}",
         f"users not on {STOPPED}"),
    ]
    if result.down_at is not None and result.stopped_at is not None:
        rows.append((f"{STOPPED} out of the ring after", f"{result.down_at - result.stopped_at:.1f} s",
                     ""))
    if result.back_at is not None and result.restarted_at is not None:
        rows.append((f"{STOPPED} back in the ring after",
                     f"{result.back_at - result.restarted_at:.1f} s", "after its restart"))
    lines = ["", "figures"]
    for label, value, note in rows:
        lines.append(f"  {label:<31}{value:>10}" + (f"   ({note})" if note else ""))
    lines.append("")
    for check, held in result.checks.items():
        lines.append(f"  [{'ok' if held else 'FAILED'}] {check}")
    lines += ["", "result: " + ("OK" if result.ok else "FAILED")]
    return "\n".join(lines)
