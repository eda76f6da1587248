"""The ``chash demo --rooms`` scenario: game rooms over WebSocket through a
backend's death.

Everything runs in one process on 127.0.0.1:

1. three chat servers (``RoomBackend``), ``a``, ``b`` and ``c``, each
   keeping its rooms in memory: who is in them;
2. a ``chash.gateway.Gateway`` in front, routing by the ``room`` query
   parameter, health-checking them twice a second, with
   ``on_ring_change="close"``;
3. players, a few per room, each joining its room over WebSocket through
   the gateway and saying something every fraction of a second; whoever
   loses the connection joins again after a short pause.

Once every room is on its node, backend ``b`` dies: its connections reset,
its rooms gone.  Its rooms' players join again, and the gateway sends them
all to the next node of their room's preference list: each room lands on
one new node, its players together.  No other room's player notices.
Then ``b`` comes back, empty; once health checks put it back in the ring,
the gateway closes the tunnels of the rooms whose owner it is again with
close code 1012 (Service Restart), and their players join again on ``b``,
together.  The run prints a timeline as it goes and the checks at the end;
``run_rooms_demo()`` returns them as a ``RoomsResult``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from chash._text import plural
from chash.demo.backends import RoomBackend, aiohttp_module
from chash.demo.timeline import FailureLog, HealthLog, Timeline, until

if TYPE_CHECKING:
    import aiohttp

    from chash.gateway import Gateway

__all__ = ["Player", "RoomsResult", "render_rooms", "run_rooms_demo"]

BACKENDS = ("a", "b", "c")
DIED = "b"
HEALTH_INTERVAL = 0.5
HEALTH_TIMEOUT = 1.0
#: Players per room.
PER_ROOM = 5
#: Seconds between two things a player says.
TALK = (0.3, 0.6)
#: Seconds a player waits before joining again.
REJOIN = (0.1, 0.3)


@dataclass
class Player:
    """What one player saw: when it joined which node, when its
    connection closed and with which code, what it heard from whom."""

    name: str
    room: str
    joins: list[tuple[float, str]] = field(default_factory=list)
    closes: list[tuple[float, int | None]] = field(default_factory=list)
    heard: list[tuple[float, str]] = field(default_factory=list)
    """``(when, who said it)`` for each thing heard from another player."""
    failures: int = 0
    """Joins that failed (no answer, or not a 101)."""

    def node_at(self, when: float) -> str | None:
        """The node of the last join before ``when``."""
        nodes = [node for t, node in self.joins if t <= when]
        return nodes[-1] if nodes else None

    def joins_between(self, start: float, end: float) -> list[str]:
        """The nodes joined between ``start`` and ``end``."""
        return [node for t, node in self.joins if start < t <= end]


@dataclass
class RoomsResult:
    """What a rooms run measured.  Times are seconds since the start."""

    players: int
    rooms: dict[str, list[str]] = field(default_factory=dict)
    """``{room: its players}``."""
    backends: dict[str, str] = field(default_factory=dict)
    owner: dict[str, str] = field(default_factory=dict)
    """Each room's node before the death (the ring's owner of the room)."""
    on_one_node: bool = False
    """Whether every room's players were on its owner before the death."""
    talking: bool = False
    """Whether every player heard every other player of its room."""
    expected: list[str] = field(default_factory=list)
    """The dead backend's rooms."""
    moved: dict[str, list[str]] = field(default_factory=dict)
    """``{room: nodes its players joined}`` for the rooms whose players
    joined again while the backend was dead."""
    next_node: dict[str, str] = field(default_factory=dict)
    """Each of the dead backend's rooms' next node on the ring."""
    disturbed: list[str] = field(default_factory=list)
    """Other rooms with a player whose connection closed before the end."""
    returned: list[str] = field(default_factory=list)
    """The dead backend's rooms whose players all joined it again after its
    return, each closed by the gateway with 1012."""
    died_at: float | None = None
    down_at: float | None = None
    restarted_at: float | None = None
    back_at: float | None = None
    ended_at: float = 0.0
    timeline: list[tuple[float, str]] = field(default_factory=list)

    @property
    def checks(self) -> dict[str, bool]:
        """Each claim of the demo and whether it held."""
        return {
            "every room's players were together on its node": self.on_one_node,
            "players heard the others of their room": self.talking,
            "only the dead backend's rooms moved":
                bool(self.expected) and sorted(self.moved) == self.expected,
            "each moved room's players joined one new node together":
                bool(self.moved) and all(nodes == [self.next_node[room]]
                                         for room, nodes in self.moved.items()),
            "no other room noticed": not self.disturbed,
            "the dead backend came back": self.back_at is not None,
            "its rooms came back to it together (1012)": self.returned == self.expected,
        }

    @property
    def ok(self) -> bool:
        """Whether every check held."""
        return all(self.checks.values())

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the result."""
        return {
            "ok": self.ok, "checks": self.checks, "players": self.players,
            "rooms": self.rooms, "backends": self.backends, "owner": self.owner,
            "died": DIED, "expected": self.expected, "moved": self.moved,
            "next_node": self.next_node, "disturbed": self.disturbed,
            "returned": self.returned, "died_at": self.died_at, "down_at": self.down_at,
            "restarted_at": self.restarted_at, "back_at": self.back_at,
            "ended_at": self.ended_at,
            "timeline": [[round(t, 3), text] for t, text in self.timeline],
        }


async def _play(session: aiohttp.ClientSession, url: str, player: Player,
                clock: Callable[[], float], stop: asyncio.Event, rng: random.Random) -> None:
    """One player: join, talk and listen; join again when the connection
    ends, until ``stop`` is set."""
    aiohttp = aiohttp_module()
    text_type = aiohttp.WSMsgType.TEXT
    while not stop.is_set():
        try:
            async with session.ws_connect(f"{url}/room?room={player.room}",
                                          headers={"X-User-Id": player.name},
                                          heartbeat=None) as ws:
                joined = json.loads(await ws.receive_str(timeout=10))
                player.joins.append((clock(), joined["backend"]))
                talker = asyncio.ensure_future(_talk(ws, player, stop, rng))
                try:
                    async for message in ws:
                        if message.type is text_type:
                            said = json.loads(message.data)
                            if said.get("type") == "say" and said["from"] != player.name:
                                player.heard.append((clock(), said["from"]))
                finally:
                    talker.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await talker
                player.closes.append((clock(), ws.close_code))
        except (aiohttp.ClientError, TimeoutError, ValueError, KeyError):
            player.failures += 1
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), rng.uniform(*REJOIN))


async def _talk(ws: Any, player: Player, stop: asyncio.Event, rng: random.Random) -> None:
    """Say something now and then; leave the room once ``stop`` is set."""
    count = 0
    while not stop.is_set() and not ws.closed:
        count += 1
        await ws.send_str(f"{player.name} says {count}")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), rng.uniform(*TALK))
    if stop.is_set():
        await ws.close()


async def run_rooms_demo(duration: float = 30.0, players: int = 60,
                         out: Callable[[str], None] | None = print) -> RoomsResult:
    """Run the rooms demo for about ``duration`` seconds with ``players``
    players, ``PER_ROOM`` to a room (at least three rooms), printing the
    timeline through ``out`` (None: silent)."""
    if not duration > 0 or players < len(BACKENDS):
        raise ValueError("duration must be positive and players at least 3")
    return await _RoomsRun(duration, players, out).run()


class _RoomsRun:
    """One run of the rooms scenario."""

    def __init__(self, duration: float, players: int, out: Callable[[str], None] | None) -> None:
        self.warm, self.outage, self.recovery = 0.3 * duration, 0.4 * duration, 0.3 * duration
        self.grace = max(10.0, duration)
        self.backends = {name: RoomBackend(name) for name in BACKENDS}
        rooms = max(3, players // PER_ROOM)
        self.players = [Player(f"player-{i:03d}", f"room-{i % rooms + 1:02d}")
                        for i in range(players)]
        self.result = RoomsResult(players=players)
        for player in self.players:
            self.result.rooms.setdefault(player.room, []).append(player.name)
        self.say = Timeline(self.result, out)
        self.gateway: Gateway | None = None
        self.stop = asyncio.Event()
        self.tasks: list[asyncio.Task[None]] = []

    def _in(self, rooms: list[str] | set[str]) -> list[Player]:
        return [p for p in self.players if p.room in rooms]

    async def run(self) -> RoomsResult:
        """Start everything, run the phases, shut down."""
        aiohttp = aiohttp_module()
        failure_log = FailureLog(self.say)
        chash_logger = logging.getLogger("chash")
        chash_logger.addHandler(failure_log)
        try:
            gateway, url = await self._start()
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30.0)) \
                    as session:
                for i, player in enumerate(self.players):
                    self.tasks.append(asyncio.create_task(_play(
                        session, url, player, self.say.now, self.stop, random.Random(i))))
                sizes = {len(names) for names in self.result.rooms.values()}
                self.say(f"{plural(len(self.players), 'player')} join "
                         f"{plural(len(self.result.rooms), 'room')} over WebSocket ("
                         + ("" if len(sizes) == 1 else "up to ")
                         + f"{max(sizes)} to a room), each saying something every "
                         f"{TALK[0]:g}-{TALK[1]:g} s")
                await self._together(gateway)
                await self._death(gateway)
                await self._return(gateway)
                self.stop.set()
                await asyncio.gather(*self.tasks)
                self.tasks.clear()
        finally:
            await self._shut_down()
            chash_logger.removeHandler(failure_log)
        self.result.ended_at = self.say("players stop; gateway and backends shut down")
        return self.result

    async def _start(self) -> tuple[Gateway, str]:
        from chash.gateway import Gateway, GatewayConfig

        for backend in self.backends.values():
            await backend.start()
        result = self.result
        result.backends = {name: b.address for name, b in self.backends.items()}
        self.say("backends " + ", ".join(f"{n} on {b.address}" for n, b in self.backends.items())
                 + ", each keeping its chat rooms in memory")
        self.gateway = gateway = Gateway(result.backends, GatewayConfig(
            key="query:room", health_interval=HEALTH_INTERVAL, health_timeout=HEALTH_TIMEOUT,
            connect_timeout=2.0, read_timeout=10.0, metrics=False, on_ring_change="close",
            tunnel_close_grace=2.0), on_change=HealthLog(self.say, result, DIED))
        url = await gateway.start()
        self.say(f"gateway on {url}: key query:room, on a ring change the moved rooms' "
                 f"tunnels close (1012), health checks every {HEALTH_INTERVAL:g} s")
        return gateway, url

    async def _together(self, gateway: Gateway) -> None:
        """Phase 1: every room on its node, its players talking."""
        result = self.result
        await asyncio.sleep(self.warm)
        await until(lambda: all(p.joins for p in self.players), self.grace)
        result.owner = {room: gateway.router.get_target_node(room) or "?"
                        for room in result.rooms}
        await until(lambda: self._all_heard(0.0), self.grace)
        now = self.say.now()
        result.on_one_node = all(p.node_at(now) == result.owner[p.room] for p in self.players)
        result.talking = self._all_heard(0.0)
        rooms_on = {n: sorted(r for r, o in result.owner.items() if o == n) for n in BACKENDS}
        self.say(("every room is on one node, its players together: " if result.on_one_node
                  else "some rooms' players are split: ")
                 + ", ".join(f"{n} {plural(len(rooms_on[n]), 'room')}" for n in BACKENDS)
                 + ("; everyone hears their room" if result.talking else ""))
        result.expected = rooms_on[DIED]
        for room in result.expected:
            result.next_node[room] = gateway.router.get_preference_list(room, 2)[1]

    def _all_heard(self, since: float) -> bool:
        rooms = self.result.rooms
        return all({who for t, who in p.heard if t > since} >= set(rooms[p.room]) - {p.name}
                   for p in self.players)

    async def _death(self, gateway: Gateway) -> None:
        """Phase 2: the backend dies; its rooms move, each to one node."""
        result = self.result
        lost = self._in(result.expected)
        died_at = result.died_at = self.say(
            f"backend {DIED} dies, its connections reset: its "
            f"{plural(len(result.expected), 'room')} ({plural(len(lost), 'player')}) "
            "lose their node")
        await self.backends[DIED].die()
        await asyncio.sleep(self.outage)
        await until(lambda: all(p.joins_between(died_at, self.say.now()) for p in lost),
                    self.grace)
        end = self.say.now()
        for room in result.rooms:
            nodes = sorted({n for p in self._in([room]) for n in p.joins_between(died_at, end)})
            if nodes:
                result.moved[room] = nodes
        for room in result.expected:
            nodes = result.moved.get(room, [])
            spread = [t for p in self._in([room]) for t, _ in p.joins if died_at < t <= end]
            first, last = (f"{min(spread) - died_at:.1f}", f"{max(spread) - died_at:.1f}") \
                if spread else ("", "")
            took = "" if not spread else f", {first} s after {DIED} died" if first == last \
                else f", {first} to {last} s after {DIED} died"
            count = len(self._in([room]))
            self.say(f"{room}: its {plural(count, 'player')} joined again on "
                     + (" and ".join(nodes) or "nothing") + (" together" if count > 1 else "")
                     + took)
        others = len(result.rooms) - len(result.moved)
        self.say(f"while {DIED} was dead {plural(len(result.moved), 'room')} moved"
                 + (f", exactly {DIED}'s {len(result.expected)}"
                    if sorted(result.moved) == result.expected else
                    f" ({DIED} had {len(result.expected)})")
                 + f"; the other {plural(others, 'room')} never noticed")

    async def _return(self, gateway: Gateway) -> None:
        """Phase 3: the backend comes back; its rooms return to it together."""
        result = self.result
        await self.backends[DIED].start()
        restarted_at = result.restarted_at = self.say(
            f"backend {DIED} restarts on the same port, with no rooms")
        came_back = await until(lambda: DIED in gateway.router, self.grace)
        back = self.say.now()
        if not came_back:
            self.say(f"{DIED} was not back in the ring after {self.grace:g} s")
        lost = self._in(result.expected)
        await until(lambda: all(p.node_at(self.say.now()) == DIED for p in lost), self.grace)
        await asyncio.sleep(max(0.0, self.recovery - (self.say.now() - restarted_at)))
        end = self.say.now()
        for room in result.expected:
            players = self._in([room])
            # Closed by the gateway once the ring had the backend again
            # (which may be before this run's poll saw it there).
            restarted = all(any(t > restarted_at and code == 1012 for t, code in p.closes)
                            for p in players)
            if restarted and all(p.node_at(end) == DIED for p in players):
                result.returned.append(room)
        others = [p for p in self.players if p.room not in result.expected]
        result.disturbed = sorted({p.room for p in others if p.closes or len(p.joins) != 1})
        base = back if result.back_at is None else result.back_at
        rejoined = [max(0.0, t - base) for p in lost for t, node in p.joins
                    if t > restarted_at and node == DIED]
        when = (f" {min(rejoined):.1f} to {max(rejoined):.1f} s after it was back"
                if rejoined else "")
        self.say(f"the gateway closed the tunnels of {DIED}'s rooms with 1012: "
                 f"{len(result.returned)} of {plural(len(result.expected), 'room')} back on "
                 f"{DIED}{when}, each room's players together; "
                 + ("no other room noticed" if not result.disturbed
                    else f"{plural(len(result.disturbed), 'other room')} disturbed"))

    async def _shut_down(self) -> None:
        self.stop.set()
        for task in self.tasks:
            task.cancel()
        if self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)
        if self.gateway is not None:
            await self.gateway.stop()
        for backend in self.backends.values():
            await backend.stop()


def render_rooms(result: RoomsResult) -> str:
    """The checks and the verdict, as printed at the end of a rooms run."""
    lines = ["", "figures",
             f"  {'players':<31}{result.players:>10}",
             f"  {'rooms':<31}{len(result.rooms):>10}",
             f"  {f'rooms on {DIED}':<31}{len(result.expected):>10}"]
    if result.down_at is not None and result.died_at is not None:
        lines.append(f"  {f'{DIED} out of the ring after':<31}"
                     f"{f'{result.down_at - result.died_at:.1f} s':>10}")
    lines.append("")
    for check, held in result.checks.items():
        lines.append(f"  [{'ok' if held else 'FAILED'}] {check}")
    lines += ["", "result: " + ("OK" if result.ok else "FAILED")]
    return "\n".join(lines)
