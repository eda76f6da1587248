"""An aiohttp client middleware sending each request to the node owning its key.

``StickyMiddleware`` goes in ``aiohttp.ClientSession(middlewares=[...])``
(aiohttp 3.12 and later): the same key specs, failover along the ring and
health reports as ``chash.httpx``.  Needs the ``aiohttp`` extra
(``pip install 'chash-router[aiohttp]'``).  See docs/clients.md.
"""

from __future__ import annotations

from chash.aiohttp.middleware import StickyMiddleware

__all__ = ["StickyMiddleware"]
