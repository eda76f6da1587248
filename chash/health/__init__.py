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

The package, from the bottom up:

* ``state``: the state machine (``HealthState``), time-injected and I/O-free;
* ``settings``: ``HealthSettings``, the checkers' settings, validated once;
* ``membership``: the ``Membership`` protocol and ``LocalMembership``;
* ``probes``: one probe over http.client or aiohttp, and how it is judged;
* ``core``: what both runners share, from a round's bookkeeping to applying
  verdicts (``CheckerCore``);
* ``sync_checker``: ``HealthChecker``, rounds in a thread;
* ``async_checker``: ``AsyncHealthChecker``, rounds in an asyncio task.

See docs/health.md for the state machine and worked gateway examples.
"""

from __future__ import annotations

from chash.health.async_checker import AsyncHealthChecker
from chash.health.core import logger as logger
from chash.health.membership import LocalMembership, Membership
from chash.health.settings import OnChange as OnChange
from chash.health.settings import UrlSpec as UrlSpec
from chash.health.state import HealthState as HealthState
from chash.health.state import NodeState, NodeStatus
from chash.health.state import Transition as Transition
from chash.health.sync_checker import HealthChecker

__all__ = [
    "AsyncHealthChecker",
    "HealthChecker",
    "LocalMembership",
    "Membership",
    "NodeState",
    "NodeStatus",
]
