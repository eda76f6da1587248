"""One request's walk along its preference list, as data: ``Failover``.

A plain request (``Proxy.forward``) and a WebSocket handshake
(``Proxy._upgrade``) walk their key's preference list alike: try the
owner; after a failed attempt, the next node if the retry policy
(``chash.gateway.retry.next_attempt``) allows it and the request's
deadline has not passed; when the walk ends unanswered, 504 if the last
failure was a timeout (or the deadline), else 502, with every node's
failure told.  ``Failover`` is that walk, written once: no I/O and no
clock (the caller passes the time), so the proxy keeps only the attempts.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from chash.gateway.retry import Outcome, next_attempt

__all__ = ["Failover"]

#: How a failure's detail begins when the node did not answer in time.
_LATE = ("timed out", "connect timed out", "no free")


class Failover:
    """The nodes one request tries, in turn; see the module docstring.

    ``for node in walk:`` yields the owner first, and after each attempt
    reported with ``failed`` the next node the policy allows; the walk
    ends when an attempt is not reported failed (it was answered), or when
    ``failed`` finds no next node.  ``method``, ``retry_unsafe`` and
    ``replayable`` are the policy's (``replayable``: the body can be sent
    again, not streamed away); ``deadline`` is the loop time past which no
    further attempt starts, ``limit`` the seconds it stands for (told in
    the verdict).
    """

    __slots__ = ("nodes", "attempt", "tried", "timed_out", "_method", "_retry_unsafe",
                 "_replayable", "_deadline", "_limit", "_over")

    def __init__(self, nodes: Sequence[str], method: str, *, retry_unsafe: bool,
                 replayable: bool, deadline: float, limit: float) -> None:
        if not nodes:
            raise ValueError("a failover walk needs at least one node")
        self.nodes = nodes
        #: The index in ``nodes`` of the node being tried.
        self.attempt = 0
        #: ``"node: what failed"`` for each failed attempt, in order.
        self.tried: list[str] = []
        #: Whether the walk ended on a timeout (504 rather than 502).
        self.timed_out = False
        self._method = method
        self._retry_unsafe = retry_unsafe
        self._replayable = replayable
        self._deadline = deadline
        self._limit = limit
        self._over = False

    def __iter__(self) -> Iterator[str]:
        while not self._over:
            attempt = self.attempt
            yield self.nodes[attempt]
            if self.attempt == attempt:  # not reported failed: answered
                return

    @property
    def owner(self) -> str:
        """The key's owner: the first node, which the request counts against."""
        return self.nodes[0]

    @property
    def node(self) -> str:
        """The node being tried."""
        return self.nodes[self.attempt]

    def last(self, outcome: Outcome) -> bool:
        """Whether the policy allows no further attempt after the one under
        way, were it to end with ``outcome`` (its answer is then the one
        the client gets, a status configured for a retry included)."""
        return self._following(outcome) is None

    def failed(self, detail: str, outcome: Outcome, now: float) -> None:
        """The attempt under way failed (``detail`` says how; ``outcome``
        what the policy sees): on to the next node the policy allows,
        unless the deadline has passed at ``now``."""
        self.tried.append(f"{self.node}: {detail}")
        self.timed_out = detail.startswith(_LATE)
        following = self._following(outcome)
        if following is not None and now >= self._deadline:
            self.tried.append(f"deadline of {self._limit:g}s passed")
            self.timed_out = True
            following = None
        if following is None:
            self._over = True
        else:
            self.attempt = following

    def verdict(self) -> tuple[int, str]:
        """``(status, message)`` of the gateway's answer when the walk
        ended unanswered: 504 after a timeout, else 502, naming each
        node's failure."""
        detail = "; ".join(self.tried)
        if self.timed_out:
            return 504, f"no backend answered in time ({detail})"
        return 502, f"no backend answered ({detail})"

    def _following(self, outcome: Outcome) -> int | None:
        return next_attempt(self.nodes, self.attempt, self._method, outcome,
                            retry_unsafe=self._retry_unsafe, replayable=self._replayable)
