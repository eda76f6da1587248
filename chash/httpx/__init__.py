"""Sticky httpx transports: each request goes to the node owning its key.

``StickyTransport`` (``httpx.Client``) and ``AsyncStickyTransport``
(``httpx.AsyncClient``) route by a key spec or a callable, fail over along
the ring's preference list as the gateway does, report connection failures
to a health checker or a membership, and can bound each node's load.  They
serve httpx and its maintained fork httpx2 alike (needs the ``httpx``
extra: ``pip install 'chash-router[httpx]'``).  See docs/clients.md.

* ``exchange``: one request's key, URL, outcome and body, shared by both;
* ``sync_transport``, ``async_transport``: the two transports.
"""

from __future__ import annotations

from chash.httpx.async_transport import AsyncStickyTransport
from chash.httpx.exchange import KEY_EXTENSION
from chash.httpx.sync_transport import StickyTransport

__all__ = ["KEY_EXTENSION", "AsyncStickyTransport", "StickyTransport"]
