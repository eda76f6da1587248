"""The bookkeeping of one instance in a shared ring, without any I/O.

The drivers (``chash.membership.sync_driver``, ``.async_driver``) perform
the store operations (``chash.membership.store``); this module and the
protocol built on it (``chash.membership.protocol``) know what to ask and
what a reply means: the settings every instance must share, the
operations' arguments, the ring read from the stored one
(``chash.membership.state``), the verdicts waiting to be sent, the outage
bookkeeping, and how a state is applied to the local router.

Invariants:

* the router holds exactly ``state.ring()`` (less the entries it rejects,
  skipped alike on every instance) once a state has been applied, and a
  state is applied only if it is newer than the one applied before
  (another epoch, or a higher version in the same epoch) unless the caller
  found the store itself went back, so a slow reader never rolls the
  router back;
* a node is in the ring iff the store holds it, no operator disabled it and
  the health verdicts did not take it out;
* at most one pending verdict per node: the latest;
* every unreadable entry is logged once per (key, node, value);
* with an ``AnchorRouter``, whose mapping depends on the order of changes,
  the router holds the record stamped for the version applied when there
  is one (``chash.membership.anchor``), so every instance routes alike.
"""

from __future__ import annotations

import json
import logging
import math
import secrets
import threading
import time
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from chash._chash import AnchorRouter, ConsistentHashRouter
from chash.membership.anchor import advance, converge, read_record, record
from chash.membership.settings import MembershipSettings, default_reporter
from chash.membership.state import (
    HealthVerdict,
    MembershipState,
    Outcome,
    Position,
    RingMissingError,
    StoredRing,
    text,
)
from chash.membership.store import Seed, Sweep, Vote, Write, WriteStamp

__all__ = ["MembershipCore", "SharedRouter", "check_router"]

logger = logging.getLogger("chash.membership")

#: The routers a shared ring keeps in step.
SharedRouter = ConsistentHashRouter | AnchorRouter


def check_router(router: object) -> SharedRouter:
    """``router`` if it is a ``chash.ConsistentHashRouter`` or a
    ``chash.AnchorRouter``; else TypeError."""
    if not isinstance(router, ConsistentHashRouter | AnchorRouter):
        raise TypeError("router must be a chash.ConsistentHashRouter or a chash.AnchorRouter, "
                        f"not {router!r}")
    return router


class MembershipCore:
    """State shared by a driver's threads or tasks; every method is quick
    and thread-safe.  ``outage_errors`` are the exceptions that mean the
    store is unreachable, ``auth_errors`` those that mean it refused us
    (both given by the store, which knows the client library), ``store_name``
    what log texts call the store; ``clock`` is
    the monotonic clock the outage watchdog reads, ``wall`` the wall clock
    ``stale_since`` is told in."""

    def __init__(self, router: SharedRouter, settings: MembershipSettings, *,
                 outage_errors: tuple[type[BaseException], ...] = (OSError,),
                 auth_errors: tuple[type[BaseException], ...] = (),
                 store_name: str = "the store",
                 clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time) -> None:
        """TypeError if ``router`` is not a ``ConsistentHashRouter`` or an
        ``AnchorRouter``; the settings were validated when they were made."""
        check_router(router)
        name = settings.name
        self.settings = settings
        self.router = router
        self.name = name
        self.reporter = settings.reporter or default_reporter()
        self.bootstrap = settings.bootstrap
        self.quorum = str(settings.quorum)
        self.vote_ttl = float(settings.vote_ttl)
        self.resync_interval = float(settings.resync_interval)
        self.outage_errors = outage_errors
        self.auth_errors = auth_errors
        #: The store's name in log texts and errors ("Redis", "etcd").
        self.store_name = store_name
        self.clock = clock
        self.wall = wall
        #: When the store last answered (monotonic, wall); when this core
        #: was made until it first does.
        self._answered = (clock(), wall())
        #: An exchange that takes longer than this counts as an outage.
        self.stall_after = max(2.0, 2 * self.resync_interval)
        #: Called with no argument after each change made to the router
        #: (``MembershipDriver.add_listener``), outside the lock.
        self.listeners: list[Callable[[], object]] = []
        hash_ = router.hash
        hash_name = hash_ if isinstance(hash_, str) else \
            f"{getattr(hash_, '__module__', '?')}.{getattr(hash_, '__qualname__', repr(hash_))}"
        vnodes = "" if isinstance(router, AnchorRouter) else \
            f"virtual_node_count={router.virtual_node_count} "
        self.config = (f"layout={router.layout} hash={hash_name} {vnodes}"
                       f"quorum={self.quorum} vote_ttl={self.vote_ttl:g}")
        #: The anchor record of the state applied (``chash.membership.anchor``),
        #: what ``repair`` puts back; None with another router.
        self._record: str | None = None
        #: Whether the router holds the record stamped for the state applied
        #: (adopted, stamped by this instance, or equal to the one stamped).
        self.canonical = False
        #: Whether the state applied last came one version after the one
        #: applied before it, in the same epoch, from that version's
        #: stamped record: one change made from the shared mapping.
        self.stepped = False
        #: Whether announcements are sharded (``StoredRing.sharded``); None
        #: until known.
        self.sharded: bool | None = None
        self._lock = threading.RLock()
        self._state: MembershipState | None = None
        self._fingerprint: tuple[Position, str] | None = None
        self._votes: dict[str, tuple[bool, str]] = {}
        self._outage: str | None = None
        self._mismatch_logged: str | None = None
        self._missing_logged = False
        self._cannot_listen_logged = False
        self._logged: set[tuple[str, str, str]] = set()
        self._foreign_digest_logged: tuple[Position, str] | None = None
        self._inflight: dict[int, float] = {}
        self._next_exchange = 0

    # -- what we know -------------------------------------------------------

    @property
    def state(self) -> MembershipState | None:
        """The last state applied, or None before the first sync."""
        return self._state

    @property
    def position(self) -> Position:
        """(epoch, version) of the last state applied."""
        state = self._state
        return (None, 0) if state is None else (state.epoch, state.version)

    def is_news(self, message: object) -> bool:
        """Whether an announcement ``epoch:version`` differs from our state."""
        epoch, _, version = text(message).rpartition(":")
        return (epoch, version) != tuple(map(str, self.position))

    def watched_nodes(self) -> dict[str, float]:
        """The nodes to health-check; the router's before the first sync."""
        state = self._state
        return dict(self.router.weights) if state is None else state.watched()

    @property
    def records(self) -> bool:
        """Whether the digest stamped for a version is the router's record
        (an ``AnchorRouter``), which instances adopt rather than compare."""
        return isinstance(self.router, AnchorRouter)

    def holds_stamp(self, position: Position) -> None:
        """Note that the router holds the digest stamped for ``position``
        (this instance stamped it, or stamped the same), if that is still
        the state applied."""
        with self._lock:
            if position == self.position:
                self.canonical = True

    def fingerprint(self) -> str:
        """``router.fingerprint()`` of the state applied (an anchor router's
        record, ``chash.membership.anchor``), computed once per state (it
        costs O(ring points))."""
        with self._lock:
            cached = self._fingerprint
            if cached is not None and cached[0] == self.position:
                return cached[1]
            router = self.router
            digest = record(router) if isinstance(router, AnchorRouter) \
                else router.fingerprint()
            self._fingerprint = (self.position, digest)
            return digest

    # -- reading replies ----------------------------------------------------

    def skipped(self, entries: Sequence[tuple[str, str, str]]) -> None:
        """Log each unreadable entry a store operation skipped, once."""
        for key, node, value in entries:
            self._bad_entry(key, node, value, "unreadable")

    def _bad_entry(self, key: str, node: str, value: str, why: str) -> None:
        entry = (key, node, value)
        with self._lock:
            if entry in self._logged:
                return
            self._logged.add(entry)
        logger.error("ring %s: skipped %s entry %s[%r] = %r", self.name, why, key, node, value,
                     extra={"ring": self.name, "key": key, "node": node, "value": value})

    def parse_verdict(self, node: str, raw: str) -> HealthVerdict:
        """A stored verdict (``StoredRing.down``: JSON written by the
        stores); an unreadable one still takes the node out (it is logged
        once)."""
        try:
            data = json.loads(raw)
            return HealthVerdict(reason=str(data.get("r") or "unhealthy"),
                                 votes=int(data.get("n", 0)), reporters=int(data.get("l", 0)),
                                 since=float(data.get("t", 0)) / 1000.0)
        except (ValueError, TypeError, AttributeError):
            self._bad_entry("down", node, raw, "unreadable")
            return HealthVerdict("unreadable verdict", 0, 0, 0.0)

    def read_state(self, stored: StoredRing) -> MembershipState:
        """The state of a stored ring.  Weights that are not positive finite
        numbers are skipped one by one (each logged once), so one bad entry
        never stops the others from being applied.  The nodes come in their
        add order (``add_order``)."""
        weights: dict[str, float] = {}
        for node, raw in stored.nodes.items():
            try:
                weight = float(raw)
            except ValueError:
                weight = math.nan
            if not math.isfinite(weight) or weight <= 0:
                self._bad_entry("nodes", node, raw, "unreadable")
                continue
            weights[node] = weight
        weights = {node: weights[node]
                   for node in self.add_order(weights, list(stored.order.items()))}
        down = {node: self.parse_verdict(node, raw) for node, raw in stored.down.items()}
        # A zone of a node the ring no longer holds (left by an instance
        # that keeps no zones) is no zone at all.
        zones = {node: zone for node, zone in stored.zones.items() if zone and node in weights}
        return MembershipState(
            epoch=stored.epoch, version=stored.version, config=stored.config,
            weights=types.MappingProxyType(weights),
            disabled=types.MappingProxyType(dict(stored.disabled)),
            down=types.MappingProxyType(down),
            zones=types.MappingProxyType(zones),
        )

    def add_order(self, nodes: Iterable[str],
                  sequences: Sequence[tuple[str, str]]) -> list[str]:
        """``nodes`` in the order they were added to the shared ring: by the
        add sequence the store keeps for each (``StoredRing.order``), after
        the nodes that have none, which are in id order (bytewise, as
        UTF-8).  A node has none on a ring written before sequences were
        stored, or when its entry is unreadable (not a positive integer;
        logged once).  The same on every instance, whatever order the store
        returns its entries in."""
        wanted = set(nodes)
        seq: dict[str, int] = {}
        for node, raw in sequences:
            if node not in wanted:
                continue  # no such node, or one whose weight was skipped
            if not raw.isascii() or not raw.isdigit() or len(raw) > 18 or int(raw) < 1:
                self._bad_entry("order", node, raw, "unreadable")
                continue
            seq[node] = int(raw)
        return sorted(wanted, key=lambda node: (
            node in seq, seq.get(node, 0), node.encode("utf-8", "surrogateescape")))

    # -- operator changes ---------------------------------------------------

    def weight_arg(self, node: str, weight: float) -> str:
        """Validate an add exactly as the router would; the weight as sent."""
        if not isinstance(node, str):
            raise TypeError(f"node must be str, not {type(node).__name__}")
        _check_utf8("node", node)
        router = self.router
        scratch: SharedRouter = AnchorRouter(hash=router.hash) \
            if isinstance(router, AnchorRouter) else \
            ConsistentHashRouter(router.virtual_node_count, hash=router.hash, layout=router.layout)
        scratch.add_service_node(node, weight)
        return repr(float(weight))

    @staticmethod
    def zone_arg(zone: object) -> str | None:
        """Validate an add's zone (None, or a str encodable as UTF-8; ''
        clears it); the zone as sent."""
        if zone is None:
            return None
        if not isinstance(zone, str):
            raise TypeError(f"zone must be a str or None, not {type(zone).__name__}")
        _check_utf8("zone", zone)
        return zone

    def write_call(self, op: str, node: str, value: str = "", force: bool = False,
                   zone: str | None = None) -> Write:
        """The ``Write`` of an operator's change, with the stamp of the
        version it makes (``stamp_after``) when there is one."""
        return Write(op, node, self.config, value, force, zone, self.stamp_after(op, node, value))

    def stamp_after(self, op: str, node: str, value: str = "") -> WriteStamp | None:
        """The record an anchor router holds after the change (``op``,
        ``node``, ``value``, as ``write_call`` takes them), computed from the
        record stamped for the state applied and the ring the change leaves
        (``MembershipState.after_write``, ``anchor.advance``): what every
        instance stepping from that record computes, so the store may stamp
        it with the change.  None with another router, before a state is
        applied, when the router does not hold the stamped record of the
        state applied (``canonical``: it stamps nothing then either), or
        when the store would refuse the change."""
        with self._lock:
            router, state, held = self.router, self._state, self._record
            if not isinstance(router, AnchorRouter) or state is None or state.epoch is None \
                    or held is None or not self.canonical:
                return None
            after = state.after_write(op, node, value)
            if after is None:
                return None
            digest = advance(held, router.hash,
                             {n: w for n, w in state.ring().items() if w == 1.0}, after.ring())
            if digest is None:
                return None
            return WriteStamp(state.epoch, state.version, digest)

    def may_seed(self, damaged: bool) -> bool:
        """Whether this instance may create the ring (it synced, or was told
        to bootstrap) or replace a damaged one (only if it synced)."""
        return self._state is not None or (self.bootstrap and not damaged)

    def missing_error(self, damage: str | None) -> RingMissingError:
        """The error an operator call raises when it may not create the ring."""
        if damage is None:
            return RingMissingError(f"ring {self.name!r} is missing in {self.store_name}; an instance "
                                    "that holds it will restore it")
        return RingMissingError(f"ring {self.name!r} is damaged in {self.store_name} ({damage}); an "
                                "instance that holds it will restore it")

    def note_missing(self, damage: str | None) -> None:
        """Log, once until the ring is seen again, that this instance waits
        for another one to restore the ring."""
        if self._missing_logged:
            return
        self._missing_logged = True
        logger.warning("%s; waiting for it (this instance never synced; give "
                       "bootstrap=True to create a new ring)", self.missing_error(damage),
                       extra={"ring": self.name})

    def refused(self, in_service: int, removed: int, op: str, node: str) -> ValueError:
        """Log a refused mass removal; the error the operator call raises."""
        logger.warning("ring %s: refused to %s %r: it would take %d of the %d nodes in "
                       "service out at once; pass force=True to do it anyway", self.name, op,
                       node, removed, in_service, extra={"ring": self.name})
        return ValueError(f"ring {self.name!r}: {op} {node!r} would take {removed} of the "
                          f"{in_service} nodes in service out at once; pass force=True")

    def committed(self, outcome: Outcome, op: str, node: str) -> None:
        """Log a forced mass removal that was written."""
        in_service, removed = outcome.in_service, outcome.removed
        if removed * 2 > in_service:
            logger.warning("ring %s: %s %r took %d of the %d nodes in service out at "
                           "once (forced)", self.name, op, node, removed, in_service,
                           extra={"ring": self.name})

    def other_config(self, stored: str) -> ValueError:
        """The error for a ring made with other shared settings."""
        return ValueError(
            f"ring {self.name!r} in {self.store_name} was made with {stored!r}, but this "
            f"instance has {self.config!r}; every instance must use the same router "
            "settings, quorum and vote_ttl (or another ring name)")

    # -- seeding ------------------------------------------------------------

    def seed_call(self, restore: bool, stored_version: int = 0) -> Seed:
        """The ``Seed`` of the last state applied, or of the router's nodes
        if there is none, under a new epoch and the next version; the
        nodes in the order this instance holds them (the shared add order,
        or the router's), which the store keeps."""
        with self._lock:
            state = self._state
            if state is None:
                weights: Mapping[str, float] = self.router.weights
                disabled: Mapping[str, str] = {}
                down: Mapping[str, HealthVerdict] = {}
                zones: Mapping[str, str] = self.router.zones \
                    if isinstance(self.router, ConsistentHashRouter) else {}
            else:
                weights, disabled, down = state.weights, state.disabled, state.down
                zones = state.zones
            version = max(self.position[1], stored_version) + 1
            return Seed(secrets.token_hex(8), version, self.config, restore,
                        nodes={node: repr(float(weight)) for node, weight in weights.items()},
                        disabled=dict(disabled), down=dict(down),
                        zones={node: zone for node, zone in zones.items() if node in weights})

    def seeded(self, created: bool, damage: str | None) -> None:
        """Log that this instance created (or re-created) the ring in the store."""
        if not created:
            return
        if self._state is None:
            logger.info("ring %s created in %s from the router's %d nodes (bootstrap)",
                        self.name, self.store_name, len(self.router), extra={"ring": self.name})
        else:
            logger.warning("ring %s was %s in %s; restored it from the last known ring, "
                           "version %d, %d nodes", self.name,
                           "missing" if damage is None else f"damaged ({damage})", self.store_name,
                           self._state.version, len(self._state.weights),
                           extra={"ring": self.name})

    # -- applying -----------------------------------------------------------

    def check_config(self, state: MembershipState) -> None:
        """ValueError if the store's shared settings differ from ours."""
        if state.config != self.config:
            raise self.other_config(state.config)

    def apply(self, state: MembershipState, *, rollback: bool = False,
              force: bool = False, stamp: str | None = None) -> bool:
        """Make the router hold ``state.ring()`` if ``state`` is newer than
        the last one applied; return whether it was applied.  ValueError
        (nothing applied) if the shared settings differ.

        ``rollback`` applies an older version of the same epoch too (the
        store itself went back: a failover lost acknowledged writes), and
        ``force`` the same version (the store holds another ring at the
        version applied), since the store, not this instance, is the
        authority.  ``stamp`` is the digest stamped for the version, if
        any: an anchor router adopts the record it holds.
        """
        with self._lock:
            current = self._state
            self._missing_logged = False
            if current is not None and state.epoch == current.epoch:
                if state.version == current.version and not force:
                    return False
                if state.version < current.version and not rollback:
                    return False
            if rollback and current is not None and state.epoch == current.epoch \
                    and state.version < current.version:
                logger.warning("ring %s went back from version %d to %d in %s (a failover "
                               "lost writes?); following it", self.name, current.version,
                               state.version, self.store_name, extra={"ring": self.name})
            self.check_config(state)
            before = len(self.router)
            self.stepped = current is not None and state.epoch == current.epoch and \
                state.version == current.version + 1 and self.canonical
            self.canonical = False
            self._state = state
            added, removed, reweighed = self._converge(state, stamp)
        if removed and len(removed) * 2 > before:
            logger.warning("ring %s at version %d: %d of %d nodes removed at once",
                           self.name, state.version, len(removed), before,
                           extra={"ring": self.name, "version": state.version})
        if added or removed or reweighed:
            logger.info("ring %s at version %d: %s", self.name, state.version,
                        _describe(added, removed, reweighed),
                        extra={"ring": self.name, "version": state.version})
            self._changed()
        return True

    def repair(self) -> None:
        """Undo any change made to the router behind the membership's back."""
        with self._lock:
            state = self._state
            if state is None:
                return
            if isinstance(self.router, AnchorRouter) and \
                    record(self.router) == self._record:
                return
            added, removed, reweighed = self._converge(state, self._record)
        if added or removed or reweighed:
            logger.warning("router of ring %s differed from the shared ring; repaired: %s",
                           self.name, _describe(added, removed, reweighed),
                           extra={"ring": self.name})
            self._changed()

    def _changed(self) -> None:
        """Call every listener (the router changed); their errors are logged."""
        for listener in list(self.listeners):
            try:
                listener()
            except Exception:
                logger.exception("a ring listener of ring %s failed", self.name,
                                  extra={"ring": self.name})

    def foreign_digest(self, digest: str) -> None:
        """Log, once per version, that the store holds a digest this instance
        cannot reproduce from the same content (routing depends on more than
        the ring's content: another build or layout order)."""
        key = (self.position, digest)
        if self._foreign_digest_logged == key:
            return
        self._foreign_digest_logged = key
        logger.error("ring %s at version %d: %s holds digest %s but this instance "
                     "routes with %s for the same nodes", self.name, self.position[1],
                     self.store_name, digest,
                     self.fingerprint(), extra={"ring": self.name})

    def _converge(self, state: MembershipState,
                  stamp: str | None = None) -> tuple[list[str], list[str], list[str]]:
        if isinstance(self.router, AnchorRouter):
            return self._converge_anchor(self.router, state, stamp)
        return self._converge_ring(self.router, state)

    def _converge_anchor(self, router: AnchorRouter, state: MembershipState,
                         stamp: str | None) -> tuple[list[str], list[str], list[str]]:
        """The record stamped for the version, adopted whole if it holds
        the ring's nodes; else the router moved there from where it is
        (``anchor.converge``), to be stamped."""
        wanted = state.ring()
        before = router.nodes
        found = read_record(stamp, {n: w for n, w in wanted.items() if w == 1.0})
        if found is not None:
            if record(router) != stamp:
                router.__setstate__((router.hash, found[0], found[1]))
            self.canonical = True
            rejected: list[tuple[str, float, Exception]] = [
                (n, w, ValueError(f"weight must be 1, not {w!r}"))
                        for n, w in wanted.items() if w != 1.0]
        else:
            _, _, rejected = converge(router, wanted)
        for node, weight, exc in rejected:
            self._bad_entry("nodes", node, repr(weight), f"rejected ({exc})")
        after = set(router.nodes)
        self._fingerprint = None
        self._record = record(router)
        return ([n for n in router.nodes if n not in set(before)],
                [n for n in before if n not in after], [])

    def _converge_ring(self, router: ConsistentHashRouter,
                       state: MembershipState) -> tuple[list[str], list[str], list[str]]:
        # Adds and reweighs before removals, so that a non-empty ring never
        # passes through empty.  Each step is one C call under the GIL.
        wanted = state.ring()
        present = router.weights
        if router.layout in ORDERED_LAYOUTS and (
                list(present.items()) != list(wanted.items()) or not _numbered_in_order(router)):
            # A shared point goes to the node added first: every instance
            # holds the nodes in the shared add order (the sequences the
            # store keeps, see add_order), swapped in whole.  In the haproxy
            # layout the ids, which key the points, are those HAProxy gives
            # a configuration listing the nodes in that order: 1, 2, 3...
            try:
                router._replace_nodes(list(wanted.items()))
            except (TypeError, ValueError, OverflowError, MemoryError) as exc:
                logger.error("ring %s: cannot rebuild the router in the shared order: %s; "
                             "applying node by node", self.name, exc, extra={"ring": self.name})
            else:
                return ([n for n in wanted if n not in present], [n for n in present if n not in wanted],
                        [n for n in wanted if n in present and present[n] != wanted[n]])
        added: list[str] = []
        removed: list[str] = []
        reweighed: list[str] = []
        for node, weight in wanted.items():
            old = present.get(node)
            if old == weight:
                continue
            try:
                router.add_service_node(node, weight)
            except (TypeError, ValueError, OverflowError, MemoryError) as exc:
                # Every instance fails the same way on the same entry, so
                # the rings stay identical.
                self._bad_entry("nodes", node, repr(weight), f"rejected ({exc})")
                continue
            (added if old is None else reweighed).append(node)
        for node in present:
            if node not in wanted:
                router.discard_service_node(node)
                removed.append(node)
        if added or removed or reweighed:
            self._fingerprint = None
        return added, removed, reweighed

    # -- health verdicts ----------------------------------------------------

    def queue_vote(self, node: str, down: bool, reason: str = "") -> None:
        """Remember this instance's latest verdict on ``node`` for sending."""
        with self._lock:
            self._votes[node] = (down, reason)

    def has_votes(self) -> bool:
        """Whether verdicts wait to be sent."""
        return bool(self._votes)

    def take_votes(self) -> dict[str, tuple[bool, str]]:
        """The verdicts waiting, which are no longer waiting."""
        with self._lock:
            votes, self._votes = self._votes, {}
        return votes

    def requeue_votes(self, votes: Mapping[str, tuple[bool, str]]) -> None:
        """Put back verdicts that could not be sent, unless newer ones came."""
        with self._lock:
            for node, vote in votes.items():
                self._votes.setdefault(node, vote)

    def vote_call(self, votes: Mapping[str, tuple[bool, str]]) -> Vote:
        """The ``Vote`` of this instance's verdicts ``votes``."""
        return Vote(self.reporter, self.vote_ttl_ms, self.quorum, dict(votes))

    def sweep_call(self, withdraw: bool = False) -> Sweep:
        """The ``Sweep``; ``withdraw`` drops every vote of this instance."""
        return Sweep(self.vote_ttl_ms, self.quorum, self.reporter if withdraw else None)

    @property
    def vote_ttl_ms(self) -> int:
        """``vote_ttl`` in whole milliseconds (at least 1), as the stores count it."""
        return max(1, round(self.vote_ttl * 1000))

    # -- outages ------------------------------------------------------------

    def is_outage(self, exc: BaseException) -> bool:
        """Whether ``exc`` means the store is unreachable or refuses us."""
        return isinstance(exc, self.outage_errors + self.auth_errors)

    def is_refusal(self, exc: BaseException) -> bool:
        """Whether ``exc`` is an authentication or permission error."""
        message = str(exc)
        return isinstance(exc, self.auth_errors) or "NOPERM" in message \
            or "no permissions" in message or "user executing the script can't" in message

    @property
    def connected(self) -> bool:
        """False from a failed exchange with the store to the next good one, and
        while an exchange has waited longer than ``stall_after``."""
        return self._outage is None and not self._stalled()

    def _stalled(self) -> bool:
        inflight = list(self._inflight.values())
        return bool(inflight) and self.clock() - min(inflight) > self.stall_after

    def exchange_started(self) -> int:
        """Note an exchange with the store beginning; returns its ticket."""
        with self._lock:
            ticket = self._next_exchange
            self._next_exchange += 1
            self._inflight[ticket] = self.clock()
        return ticket

    def answered(self) -> None:
        """Note that the store answered a call (whatever it said)."""
        self._answered = (self.clock(), self.wall())

    @property
    def stale_seconds(self) -> float:
        """0.0 while the store is reachable; else seconds since it last
        answered (since this instance started, if it never did): how old
        the ring routed on may be."""
        if self.connected:
            return 0.0
        return max(0.0, self.clock() - self._answered[0])

    @property
    def stale_since(self) -> float | None:
        """None while the store is reachable; else when it last answered,
        in seconds since the epoch (the wall clock)."""
        if self.connected:
            return None
        return self._answered[1]

    def exchange_ended(self, ticket: int) -> None:
        """Note an exchange ending, whatever its outcome."""
        with self._lock:
            self._inflight.pop(ticket, None)

    def watch(self) -> None:
        """Called regularly by a driver: an exchange stuck for longer than
        ``stall_after`` starts an outage (logged), so that a hung store and
        a client retrying for long do not look like success."""
        if self._outage is None and self._stalled():
            self.outage(TimeoutError(f"no answer for {self.stall_after:g}s"))

    def outage(self, exc: BaseException) -> None:
        """Note a failed exchange; log it if it starts an outage."""
        refused = self.is_refusal(exc)
        with self._lock:
            starting = self._outage is None
            self._outage = f"{type(exc).__name__}: {exc}"
        if starting:
            logger.log(logging.ERROR if refused else logging.WARNING,
                       "%s %s for ring %s (%s); routing on the last known ring, version "
                       "%d, until it returns", self.store_name, "refuses this instance" if refused
                       else "unreachable", self.name, self._outage, self.position[1],
                       extra={"ring": self.name})

    def reconnected(self) -> None:
        """Note a good exchange; log it if it ends an outage."""
        with self._lock:
            ending, self._outage = self._outage is not None, None
        if ending:
            logger.warning("%s reachable again for ring %s; in step at version %d",
                           self.store_name, self.name, self.position[1], extra={"ring": self.name})

    def cannot_listen(self, why: str) -> None:
        """Log once that announcements cannot be received (the checks every
        ``resync_interval`` still apply every change)."""
        if self._cannot_listen_logged:
            return
        self._cannot_listen_logged = True
        logger.warning("ring %s: %s; changes arrive by the check every %gs instead of at once "
                       "(upgrade redis-py)", self.name, why, self.resync_interval,
                       extra={"ring": self.name})

    def mismatch(self, exc: ValueError) -> None:
        """Log a settings mismatch found in the background, once."""
        message = str(exc)
        if message != self._mismatch_logged:
            self._mismatch_logged = message
            logger.error("%s; keeping the last known ring", message, extra={"ring": self.name})


#: Layouts whose ring gives a shared point to the node added first (and,
#: for haproxy, numbers the nodes in add order).
ORDERED_LAYOUTS = frozenset({"nginx", "ketama", "libmemcached", "haproxy", "varnish", "nghttpx"})


def _numbered_in_order(router: Any) -> bool:
    """Whether a haproxy-layout router's ids are 1, 2, 3... in node order
    (any other layout has no ids)."""
    if router.layout != "haproxy":
        return True
    return list(router.ids.values()) == list(range(1, len(router) + 1))


def _describe(added: list[str], removed: list[str], reweighed: list[str]) -> str:
    parts = []
    for label, nodes in (("added", added), ("removed", removed), ("reweighed", reweighed)):
        if nodes:
            shown = ", ".join(map(repr, nodes[:20]))
            more = f" and {len(nodes) - 20} more" if len(nodes) > 20 else ""
            parts.append(f"{label} {shown}{more}")
    return "; ".join(parts)


def _check_utf8(what: str, text: str) -> None:
    """ValueError naming ``what`` when ``text`` cannot be sent as UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"{what} {text!r} cannot be encoded as UTF-8") from exc
