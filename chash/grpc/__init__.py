"""gRPC channels picked by key: one per node, failing over on UNAVAILABLE.

``ChannelPool`` (grpcio) and ``AsyncChannelPool`` (grpc.aio) keep one
channel per node of a ``chash.ConsistentHashRouter``, open it on first use
and close it once the node has left the ring.  ``channel_for(key)`` is the
owner's channel; ``unary_unary(method, ...)`` and the other three call kinds
return callables taking ``(request, *, key, timeout=None, metadata=None)``
that fail over along the ring's preference list on UNAVAILABLE and report
it to a health checker or a membership.  Needs the ``grpc`` extra
(``pip install 'chash-router[grpc]'``).  See docs/clients.md.

* ``calls``: grpcio, the call kinds, a node's channel, one call's failover;
* ``sync_pool``, ``async_pool``: the two pools.
"""

from __future__ import annotations

from chash.grpc.async_pool import AsyncChannelPool
from chash.grpc.sync_pool import ChannelPool

__all__ = ["AsyncChannelPool", "ChannelPool"]
