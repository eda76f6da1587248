"""``ShardedRedis`` over ``redis.asyncio``: the same core, routing and
answers as ``chash.redis.ShardedRedis``, each shard a ``redis.asyncio.Redis``,
a split command's and a pipeline's shards awaited together.

* ``client``: ``ShardedRedis`` and its pipeline.
"""
from __future__ import annotations

from chash.redis.asyncio.client import ShardedPipeline, ShardedRedis

__all__ = ["ShardedPipeline", "ShardedRedis"]
