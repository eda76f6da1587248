"""What every caller routing requests by key shares, below the gateway.

* ``keys``: key specs (``KeyRule``: ``"header:X-User-Id"``, ``"cookie:NAME"``,
  ``"query:NAME"``, ``"path"``, ``"path:N"``) and ``parse_address``; a leaf;
* ``retry``: the retry policy (``next_attempt``, ``Outcome``,
  ``IDEMPOTENT_METHODS``); a leaf;
* ``sticky``: the sticky clients' core (``StickyRoutes``: preference lists,
  addresses, passive health, bounded loads; ``NodePool``: one resource per
  node, closed when the node leaves the ring), no I/O.

The gateway (``chash.gateway``) and the sticky clients (``chash.httpx``,
``chash.grpc``, ``chash.aiohttp``) import these modules directly.
"""
