"""``chash.gateway``: a sticky HTTP reverse proxy that routes every request
through the ring.

Build a ``Gateway`` from backend addresses and a ``GatewayConfig`` (where
the key comes from: a ``KeyRule``), ``await gateway.start()``, and every
request goes to the owner of its key, or to the next node of the key's
preference list when the owner fails (``next_attempt`` decides when that
is safe).  See docs/gateway.md.

The package, from the bottom up:

* ``config``: the settings (``GatewayConfig``, ``KeyRule``,
  ``parse_address``); a leaf.
* ``retry``: the retry policy (``next_attempt``, ``Outcome``,
  ``IDEMPOTENT_METHODS``), re-exported from ``chash.routing.retry``.
* ``heads``: parsed request heads and backend response heads, without
  I/O; ``parser``: client request heads (llhttp through httptools, the
  gateway's policy on top, in C), read one way
  (``RequestParser.next_request``).
* ``channel``, ``pool``: a buffered connection and per-backend keep-alive
  pools; ``bodies``: bodies of known length and the chunked coding.
* ``messages``: the heads and answers the gateway writes itself.
* ``express``: plain requests served from the connections' callbacks,
  everything else handed to the connection's task as data (``Handoff``);
  ``proxy``: the connection's task and the general path; ``llm``:
  completions routed by their prompt (``affinity="prefix"``) and event
  streams relayed chunk by chunk.
* ``view`` and ``admin``: the admin listener, which reads the gateway
  through the ``GatewayView`` protocol; ``tracing``: spans per attempt;
  ``slow_start``: a recovered node's weight ramped up.
* ``server``: the ``Gateway``, which owns the rest; ``workers``: the
  processes of ``--workers N`` as one gateway; ``supervisor``: the gateway
  as a program (one process, or N supervised), from a built ``Plan``.

Importing the package needs no extra; building a ``Gateway`` needs
aiohttp (``pip install 'chash-router[gateway]'``).
"""

from chash.gateway.config import KEY_SOURCES, GatewayConfig, KeyRule, parse_address
from chash.gateway.retry import IDEMPOTENT_METHODS, Outcome, next_attempt
from chash.gateway.server import Gateway

__all__ = [
    "IDEMPOTENT_METHODS",
    "KEY_SOURCES",
    "Gateway",
    "GatewayConfig",
    "KeyRule",
    "Outcome",
    "next_attempt",
    "parse_address",
]
