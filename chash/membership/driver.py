"""The face both drivers share: settings, state and health votes.

Everything here is non-blocking and works from any thread: it reads the
core (``chash.membership.core``) or queues a vote there, then wakes the
driver's worker (``_poke``, which each driver defines).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from chash.membership.core import MembershipCore, SharedRouter
from chash.membership.settings import MembershipSettings
from chash.membership.state import MembershipState

__all__ = ["JOIN_TIMEOUT", "MembershipDriver"]

#: How long stop() waits for a thread or task stuck in a store call.
JOIN_TIMEOUT = 10.0


class MembershipDriver:
    """Settings and the non-blocking half of the API, shared by both drivers."""

    _core: MembershipCore

    def is_refusal(self, exc: BaseException) -> bool:
        """Whether ``exc``, raised by ``start()`` or an operator call, means
        the store refused this instance (authentication, permissions)
        rather than being out of reach."""
        return self._core.is_refusal(exc)

    @property
    def settings(self) -> MembershipSettings:
        """The settings this instance was made with."""
        return self._core.settings

    @property
    def router(self) -> SharedRouter:
        """The local router kept in step with the shared ring."""
        return self._core.router

    @property
    def name(self) -> str:
        """The ring's name in the store."""
        return self._core.name

    @property
    def reporter(self) -> str:
        """This instance's id when it votes on health."""
        return self._core.reporter

    @property
    def quorum(self) -> str:
        """The quorum rule: 'majority', 'any', 'all' or a count, as a str."""
        return self._core.quorum

    @property
    def vote_ttl(self) -> float:
        """Seconds a health vote counts unless renewed."""
        return self._core.vote_ttl

    @property
    def resync_interval(self) -> float:
        """Seconds between two checks of the ring."""
        return self._core.resync_interval

    @property
    def bootstrap(self) -> bool:
        """Whether this instance may create the ring before it ever synced."""
        return self._core.bootstrap

    @property
    def state(self) -> MembershipState | None:
        """The shared ring as last applied; None before the first sync."""
        return self._core.state

    @property
    def version(self) -> int:
        """The version of the ring as last applied (0 before the first sync)."""
        return self._core.position[1]

    @property
    def connected(self) -> bool:
        """False while the store is known to be unreachable or refuses this
        instance, and while an exchange has waited for an answer for longer
        than twice ``resync_interval`` (at least 2 s)."""
        return self._core.connected

    @property
    def stale_seconds(self) -> float:
        """0.0 while the store is reachable (``connected``); else how many
        seconds ago it last answered (since this instance was made, if it
        never did): routing goes on with the ring known then."""
        return self._core.stale_seconds

    @property
    def stale_since(self) -> float | None:
        """None while the store is reachable; else when it last answered,
        in seconds since the epoch (wall clock; this instance's creation
        if it never did)."""
        return self._core.stale_since

    def watched_nodes(self) -> dict[str, float]:
        """Every node to health-check (all but the disabled ones), with its
        weight, from the last state applied; no I/O."""
        return self._core.watched_nodes()

    def mark_down(self, node: str, reason: str) -> None:
        """Vote ``node`` down on behalf of this instance; returns at once.

        The vote is sent in the background with any others waiting; the
        node leaves every ring when the quorum of live reporters votes it
        down.  Unknown nodes are ignored by the store.
        """
        if not isinstance(node, str) or not isinstance(reason, str):
            raise TypeError("node and reason must be str")
        self._core.queue_vote(node, True, reason)
        self._poke()

    def mark_up(self, node: str) -> None:
        """Vote ``node`` up on behalf of this instance; returns at once."""
        if not isinstance(node, str):
            raise TypeError("node must be str")
        self._core.queue_vote(node, False)
        self._poke()

    def add_listener(self, listener: Callable[[], object]) -> None:
        """Call ``listener()`` after each change this membership makes to
        its router (a new version of the shared ring applied, or a router
        repaired), from the thread or task that made it; its errors are
        logged.  (The gateway closes the WebSocket tunnels a change moved.)"""
        if not callable(listener):
            raise TypeError(f"listener must be callable, not {listener!r}")
        self._core.listeners.append(listener)

    def remove_listener(self, listener: Callable[[], object]) -> None:
        """Stop calling ``listener`` (nothing if it was not added)."""
        with contextlib.suppress(ValueError):
            self._core.listeners.remove(listener)

    def _poke(self) -> None:
        """Wake the worker: a vote waits."""
        raise NotImplementedError
