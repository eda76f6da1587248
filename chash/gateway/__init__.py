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
  ``IDEMPOTENT_METHODS``); a pure leaf that any transport may share.
* ``heads``: request and response heads, parsed strictly without I/O.
* ``channel``, ``pool``: a buffered connection and per-backend keep-alive
  pools; ``bodies``: bodies of known length and the chunked coding.
* ``messages``: the heads and answers the gateway writes itself.
* ``proxy``: the proxy path; ``view`` and ``admin``: the admin listener,
  which reads the gateway through the ``GatewayView`` protocol.
* ``server``: the ``Gateway``, which owns the rest.

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
