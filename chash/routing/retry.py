"""The retry policy of the gateway and the sticky clients, as a pure
function (no I/O, no clock).

After each attempt the caller asks ``next_attempt`` where to go next; the
answer depends only on the preference list, the attempt's position in it,
the request's method and what happened.  A leaf: it imports nothing of
chash, so that every transport routing by key shares the one policy.
Tested without sockets in tests/gateway/test_gateway_retry.py.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

__all__ = ["IDEMPOTENT_METHODS", "Outcome", "next_attempt"]

#: Methods safe to send twice (RFC 9110 §9.2.2): retried after any failure.
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"})


class Outcome(enum.Enum):
    """What one attempt to reach a backend came to."""

    ANSWERED = "answered"
    """The backend answered with a status the gateway passes on."""
    NOT_DELIVERED = "not delivered"
    """Connection refused, connect timeout, no pool slot: nothing was sent."""
    FAILED = "failed"
    """Disconnected or timed out after the request was (maybe) sent."""
    RETRY_STATUS = "retry status"
    """The backend answered one of the statuses configured for a retry."""


def next_attempt(nodes: Sequence[str], index: int, method: str, outcome: Outcome, *,
                 retry_unsafe: bool = False, replayable: bool = True) -> int | None:
    """The index in ``nodes`` to try after attempt ``index``, or None to stop.

    * ``ANSWERED``: stop, the answer goes to the client.
    * ``NOT_DELIVERED``: the next node, whatever the method: the backend
      never saw the request.
    * ``FAILED`` / ``RETRY_STATUS``: the next node only if the request may
      be sent twice (its method is idempotent, or ``retry_unsafe``) and its
      body can be sent again (``replayable``: not already streamed away).

    None as well when ``index`` is the last node of the list.
    """
    if outcome is Outcome.ANSWERED or index + 1 >= len(nodes):
        return None
    if outcome is Outcome.NOT_DELIVERED:
        return index + 1
    if replayable and (retry_unsafe or method in IDEMPOTENT_METHODS):
        return index + 1
    return None
