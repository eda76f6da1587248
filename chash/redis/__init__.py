"""Redis from Python, sharded as twemproxy shards it.

``ShardedRedis`` keeps one redis-py client per shard and sends each command
to the shard of its key: twemproxy's ketama ring, server names and hash
tags, so a ``nodes`` list read from a twemproxy pool places every key where
nutcracker does; multi-key commands split per shard, pipelines one per
shard, ``scan_iter`` over all, twemproxy's ejection of failing shards.
``chash.redis.asyncio.ShardedRedis`` is the same over ``redis.asyncio``;
``reshard`` moves the keys whose shard changes while both serve.  Needs the
``redis`` extra: ``pip install 'chash-router[redis]'``.  See docs/clients.md.

* ``commands``: where a command's keys are, which commands split (no I/O);
* ``core``: shards, ring, hash tags, ejection, plans (no I/O);
* ``errors``: ``ShardError``, ``RoutingError``;
* ``client``: the sync face; ``asyncio``: the asyncio face;
* ``markers``: a resharding's bookkeeping (no I/O);
* ``reshard``: ``reshard`` and ``Resharding``.
"""
from __future__ import annotations

from chash.redis.client import ShardedPipeline, ShardedRedis
from chash.redis.commands import RoutingError
from chash.redis.core import Shard, hash_part, parse_node
from chash.redis.errors import ShardError, ShardTimeoutError
from chash.redis.reshard import Resharding, reshard

__all__ = ["Resharding", "RoutingError", "Shard", "ShardError", "ShardTimeoutError", "ShardedPipeline", "ShardedRedis",
           "hash_part", "parse_node", "reshard"]
